#!/usr/bin/env bash
# llmc-sample end to end, and llm.c's tokenizer file between the tools:
#  - llmc-data writes gpt2_tokenizer.bin beside the shards; llmc-train prints
#    the same samples with it as with GPT-2's BPE folder;
#  - llmc-train --device cpu trains a tiny model two steps; llmc-sample
#    continues a prompt from its checkpoint: the same text from the same seed,
#    other text from another; greedy (--temperature 0) is the same as top-k 1
#    whatever the seed (that greedy is argmax: tests/unit/sampler_test.cpp);
#  - a missing or wrong checkpoint, a prompt with a tokenizer that cannot
#    encode, and bad command lines get clear errors and exit 1 or 2.
# usage: sample_test.sh BIN_DIR DATA_DIR   (DATA_DIR: ../shared/data)
set -euo pipefail
bin="$1"
data="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_status STATUS "message fragment" command...: exits STATUS and says it.
expect_status() {
  local status="$1" want="$2"; shift 2
  local got=0
  "$@" >"$work/out.txt" 2>&1 || got=$?
  [[ "$got" == "$status" ]] || { cat "$work/out.txt"; fail "expected exit $status, got $got from: $*"; }
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; fail "expected '$want' from: $*"; }
  echo "ok: exit $status, '$want'"
}

mkdir -p "$work/text"
cp "$data"/text/sotu/179[0-3]_*.txt "$work/text/"
"$bin/llmc-data" --tokenizer "$data/gpt2-bpe" --out "$work/shards" --name tiny --val-docs 1 "$work/text" >/dev/null
[[ -f "$work/shards/gpt2_tokenizer.bin" ]] || fail "llmc-data wrote no gpt2_tokenizer.bin beside the shards"
[[ "$(od -An -tu4 -N16 "$work/shards/gpt2_tokenizer.bin" | xargs)" == "20240328 2 50257 50256" ]] \
  || fail "gpt2_tokenizer.bin's header is not llm.c's"
echo "ok: gpt2_tokenizer.bin beside the shards"

train=(-e d1 --channels 32 --heads 2 -b 2 -t 16 -x 2 -v 0 -s 2 -g 12 --seed 3 --device cpu
       -i "$work/shards/tiny_train_*.bin")
"$bin/llmc-train" "${train[@]}" --tokenizer "$data/gpt2-bpe" -o "$work/run" > "$work/bpe.txt"
"$bin/llmc-train" "${train[@]}" --tokenizer "$work/shards/gpt2_tokenizer.bin" > "$work/bin.txt"
# The text between the two --- lines after "sample at step".
sample_of() { awk '/^sample at step/ {s = 1; next} s == 1 && /^---$/ {s = 2; next} s == 2 && /^---$/ {exit} s == 2' "$1"; }
[[ -n "$(sample_of "$work/bpe.txt")" ]] || { cat "$work/bpe.txt"; fail "llmc-train printed no sample"; }
[[ "$(sample_of "$work/bpe.txt")" == "$(sample_of "$work/bin.txt")" ]] \
  || { diff "$work/bpe.txt" "$work/bin.txt" || true; fail "llmc-train's sample differs with gpt2_tokenizer.bin"; }
echo "ok: llmc-train decodes its sample alike with gpt2_tokenizer.bin and the BPE folder"

model="$work/run/model_00000002.bin"
[[ -f "$model" ]] || fail "no checkpoint $model"
sample=("$bin/llmc-sample" "$model" --tokenizer "$data/gpt2-bpe" -n 12)
"${sample[@]}" --prompt "The Congress" --seed 1 --top-k 40 > "$work/a.txt"
"${sample[@]}" --prompt "The Congress" --seed 1 --top-k 40 > "$work/b.txt"
"${sample[@]}" --prompt "The Congress" --seed 2 --top-k 40 > "$work/c.txt"
[[ "$(head -c 12 "$work/a.txt")" == "The Congress" ]] || { cat "$work/a.txt"; fail "the prompt does not start the text"; }
[[ "$(wc -c < "$work/a.txt")" -gt 14 ]] || { cat "$work/a.txt"; fail "nothing generated"; }
cmp -s "$work/a.txt" "$work/b.txt" || fail "the same seed gave different text"
! cmp -s "$work/a.txt" "$work/c.txt" || fail "seeds 1 and 2 gave the same text"
echo "ok: the same seed, the same text; another seed, other text"

"${sample[@]}" --prompt "The Congress" --ids --temperature 0 --seed 1 > "$work/greedy1.txt"
"${sample[@]}" --prompt "The Congress" --ids --top-k 1 --seed 7 > "$work/greedy2.txt"
[[ "$(wc -w < "$work/greedy1.txt")" -eq 12 ]] || { cat "$work/greedy1.txt"; fail "--ids did not print 12 ids"; }
cmp -s "$work/greedy1.txt" "$work/greedy2.txt" || fail "--temperature 0 and --top-k 1 differ"
echo "ok: --temperature 0 and --top-k 1 pick the same tokens: $(cat "$work/greedy1.txt")"

# llm.c's tokenizer file decodes, but holds no merges to encode a prompt.
"$bin/llmc-sample" "$model" --tokenizer "$work/shards/gpt2_tokenizer.bin" -n 12 --seed 1 > "$work/bin_sample.txt"
"${sample[@]}" --seed 1 > "$work/bpe_sample.txt"
cmp -s "$work/bin_sample.txt" "$work/bpe_sample.txt" || fail "gpt2_tokenizer.bin decodes the sample otherwise"
echo "ok: llmc-sample decodes alike with gpt2_tokenizer.bin"
expect_status 1 "gpt2_tokenizer.bin: llm.c's tokenizer file holds no merges" \
  "$bin/llmc-sample" "$model" --tokenizer "$work/shards/gpt2_tokenizer.bin" --prompt "The"

expect_status 1 "llmc-sample: error: $work/nosuch.bin: cannot open" "$bin/llmc-sample" "$work/nosuch.bin"
expect_status 1 "tiny_val_000000.bin: bad magic" "$bin/llmc-sample" "$work/shards/tiny_val_000000.bin"
expect_status 1 "not an llm.c tokenizer file: header[0] (magic) is 20240326" \
  "$bin/llmc-sample" "$model" --tokenizer "$model"
expect_status 2 "no arguments" "$bin/llmc-sample"
expect_status 2 "--device cuda: llmc-sample runs on the CPU path only" "$bin/llmc-sample" "$model" --device cuda
expect_status 2 '--top-k expects a whole number from 0 to' "$bin/llmc-sample" "$model" --top-k=-1
expect_status 2 '--temperature expects a number 0 or more, got "hot"' "$bin/llmc-sample" "$model" --temperature hot
expect_status 2 "unknown option --bogus" "$bin/llmc-sample" "$model" --bogus
expect_status 0 "llmc-sample " "$bin/llmc-sample" --version
echo "PASS"
