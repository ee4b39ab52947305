"""Checks an `--emit dot-plan --depth N` drawing (argv[2]) against `--emit perf
--json` (argv[1]): every kernel a box once, in plan order, labelled with its
name first; every wire between two drawn kernels, none twice, none to itself.
Prints the counts and 'ok'."""
import json
import re
import sys

perf = json.load(open(sys.argv[1]))
dot = open(sys.argv[2]).read()
boxes = re.findall(r'^\s*kernel(\d+) \[shape=box, [^\n]*label="([^"\\]*)\\n', dot, re.M)
names = [k["name"] for k in perf["kernels"]]
if sorted(int(i) for i, _ in boxes) != list(range(len(names))):
    sys.exit(f"boxes {sorted(int(i) for i, _ in boxes)} are not the {len(names)} kernels")
for index, name in boxes:
    if names[int(index)] != name:
        sys.exit(f"kernel{index} is labelled {name}, not {names[int(index)]}")
wires = re.findall(r"^\s*kernel(\d+) -> kernel(\d+);", dot, re.M)
if len(wires) != len(set(wires)) or any(a == b for a, b in wires) or not wires:
    sys.exit("a wire twice, to itself, or none")
print("ok", len(names), "kernels,", len(wires), "wires")
