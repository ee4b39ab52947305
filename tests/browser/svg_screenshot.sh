#!/usr/bin/env bash
# A drawing (llmc-compile --emit svg or svg-plan) in a real browser: headless
# Chromium opens the SVG from a file, with no network, and
#  - takes a screenshot of it at its own size (at most 1800x1400 pixels, its
#    top left where larger), OUT_DIR/NAME.png; with FIT=1 in the environment,
#    of the whole drawing scaled to 1800 pixels across (an overview, through a
#    page that shows it as an image);
#  - logs no console message at all (a malformed file is an error page).
# The drawing is the sm_90a plan of the attention block (tests/lit/pseudocode/
# attention.dg), or the one the llmc-compile arguments after NAME ask for.
# The screenshots in docs/images/ were made so:
#   tests/browser/svg_screenshot.sh build/bin docs/images attention_plan
#   FIT=1 tests/browser/svg_screenshot.sh build/bin docs/images plan_d12 diagrams/gpt2/model.dg --grad \
#       --set B=32,T=1024,maxT=1024,L=12,C=768,H=12,V=50257,Vp=50304 --arch sm_90a --emit svg-plan --depth 3
# Exits 77 (ctest: skipped, not passed) where Chromium is not installed
# (Debian: apt-get install chromium; scripts/setup.sh does not install it).
#
# usage: svg_screenshot.sh BIN_DIR OUT_DIR NAME [llmc-compile arguments]
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 BIN_DIR OUT_DIR NAME [llmc-compile arguments]" >&2
  exit 2
fi
bin_dir=$1 out_dir=$2 name=$3
shift 3
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

test_name=svg_screenshot
source "$source_dir/tests/browser/chromium.sh"

if (($# == 0)); then
  set -- "$source_dir/tests/lit/pseudocode/attention.dg" --set B=4,H=12,T=1024,D=64 --arch sm_90a --emit svg-plan
fi
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
svg="$work/$name.svg"
"$bin_dir/llmc-compile" "$@" -o "$svg"
grep -q "<svg" "$svg" || fail "llmc-compile wrote no SVG"

# The drawing's size in pixels (Graphviz writes points: 4/3 of a pixel each), within the window's bounds.
read -r width height < <(sed -n 's/^<svg width="\([0-9.]*\)pt" height="\([0-9.]*\)pt".*/\1 \2/p' "$svg" | head -1)
[[ -n "${width:-}" ]] || fail "no size on the SVG's root element"
px() { awk -v pt="$1" -v most="$2" 'BEGIN { p = int(pt * 4 / 3) + 16; print (p > most ? most : p) }'; }
w="$(px "$width" 1800)" h="$(px "$height" 1400)"
page="$svg"
if [[ "${FIT:-0}" == 1 ]]; then
  w=1800
  h="$(awk -v w="$width" -v h="$height" 'BEGIN { print int(1800 * h / w) + 1 }')"
  page="$work/$name.html"
  printf '<!DOCTYPE html><html><body style="margin:0"><img src="%s" style="width:100%%;display:block"></body></html>\n' \
    "$name.svg" > "$page"
fi

png="$out_dir/$name.png"
rm -f "$png"
timeout 300 "$chromium" --headless --disable-gpu --no-sandbox --user-data-dir="$work/profile" --no-first-run \
  --hide-scrollbars --screenshot="$png" --window-size="$w,$h" --enable-logging=stderr --v=0 "file://$page" \
  > /dev/null 2> "$work/console.log" || fail "chromium exited with $? ($(tail -3 "$work/console.log"))"
[[ -s "$png" ]] || fail "no screenshot"
if grep -E "Uncaught|:CONSOLE|This page contains the following errors" "$work/console.log"; then
  fail "console messages above"
fi
echo "svg_screenshot: ok: $png (${w}x${h})"
