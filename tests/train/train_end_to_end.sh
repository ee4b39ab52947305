#!/usr/bin/env bash
# llmc-train end to end on the CPU path, on a few documents of the corpus:
#  - a run interrupted after a checkpoint and resumed with -y 1 logs the same
#    losses, bit for bit, as a run that was never interrupted;
#  - no temporaries are left in the output folder;
#  - a checkpoint or state to resume from that holds NaN or infinity, claims
#    2^61 parameters or is cut short is refused, naming the file and the field;
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
# (main.log numbers a training step from 0, as llm.c: s:3 trl is the step
# after the step-3 checkpoint.)
grep -vE '^s:[345] trl|^s:6 tel' "$work/resumed/main.log" > "$work/head.log"
mv "$work/head.log" "$work/resumed/main.log"
# ...and -y 1 continues from the newest complete checkpoint (step 3).
"$bin/llmc-train" "${model[@]}" -x 6 -n 3 -y 1 -o "$work/resumed" > "$work/resume.txt"
grep -q "resumed from .*model_00000003.bin (step 3)" "$work/resume.txt" || { cat "$work/resume.txt"; fail "did not resume from step 3"; }

straight="$(grep -E '^s:[345] trl|^s:6 tel' "$work/straight/main.log" | sed 's/ ms:.*//')"
resumed="$(grep -E '^s:[345] trl|^s:6 tel' "$work/resumed/main.log" | sed 's/ ms:.*//')"
[[ -n "$straight" ]] || fail "no losses logged for steps 4-6 (s:3..5 trl, s:6 tel)"
if [[ "$straight" != "$resumed" ]]; then
  diff <(echo "$straight") <(echo "$resumed") || true
  fail "the resumed run's losses differ from the uninterrupted run's"
fi
echo "ok: resumed losses equal the uninterrupted run's, bit for bit:"
echo "$resumed"

# Nothing but the checkpoints, the log, the plot and the samples in -o: no
# temporaries left by the writes.
leftover="$(ls -A "$work/resumed" | grep -vE '^(model|state)_[0-9]{8}\.bin$|^main\.log$|^loss\.svg$|^samples\.txt$' || true)"
[[ -z "$leftover" ]] || fail "files left in the output folder: $leftover"
echo "ok: no temporaries left in the output folder"

# A restored state is checked before training resumes from it: non-finite
# moments or weights, and counts whose size would wrap, are refused by name.
# put_bytes FILE OFFSET HEX: overwrites bytes in place.
put_bytes() { printf "$(echo "$3" | sed 's/../\\x&/g')" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
cp -r "$work/resumed" "$work/nan_state"
put_bytes "$work/nan_state/state_00000006.bin" $((1024 + 4 * 5)) 0000c07f   # m[5] = NaN
expect_error "state_00000006.bin: the optimizer's first moment m holds a non-finite value (nan) at index 5" \
  "$bin/llmc-train" "${model[@]}" -x 8 -y 1 -o "$work/nan_state"
cp -r "$work/resumed" "$work/nan_model"
put_bytes "$work/nan_model/model_00000006.bin" 1024 0000807f                # wte[0] = +inf
expect_error "model_00000006.bin: parameter wte holds a non-finite value (inf) at index 0" \
  "$bin/llmc-train" "${model[@]}" -x 8 -y 1 -o "$work/nan_model"
cp -r "$work/resumed" "$work/huge_state"
put_bytes "$work/huge_state/state_00000006.bin" 12 0000000000000020           # 2^61 parameters
expect_error "a parameter count of 2305843009213693952 in header[3..4] is impossibly large" \
  "$bin/llmc-train" "${model[@]}" -x 8 -y 1 -o "$work/huge_state"
cp -r "$work/resumed" "$work/short_state"
truncate -s -4 "$work/short_state/state_00000006.bin"
expect_error "(truncated)" "$bin/llmc-train" "${model[@]}" -x 8 -y 1 -o "$work/short_state"

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
# A glob that matches nothing is said before a model is made (no "model:" line).
expect_error 'no shard files match' "$bin/llmc-train" -e d12 -i "$work/nosuch_*.bin" --device cpu
if grep -q '^model:' "$work/out.txt"; then fail "a model was made before the empty glob was found"; fi
echo "all train end-to-end checks passed"
