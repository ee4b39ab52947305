#!/usr/bin/env bash
# llmc as a machine without the CUDA toolkit builds it: CMake told not to look
# for the toolkit (-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON), so only the
# compiler, the interpreter, the CPU trainer and llmc-data are built, and the
# GPU runtime and its tests are left out.
#
#   scripts/test_nocuda.sh [CTEST_ARGS...]
#       configures build-test-nocuda/ (LLMC_NOCUDA_BUILD_DIR picks another),
#       builds everything with two jobs and runs ctest there: every test passes
#       or is skipped (GPU tests, lit's REQUIRES: nvrtc). About 3.5 minutes on
#       two cores after build/ was built (ccache hands back its objects: the
#       folders are at the same depth); far longer cold.
#   scripts/test_nocuda.sh --quick DIR
#       the ctest nocuda_sources (in scripts/test.sh's run, about a minute):
#       configures DIR without the toolkit and checks, building nothing, that
#        - no target links the GPU runtime (llmc_cuda, llmc_train_gpu, NVRTC),
#        - every source that includes a training header (runtime/train/*.h,
#          where cuda.h leaked in before), and the tools' main files, compile
#          (syntax only) with the include paths of that configuration, which
#          hold none of runtime/cuda's headers nor the toolkit's.
set -euo pipefail
trap 'echo "test_nocuda.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

configure() {
  cmake -S "$repo" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
}

if [[ "${1:-}" == "--quick" ]]; then
  [[ $# -eq 2 ]] || { echo "usage: $0 --quick DIR" >&2; exit 2; }
  dir="$2"
  configure "$dir" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  if grep -nE 'llmc_cuda|llmc_train_gpu|nvrtc' "$dir/build.ninja" | head -5; then
    echo "test_nocuda.sh: the build without the toolkit still names the GPU runtime (above)" >&2
    exit 1
  fi
  echo "test_nocuda.sh: no target links the GPU runtime"
  # The compile commands of the sources to check, NUL-separated, each run in
  # its folder with -fsyntax-only in place of its object file.
  python3 - "$dir/compile_commands.json" "$repo" > "$dir.sources" <<'PY'
import json, os, re, shlex, sys
commands, repo = json.load(open(sys.argv[1])), sys.argv[2]
headers = [h for h in os.listdir(os.path.join(repo, "runtime/train")) if h.endswith(".h")]
include = re.compile(r'^\s*#\s*include\s+"(%s)"' % "|".join(re.escape(h) for h in headers), re.M)
for c in commands:
    source = c["file"]
    if not (source.startswith(os.path.join(repo, "tools") + "/") or include.search(open(source).read())):
        continue
    command = re.sub(r" -o \S+", "", c["command"])
    command = re.sub(r" -M[DT]? -MT \S+ -MF \S+| -MD| -MT \S+| -MF \S+", "", command)
    sys.stdout.write("cd %s && %s -fsyntax-only\0" % (shlex.quote(c["directory"]), command))
PY
  count="$(tr -cd '\0' < "$dir.sources" | wc -c)"
  ((count >= 10)) || { echo "test_nocuda.sh: only $count sources to check: the selection is broken" >&2; exit 1; }
  xargs -0 -P2 -I{} sh -c '{}' < "$dir.sources"
  echo "test_nocuda.sh: $count sources that include training headers, and the tools, compile without CUDA's headers"
  exit 0
fi

build_dir="${LLMC_NOCUDA_BUILD_DIR:-$repo/build-test-nocuda}"
configure "$build_dir"
cmake --build "$build_dir" -j2
ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
