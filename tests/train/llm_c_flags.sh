#!/usr/bin/env bash
# llmc-train's llm.c flags end to end on the CPU path, where they are seen:
#  - -h N is HellaSwag (an "s:STEP eval:ACC" line in main.log at the
#    validation steps after 0 and at the last), -h alone is still help; a bad
#    or missing eval file is named;
#  - -a 1 trains every step on the same batch (at -l 0 every loss is equal);
#  - -nk deletes old checkpoints, sparing -nm's major ones;
#  - -k linear's rates reach main.log; main.log numbers training steps from 0;
#  - the training data is shuffled unless --shuffle 0;
#  - -sl/-sg run (z-scores printed; --device cuda refuses them), and the flags accepted for llm.c's
#    scripts (-f, -ge, -lg, -w 1, -r 2, -d -1) are taken.
# usage: llm_c_flags.sh BIN_DIR CORPUS_DIR
set -euo pipefail
bin="$1"
corpus="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_error() {
  local want="$1"; shift
  if "$@" >"$work/out.txt" 2>&1; then cat "$work/out.txt"; fail "expected an error from: $*"; fi
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; fail "expected '$want' from: $*"; }
  echo "ok: error '$want'"
}

mkdir -p "$work/text"
for f in 1790_george_washington_n 1791_george_washington_n 1792_george_washington_n; do
  cp "$corpus/text/sotu/$f.txt" "$work/text/"
done
"$bin/llmc-data" --tokenizer "$corpus/gpt2-bpe" --out "$work/shards" --name tiny --val-docs 1 "$work/text" >/dev/null
train=(-e d1 --channels 16 --heads 1 -b 2 -t 12 -m 1 -s 0 --seed 3 --device cpu
       -i "$work/shards/tiny_train_*.bin" -j "$work/shards/tiny_val_*.bin")

# -h alone, or before another flag, is help; -h 1 is HellaSwag.
# (Output to a file first: grep -q stops reading, and pipefail would count the
# writer's SIGPIPE.)
"$bin/llmc-train" -h > "$work/help.txt"
grep -q '^usage: llmc-train' "$work/help.txt" || fail "-h alone does not print the usage"
"$bin/llmc-train" -h -i x > "$work/help.txt"
grep -q '^usage: llmc-train' "$work/help.txt" || fail "-h before a flag does not print the usage"
"$bin/llmc-train" --help > "$work/help.txt"
grep -q -- '-h, --hellaswag 0|1' "$work/help.txt" || fail "--help does not describe -h 0|1"
echo "ok: -h without a number is help"

python3 "$here/write_eval_file.py" "$work/hellaswag.bin" 6 --seed 1
"$bin/llmc-train" "${train[@]}" -x 4 -v 2 -h 1 --hellaswag-file "$work/hellaswag.bin" -o "$work/hs" > "$work/hs.txt"
grep -qE '^HellaSwag: [0-6]/6 = [0-9.]+' "$work/hs.txt" || { cat "$work/hs.txt"; fail "no HellaSwag line"; }
evals="$(grep -E ' eval:' "$work/hs/main.log" | sed 's/eval:.*/eval/')"
[[ "$evals" == $'s:2 eval\ns:4 eval' ]] || { cat "$work/hs/main.log"; fail "eval lines at other steps than 2 and 4"; }
grep -E ' eval:' "$work/hs/main.log" | grep -qvE '^s:[0-9]+ eval:[01]\.[0-9]{4}$' && fail "eval lines not in llm.c's format"
echo "ok: -h 1 logs $(grep -c ' eval:' "$work/hs/main.log") eval lines, llm.c's format"
python3 "$here/write_eval_file.py" "$work/bad.bin" 3 --magic 7
expect_error "$work/bad.bin: bad magic 7" "$bin/llmc-train" "${train[@]}" -x 1 -h 1 --hellaswag-file "$work/bad.bin"
expect_error "-h 1: no HellaSwag eval file $work/none.bin" \
  "$bin/llmc-train" "${train[@]}" -x 1 -h 1 --hellaswag-file "$work/none.bin"
expect_error "-sg runs on the CPU path only" "$bin/llmc-train" -i x -sg 3 --device cuda

# main.log numbers training steps from 0 (llm.c's logger), validations by the
# steps done.
first="$(grep -m1 ' trl:' "$work/hs/main.log")"
[[ "$first" == "s:0 trl:"* ]] || fail "the first training step is logged as '$first', not s:0"
grep -q '^s:0 tel:' "$work/hs/main.log" || fail "no validation at s:0"
echo "ok: main.log's step numbers are llm.c's"

# -a 1 at learning rate 0: the model never changes, so the same batch gives
# the same loss every step; without -a the batches (and losses) differ.
losses() { grep ' trl:' "$1/main.log" | sed 's/.*trl:\([^ ]*\).*/\1/' | sort -u | wc -l; }
"$bin/llmc-train" "${train[@]}" -x 3 -v 0 -l 0 -a 1 -o "$work/overfit" > "$work/overfit.txt"
[[ "$(losses "$work/overfit")" == 1 ]] || { cat "$work/overfit/main.log"; fail "-a 1 trained on different batches"; }
"$bin/llmc-train" "${train[@]}" -x 3 -v 0 -l 0 -a 0 -o "$work/plain" > /dev/null
[[ "$(losses "$work/plain")" == 3 ]] || { cat "$work/plain/main.log"; fail "without -a the batches repeat"; }
echo "ok: -a 1 repeats one batch"

# -nk 2 -nm 2 with a checkpoint every step: 3 and 4 kept, 2 spared as major.
"$bin/llmc-train" "${train[@]}" -x 4 -v 0 -n 1 -nk 2 -nm 2 -o "$work/keep" > /dev/null
kept="$(cd "$work/keep" && ls model_*.bin state_*.bin | tr '\n' ' ')"
[[ "$kept" == "model_00000002.bin model_00000003.bin model_00000004.bin state_00000002.bin state_00000003.bin state_00000004.bin " ]] \
  || fail "-nk 2 -nm 2 kept: $kept"
echo "ok: -nk 2 -nm 2 keeps steps 2 (major), 3 and 4"

# -k linear from 1e-3 to 0 over 4 steps: 1e-3, 7.5e-4, 5e-4, 2.5e-4.
"$bin/llmc-train" "${train[@]}" -x 4 -v 0 -k linear -l 1e-3 -q 0 -o "$work/linear" > /dev/null
rates="$(grep ' trl:' "$work/linear/main.log" | sed 's/.*lr:\([^ ]*\).*/\1/' | tr '\n' ' ')"
[[ "$rates" == "1.000000e-03 7.500000e-04 5.000000e-04 2.500000e-04 " ]] || fail "-k linear's rates: $rates"
echo "ok: -k linear: $rates"

# Shuffled by default (another first batch than in file order).
"$bin/llmc-train" "${train[@]}" -x 1 -v 0 -l 0 -o "$work/shuffled" > "$work/shuffled.txt"
grep -q 'per epoch, shuffled' "$work/shuffled.txt" || fail "the training data is not shuffled by default"
"$bin/llmc-train" "${train[@]}" -x 1 -v 0 -l 0 --shuffle 0 -o "$work/ordered" > /dev/null
[[ "$(grep ' trl:' "$work/shuffled/main.log" | cut -d' ' -f2)" != "$(grep ' trl:' "$work/ordered/main.log" | cut -d' ' -f2)" ]] \
  || fail "--shuffle 0 reads the same first batch as the shuffled default"
echo "ok: shuffled by default, in file order with --shuffle 0"

"$bin/llmc-train" "${train[@]}" -x 2 -v 0 -sl 3 -sg 3 -f 0 -ge 2 -lg 5 -w 1 -r 2 -d -1 > "$work/z.txt"
grep -qE '^step +2/2 \| loss [0-9.]+ \(\+?nanz\) \| norm [0-9.]+ \(\+?nanz\)' "$work/z.txt" \
  || { cat "$work/z.txt"; fail "-sl/-sg print no z-scores"; }
echo "ok: -sl/-sg, -f, -ge, -lg, -w 1, -r 2, -d -1 accepted"
echo "all llm.c flag checks passed"
