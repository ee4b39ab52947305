# Sourced by the browser tests: `chromium`, the browser on PATH, or exit 77
# (ctest: skipped, not passed) where there is none; `fail MESSAGE`, exit 1.
# The sourcing script sets `test_name` first.
chromium="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$chromium" ]]; then
  echo "$test_name: SKIPPED: no chromium on PATH (Debian: apt-get install chromium)"
  exit 77
fi

fail() {
  echo "$test_name: FAILED: $*" >&2
  exit 1
}
