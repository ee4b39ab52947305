#!/usr/bin/env bash
# benchmarks/train/loss_curves.py on the CPU path: a fresh tiny model made
# once, then trained from that checkpoint; the picture has llmc's curve (its
# steps counted from 1, as the PyTorch runner's step lines count them), the
# table a row per tenth of the run. Then --plot with a second log in the
# PyTorch runner's format: two curves, and the difference column.
# usage: loss_curves.sh BIN_DIR CORPUS_DIR SOURCE_DIR
set -euo pipefail
bin="$1"
corpus="$2"
src="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/text"
for f in 1790_george_washington_n 1791_george_washington_n; do cp "$corpus/text/sotu/$f.txt" "$work/text/"; done
"$bin/llmc-data" --tokenizer "$corpus/gpt2-bpe" --out "$work/shards" --name tiny --val-docs 1 "$work/text" >/dev/null

python3 "$src/benchmarks/train/loss_curves.py" --llmc-train "$bin/llmc-train" --device cpu --only llmc \
  -e d1 --init-arg=--channels --init-arg=16 --init-arg=--heads --init-arg=1 -b 2 -t 12 -x 20 \
  -i "$work/shards/tiny_train_*.bin" --work "$work/run" --out "$work/one" > "$work/out.txt"
[[ -f "$work/run/init/model_00000001.bin" ]] || fail "no common starting checkpoint"
grep -q -- "-e $work/run/init/model_00000001.bin -x 20" "$work/one.txt" || fail "the run did not start from the checkpoint"
[[ "$(grep -c 'class="raw" data-run="llmc"' "$work/one.svg")" == 1 ]] || fail "no llmc curve"
grep -q '^| 1-2 | ' "$work/one.txt" || { cat "$work/one.txt"; fail "the table does not start at step 1"; }
[[ "$(grep -c '^| [0-9]*-[0-9]* | ' "$work/one.txt")" == 10 ]] || fail "not ten rows"
grep -q 'llmc [0-9.]* at step 20' "$work/one.svg" || fail "the last step is not 20"

# The same losses, 0.5 lower, in the PyTorch runner's step lines.
awk '{ split($1, s, ":"); split($2, l, ":"); printf "step %5d/20 | loss %.6f | norm 1.0 | lr 3.00e-04\n", s[2] + 1, l[2] - 0.5 }' \
  "$work/run/llmc/main.log" > "$work/torch.log"
python3 "$src/benchmarks/train/loss_curves.py" --plot "$work/run/llmc/main.log" "$work/torch.log" --out "$work/two" > /dev/null
[[ "$(grep -c 'class="average"' "$work/two.svg")" == 2 ]] || fail "not two curves"
grep -q '| llmc - PyTorch |' "$work/two.txt" || fail "no difference column"
[[ "$(grep -c ' | +0.5000 |$' "$work/two.txt")" == 10 ]] || { cat "$work/two.txt"; fail "the difference is not 0.5 in every row"; }
echo "loss_curves: ok"
