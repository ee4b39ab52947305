#!/usr/bin/env bash
# The tools' shared command-line conventions (issue 24), where no other test
# holds them: every tool prints its version; llmc-data takes values joined by
# '=' and exits 2 with a pointer to --help for a bad command line; llmc-train
# takes joined values too and says an empty glob before it makes a model.
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

echo "PASS"
