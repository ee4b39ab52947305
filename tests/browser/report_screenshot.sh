#!/usr/bin/env bash
# The HTML report (llmc-compile --emit report) in a real browser: headless
# Chromium opens the page from a file, with no network, and
#  - takes a screenshot of its first screen (1400x1000), OUT_DIR/report.png;
#  - logs no console message at all: the page's script writes none, so any
#    is an error (an uncaught exception, a resource it failed to fetch);
#  - runs its script: in the DOM after loading page.html#group=pass, a group
#    row for each pass of the page's groupings, and every box of the plan's
#    drawing made a link to its kernel's row.
# The page is made from multi-query attention's training step with the lit
# test's measurement fixture, or from the llmc-compile arguments given after
# OUT_DIR (the d12 screenshot in docs/images/report_d12.png:
#   tests/browser/report_screenshot.sh build/bin /tmp/d12 diagrams/gpt2/model.dg --entry gpt2 --grad \
#       --set B=32,T=1024,maxT=1024,L=12,C=768,H=12,V=50257,Vp=50304 --arch sm_90a).
# Exits 77 (ctest: skipped, not passed) where Chromium is not installed
# (Debian: apt-get install chromium; scripts/setup.sh does not install it).
#
# usage: report_screenshot.sh BIN_DIR OUT_DIR [llmc-compile arguments]
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 BIN_DIR OUT_DIR [llmc-compile arguments]" >&2
  exit 2
fi
bin_dir=$1 out_dir=$2
shift 2
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

test_name=report_screenshot
source "$source_dir/tests/browser/chromium.sh"

if (($# == 0)); then
  set -- "$source_dir/benchmarks/diagrams/multi_query_attention.dg" --entry multi_query_attention_loss --grad \
    --set H=8,Tq=100,Tk=300,D=64 --arch sm_90a \
    --measured "$source_dir/tests/lit/report/Inputs/multi_query_attention_times.json"
fi
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
page="$out_dir/report.html"
"$bin_dir/llmc-compile" "$@" --emit report -o "$page"

# A profile of its own in OUT_DIR, so that nothing of the user's is read or written.
browser() {
  timeout 300 "$chromium" --headless --disable-gpu --no-sandbox --user-data-dir="$out_dir/chromium-profile" \
    --no-first-run "$@"
}

rm -f "$out_dir/report.png"
browser --screenshot="$out_dir/report.png" --window-size=1400,1000 --enable-logging=stderr --v=0 \
  "file://$page" > /dev/null 2> "$out_dir/console.log" || fail "chromium exited with $? (log: $out_dir/console.log)"
[[ -s "$out_dir/report.png" ]] || fail "no screenshot (log: $out_dir/console.log)"
if grep -E "Uncaught|ERROR:CONSOLE|:CONSOLE" "$out_dir/console.log"; then
  fail "the page logged to the console (above; $out_dir/console.log)"
fi

browser --dump-dom "file://$page#group=pass" > "$out_dir/dom.html" 2> /dev/null || fail "chromium --dump-dom exited with $?"
python3 - "$page" "$out_dir/dom.html" <<'EOF'
import json, re, sys
page, dom = open(sys.argv[1]).read(), open(sys.argv[2]).read()
data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1))
passes = next(g for g in data["groupings"] if g["name"] == "pass")["groups"]
rows = len(re.findall(r'<tr id="kernel-row-\d+"', page))
groups = len(re.findall(r'<tr class="group">', dom))
boxes = len(re.findall(r'class="node kernel-box"', dom))
drawn = '<p class="missing" id="drawing-missing">' not in page
if groups != len(passes):
    sys.exit(f"report_screenshot: FAILED: {groups} group rows for #group=pass, the page has {len(passes)} passes")
if drawn and boxes != rows:
    sys.exit(f"report_screenshot: FAILED: {boxes} boxes linked to rows, the table has {rows} kernels")
print(f"report_screenshot: ok: {rows} kernels, {groups} pass groups, {boxes} boxes linked; {sys.argv[1]}")
EOF
echo "report_screenshot: screenshot in $out_dir/report.png"
