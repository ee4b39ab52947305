"""Checks that every kernel of `--emit perf --json` (argv[1]) is a frame of the
`--emit dot-plan` drawing (argv[2]) with its name first in its label, and that
every box the drawing puts in a frame is defined once. Prints one line per
kernel and 'ok'."""
import json
import re
import sys

perf = json.load(open(sys.argv[1]))
dot = open(sys.argv[2]).read()
labels = re.findall(r'subgraph cluster_kernel\d+ \{\n\s*label="([^"\\]*)\\n', dot)
names = [k["name"] for k in perf["kernels"]]
if labels != names:
    sys.exit(f"frames {labels} are not the kernels {names}")
boxes = re.findall(r"^\s*(n\d+) \[", dot, re.M)
if len(boxes) != len(set(boxes)):
    sys.exit("a box is defined twice")
for name in names:
    print("kernel", name)
print("ok", len(names), "kernels,", len(boxes), "boxes")
