#!/usr/bin/env bash
# Builds llmc (via setup.sh) and runs every test with ctest. Extra arguments go
# to ctest, e.g. `./scripts/test.sh -L lit` or `./scripts/test.sh -R parser`.
# GPU tests (label gpu) report as skipped on a machine without a GPU.
#
#   LLMC_BUILD_DIR   build directory (default: build)
set -euo pipefail
trap 'echo "test.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${LLMC_BUILD_DIR:-build}"

./scripts/setup.sh

echo "test.sh: running ctest in $build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
