#!/usr/bin/env bash
# The tools' shared command-line conventions (issue 24), where no other test
# holds them: every tool prints its version; llmc-data takes values joined by
# '=' and exits 2 with a pointer to --help for a bad command line; llmc-train
# takes joined values too and says an empty glob before it makes a model;
# --quiet in every tool (with and without it); llmc-train's samples through
# llm.c's gpt2_tokenizer.bin beside the shards.
# (llmc-compile's and llmc-run's: lit, tests/lit/errors/cmdline_*.dg and
# tests/lit/run/command_line.dg, --arch auto without a GPU there too.)
# usage: command_line.sh BIN_DIR DATA_DIR   (DATA_DIR: ../shared/data)
set -euo pipefail
bin="$1"
data="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_status STATUS "output fragment" command...
expect_status() {
  local status="$1" want="$2"; shift 2
  local got=0
  "$@" >"$work/out.txt" 2>&1 || got=$?
  [[ "$got" == "$status" ]] || { cat "$work/out.txt"; fail "expected exit $status, got $got from: $*"; }
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; fail "expected '$want' from: $*"; }
  echo "ok: exit $status, '$want'"
}

for tool in llmc-compile llmc-data llmc-train llmc-run llmc-sample; do
  [[ -x "$bin/$tool" ]] || fail "$tool is not built"
  "$bin/$tool" --version > "$work/version.txt" || fail "$tool --version failed"
  grep -qE "^$tool [0-9]+\.[0-9]+\.[0-9]+$" "$work/version.txt" || { cat "$work/version.txt"; fail "$tool --version"; }
done
echo "ok: every tool prints its version"

# llmc-data: values joined by '='.
mkdir -p "$work/text"
echo "The first document." > "$work/text/a.txt"
echo "The second document." > "$work/text/b.txt"
"$bin/llmc-data" --tokenizer="$data/gpt2-bpe" --out="$work/shards" --name=joined --val-docs=1 "$work/text" > /dev/null
[[ -f "$work/shards/joined_train_000000.bin" && -f "$work/shards/joined_val_000000.bin" ]] \
  || fail "llmc-data --out=DIR --name=P wrote no shards"
echo "ok: llmc-data takes --out=DIR --name=P"
expect_status 2 "run llmc-data --help for the usage" "$bin/llmc-data" "$work/text"
expect_status 2 "unknown option --bogus" "$bin/llmc-data" --out "$work/x" --bogus "$work/text"
expect_status 2 "--val-docs expects a positive whole number" "$bin/llmc-data" --out "$work/x" --val-docs=0 "$work/text"
for tool in llmc-data llmc-run llmc-sample; do
  expect_status 2 "--version takes no value (got '--version=1')" "$bin/$tool" --version=1
done

# llmc-train: joined values; the empty glob is said before a model is made.
expect_status 1 "no shard files match" "$bin/llmc-train" --device=cpu -e d12 -i "$work/nosuch_*.bin"
! grep -q '^model:' "$work/out.txt" || fail "llmc-train made a model before finding the glob empty"

# --quiet: each tool's progress and informational lines go; errors and the
# requested output (--emit text, samples, validation, RESULT) stay.
python3 - "$work/many" <<'PY'
import os, random, sys
random.seed(1)
words = "the of and a to in is was that for on with as by at from his her it an were are which".split()
os.makedirs(sys.argv[1], exist_ok=True)
for d in range(40):
    open(os.path.join(sys.argv[1], f"d{d}.txt"), "w").write(" ".join(random.choice(words) for _ in range(200)) + ".\n")
PY
"$bin/llmc-data" --tokenizer "$data/gpt2-bpe" --out "$work/q" --name q --val-docs 2 "$work/many" > "$work/loud.txt" 2>&1
grep -q "^llmc-data: 40 documents" "$work/loud.txt" || { cat "$work/loud.txt"; fail "llmc-data printed no summary"; }
rm -rf "$work/q"
"$bin/llmc-data" --quiet --tokenizer "$data/gpt2-bpe" --out "$work/q" --name q --val-docs 2 "$work/many" > "$work/quiet.txt" 2>&1
[[ ! -s "$work/quiet.txt" ]] || { cat "$work/quiet.txt"; fail "llmc-data --quiet printed"; }
[[ -f "$work/q/q_train_000000.bin" ]] || fail "llmc-data --quiet wrote no shards"
echo "ok: llmc-data --quiet prints nothing, writes the shards"

train=("$bin/llmc-train" --device cpu -i "$work/q/q_train_*.bin" -j "$work/q/q_val_*.bin" -e d2 --channels 32 --heads 2
       -b 2 -t 16 -x 2 -v 2 -m 1 -s 2 -g 4)
"${train[@]}" -o "$work/run" > "$work/loud.txt" 2>&1 || { cat "$work/loud.txt"; fail "llmc-train failed"; }
"${train[@]}" --quiet > "$work/quiet.txt" 2>&1 || { cat "$work/quiet.txt"; fail "llmc-train --quiet failed"; }
for line in '^model:' '^train data:' '^step +1/2' '^checkpoint:' '^done:'; do
  grep -qE "$line" "$work/loud.txt" || { cat "$work/loud.txt"; fail "llmc-train printed no '$line'"; }
  ! grep -qE "$line" "$work/quiet.txt" || { cat "$work/quiet.txt"; fail "llmc-train --quiet printed '$line'"; }
done
for line in '^val loss' '^sample at step 2:' '^RESULT '; do
  grep -qE "$line" "$work/quiet.txt" || { cat "$work/quiet.txt"; fail "llmc-train --quiet left out '$line'"; }
done
echo "ok: llmc-train --quiet: no start-up, step or checkpoint lines; validation, samples, RESULT stay"

"$bin/llmc-sample" "$work/run/model_00000002.bin" --tokenizer "$data/gpt2-bpe" -n 4 > "$work/out.txt" 2> "$work/err.txt"
grep -q "^llmc-sample: " "$work/err.txt" || { cat "$work/err.txt"; fail "llmc-sample said nothing of the model"; }
"$bin/llmc-sample" "$work/run/model_00000002.bin" --tokenizer "$data/gpt2-bpe" -n 4 --quiet > "$work/quiet.txt" 2> "$work/err.txt"
[[ ! -s "$work/err.txt" ]] || { cat "$work/err.txt"; fail "llmc-sample --quiet printed on stderr"; }
cmp -s "$work/out.txt" "$work/quiet.txt" || fail "llmc-sample --quiet changed the sample"
echo "ok: llmc-sample --quiet: the sample only"

dg="$(dirname "$0")/../lit/streams/softmax_contraction.dg"
"$bin/llmc-compile" "$dg" --set T=8,X=16,D=4 --emit perf > "$work/out.txt"
"$bin/llmc-compile" "$dg" --set T=8,X=16,D=4 --emit perf --quiet > "$work/quiet.txt" 2> "$work/err.txt"
[[ -s "$work/quiet.txt" ]] && cmp -s "$work/out.txt" "$work/quiet.txt" || fail "llmc-compile --quiet changed --emit's output"
[[ ! -s "$work/err.txt" ]] || fail "llmc-compile --quiet printed on stderr"
expect_status 2 "unknown --emit 'nosuch'" "$bin/llmc-compile" "$dg" --quiet --emit nosuch
echo "ok: llmc-compile --quiet: the --emit output unchanged, errors still said"
for tool in llmc-compile llmc-data llmc-train llmc-run llmc-sample; do
  "$bin/$tool" --help > "$work/help.txt"
  grep -q -- "--quiet" "$work/help.txt" || fail "$tool --help does not document --quiet"
done
for tool in llmc-compile llmc-data llmc-run llmc-sample; do
  expect_status 2 "--quiet takes no value (got '--quiet=1')" "$bin/$tool" --quiet=1
done

# llmc-train prints samples with llm.c's gpt2_tokenizer.bin in the shards'
# folder (llmc-data writes it there) where no --tokenizer is given.
cp "$work/q/gpt2_tokenizer.bin" "$work/tokenizer.bin"
echo "not a tokenizer" > "$work/q/gpt2_tokenizer.bin"
expect_status 1 "gpt2_tokenizer.bin" "${train[@]}" --quiet
cp "$work/tokenizer.bin" "$work/q/gpt2_tokenizer.bin"
echo "ok: llmc-train reads gpt2_tokenizer.bin beside the shards"

echo "PASS"
