#!/usr/bin/env bash
# The ctest train_without_cuda, registered only in a build without the CUDA
# toolkit (scripts/test_nocuda.sh): what needs the GPU path says the toolkit
# is missing and exits 1 (an error, not a bad command line, not a bug), before
# any work; --device auto falls back to the CPU path and says why; llmc-run
# checks a diagram, then exits 77 saying why it runs nothing.
# usage: without_cuda.sh BIN_DIR
set -euo pipefail
bin="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
message="this llmc was built without the CUDA toolkit, which the GPU path needs"

# expect_refusal WHAT ARGS...: exit status 1 and the message naming WHAT.
expect_refusal() {
  local what="$1"; shift
  local status=0
  "$bin/llmc-train" "$@" > "$work/out.txt" 2>&1 || status=$?
  [[ $status -eq 1 ]] || { cat "$work/out.txt"; fail "exit status $status (expected 1) from: llmc-train $*"; }
  grep -qF "llmc-train: error: $what: $message" "$work/out.txt" || { cat "$work/out.txt"; fail "no message from: $*"; }
  # Refused before the data is looked at: the glob matches nothing.
  ! grep -q "no shard files match" "$work/out.txt" || fail "the data was read before the refusal"
  echo "ok: $what refused"
}
expect_refusal "--device cuda" --device cuda -i "$work/none_*.bin"
expect_refusal "several processes (--gpus, -pn)" --gpus 2 -i "$work/none_*.bin"
expect_refusal "several processes (--gpus, -pn)" -pn 2 -pr 1 -pf "$work" -i "$work/none_*.bin"

# --device auto (the default): the CPU path, saying why.
python3 - "$work/shard_train_000000.bin" <<'PY'
import struct, sys
tokens = [(i * 7919) % 50257 for i in range(600)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
"$bin/llmc-train" -i "$work/shard_train_*.bin" -e d1 --channels 32 --heads 2 -b 2 -t 16 -x 1 -v 0 -s 0 \
  > "$work/auto.txt" 2>&1 || { cat "$work/auto.txt"; fail "llmc-train --device auto failed"; }
grep -qF "device: cpu (reference interpreter): no GPU ($message" "$work/auto.txt" \
  || { cat "$work/auto.txt"; fail "--device auto did not say why it runs on the CPU"; }
grep -q "^step     1/1 | loss " "$work/auto.txt" || { cat "$work/auto.txt"; fail "no step taken"; }
echo "ok: --device auto trains on the CPU and says why"

# llmc-run is built without the toolkit too: it checks the diagram and its
# inputs, then says why nothing runs and exits 77 (no usable GPU).
status=0
"$bin/llmc-run" "$(dirname "${BASH_SOURCE[0]}")/../lit/streams/softmax_contraction.dg" --set T=8,X=16,D=4 --check \
  > "$work/run.txt" 2>&1 || status=$?
[[ $status -eq 77 ]] || { cat "$work/run.txt"; fail "llmc-run: exit status $status (expected 77)"; }
grep -qF "llmc-run: no usable GPU (this llmc was built without the CUDA toolkit" "$work/run.txt" \
  || { cat "$work/run.txt"; fail "llmc-run did not say it was built without the toolkit"; }
status=0
"$bin/llmc-run" "$(dirname "${BASH_SOURCE[0]}")/../lit/streams/softmax_contraction.dg" --set T=8,X=16,D=4,Q=4 > "$work/run.txt" 2>&1 \
  || status=$?
[[ $status -eq 2 ]] || { cat "$work/run.txt"; fail "llmc-run checked nothing before the GPU (exit $status)"; }
echo "ok: llmc-run checks the diagram, then says the toolkit is missing (exit 77)"
