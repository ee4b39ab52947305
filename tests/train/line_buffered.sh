#!/usr/bin/env bash
# llmc-train's standard output is line-buffered through a pipe (issue 24:
# scripts/run.sh pipes it through tee, and its start-up lines came only when
# the first step ended). The model file is a FIFO that no one writes, so
# llmc-train blocks reading it right after printing the data's line: that line
# must reach the pipe while it waits. A fully buffered stdout would hold it
# until exit. Then the FIFO is opened and closed empty: llmc-train reads an
# empty model file and fails, which shows it was still waiting.
# usage: line_buffered.sh BIN_DIR
set -euo pipefail
bin="$1"
work="$(mktemp -d)"
# Whatever happens, llmc-train is not left waiting on the FIFO: it is opened
# for writing and closed, without waiting where no one reads it.
unblock() { python3 -c 'import os, sys
try: os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK))
except OSError: pass' "$work/model.bin"; }
trap 'unblock; wait; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 - "$work/shard_train_000000.bin" <<'PY'
import struct, sys
tokens = [(i * 7919) % 50257 for i in range(600)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
mkfifo "$work/model.bin"
# Through a pipe (cat), as through tee: stdout is not a terminal.
"$bin/llmc-train" --device cpu -e "$work/model.bin" -i "$work/shard_train_*.bin" -b 2 -t 16 -x 1 2>&1 \
  | cat > "$work/out.txt" &
for _ in $(seq 1 300); do
  grep -q "^train data: 1 shard(s)" "$work/out.txt" && break
  sleep 0.1
done
grep -q "^train data: 1 shard(s)" "$work/out.txt" \
  || { cat "$work/out.txt"; fail "the first line did not reach the pipe while llmc-train waited (not line-buffered)"; }
# Still waiting on the FIFO: an empty model file ends it with an error.
unblock
wait
grep -q "model.bin" "$work/out.txt" || { cat "$work/out.txt"; fail "llmc-train did not fail on the empty model file"; }
! grep -q "^model:" "$work/out.txt" || { cat "$work/out.txt"; fail "llmc-train read a model from an empty FIFO"; }
echo "ok: llmc-train's start-up line reached the pipe while it still ran"
