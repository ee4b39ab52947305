#!/bin/sh
# Runs llmc-libfuzz-frontend (README.md here) on the repository's diagrams and
# lit tests as seeds. Usage, from the repository's root:
#   tests/fuzz/frontend/run_libfuzz.sh BUILD_DIR [libFuzzer flags ...]
# e.g. tests/fuzz/frontend/run_libfuzz.sh build-libfuzz -runs=1000000
# The corpus libFuzzer grows goes to BUILD_DIR/libfuzz-corpus (kept between
# runs), crashes and timeouts to BUILD_DIR/libfuzz-failures/.
set -eu
build=${1:?usage: run_libfuzz.sh BUILD_DIR [libFuzzer flags ...]}
shift
here=$(dirname "$0")
root=$(cd "$here/../../.." && pwd)
seeds="$build/libfuzz-seeds"
corpus="$build/libfuzz-corpus"
failures="$build/libfuzz-failures"
mkdir -p "$seeds" "$corpus" "$failures"
# Every .dg file once, named by its path (the same name is in several folders).
(cd "$root" && find diagrams tests/lit -name '*.dg') |
  while read -r f; do cp "$root/$f" "$seeds/$(echo "$f" | tr / _)"; done
exec "$build/bin/llmc-libfuzz-frontend" -dict="$here/frontend.dict" -timeout=2 -rss_limit_mb=2048 \
  -max_len=8192 -artifact_prefix="$failures/" -print_final_stats=1 "$@" "$corpus" "$seeds"
