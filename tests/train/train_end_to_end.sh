#!/usr/bin/env bash
# llmc-train end to end on the CPU path, on a few documents of the corpus:
#  - a run interrupted after a checkpoint and resumed with -y 1 logs the same
#    losses, bit for bit, as a run that was never interrupted;
#  - bad input (a batch larger than the data, a checkpoint of another shape, a
#    corrupt shard, a missing tokenizer) gets a clear error and a non-zero exit.
# usage: train_end_to_end.sh BIN_DIR CORPUS_DIR
set -euo pipefail
bin="$1"
corpus="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_error "message fragment" command...: the command must fail and say it.
expect_error() {
  local want="$1"; shift
  if "$@" >"$work/out.txt" 2>&1; then cat "$work/out.txt"; fail "expected an error from: $*"; fi
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; fail "expected '$want' from: $*"; }
  echo "ok: error '$want'"
}

mkdir -p "$work/text"
for f in 1790_george_washington_n 1791_george_washington_n 1792_george_washington_n 1793_george_washington_n; do
  cp "$corpus/text/sotu/$f.txt" "$work/text/"
done
"$bin/llmc-data" --tokenizer "$corpus/gpt2-bpe" --out "$work/shards" --name tiny --val-docs 1 "$work/text" >/dev/null

model=(-e d1 --channels 32 --heads 2 -b 2 -t 16 -l 1e-3 -v 3 -m 2 -s 0 --seed 7
       -i "$work/shards/tiny_train_*.bin" -j "$work/shards/tiny_val_*.bin" --tokenizer "$corpus/gpt2-bpe")

"$bin/llmc-train" "${model[@]}" -x 6 -o "$work/straight" >/dev/null
# An interruption after the step-3 checkpoint: a run whose later checkpoint
# and log lines are gone...
"$bin/llmc-train" "${model[@]}" -x 6 -n 3 -o "$work/resumed" > /dev/null
rm "$work/resumed/model_00000006.bin" "$work/resumed/state_00000006.bin"
grep -v '^s:[456] ' "$work/resumed/main.log" > "$work/head.log"
mv "$work/head.log" "$work/resumed/main.log"
# ...and -y 1 continues from the newest complete checkpoint (step 3).
"$bin/llmc-train" "${model[@]}" -x 6 -n 3 -y 1 -o "$work/resumed" > "$work/resume.txt"
grep -q "resumed from .*model_00000003.bin (step 3)" "$work/resume.txt" || { cat "$work/resume.txt"; fail "did not resume from step 3"; }

straight="$(grep -E '^s:[456] (trl|tel)' "$work/straight/main.log" | sed 's/ ms:.*//')"
resumed="$(grep -E '^s:[456] (trl|tel)' "$work/resumed/main.log" | sed 's/ ms:.*//')"
[[ -n "$straight" ]] || fail "no losses logged for steps 4-6"
if [[ "$straight" != "$resumed" ]]; then
  diff <(echo "$straight") <(echo "$resumed") || true
  fail "the resumed run's losses differ from the uninterrupted run's"
fi
echo "ok: resumed losses equal the uninterrupted run's, bit for bit:"
echo "$resumed"

expect_error "fewer than one batch" "$bin/llmc-train" "${model[@]}" -b 64 -t 512 -x 1
expect_error "is a model of" "$bin/llmc-train" "${model[@]}" --channels 48 -x 6 -y 1 -o "$work/resumed"
printf 'not a shard' > "$work/shards/tiny_train_999999.bin"
expect_error "tiny_train_999999.bin" "$bin/llmc-train" "${model[@]}" -x 1
rm "$work/shards/tiny_train_999999.bin"
expect_error "encoder.json" "$bin/llmc-data" --tokenizer "$work/nowhere" --out "$work/x" "$work/text"
expect_error "no training data" "$bin/llmc-train" -e d1
# B*T overflowed 64 bits to 0 and '-d % 0' died of SIGFPE: now refused.
expect_error "-b 4294967296 is too large (at most 2147483647)" "$bin/llmc-train" -i x -b 4294967296 -t 4294967296
expect_error "B*T = 65536*65536 = 4294967296 tokens per micro-batch is too many" "$bin/llmc-train" -i x -b 65536 -t 65536
echo "all train end-to-end checks passed"
