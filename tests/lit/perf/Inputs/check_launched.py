"""Checks that --emit perf --json and --emit launches describe the same launches: for each
kernel whose launch the lowering knows (launched_blocks >= 0), its tile launch's grid, and where
launched_smem_bytes >= 0 (the tensor cores' launches) its dynamic shared memory.
Usage: check_launched.py PERF.json LAUNCHES.json; prints one line per kind of launch checked."""
import json
import sys

perf = json.load(open(sys.argv[1]))
launches = {l["name"]: l for l in json.load(open(sys.argv[2]))["launches"] if l.get("role") == "tile"}
checked = {"grid": 0, "smem": 0}
for k in perf["kernels"]:
    if k["launched_blocks"] < 0 or k["name"] not in launches:
        continue
    launch = launches[k["name"]]
    grid = launch["grid"][0] * launch["grid"][1] * launch["grid"][2]
    if grid != k["launched_blocks"]:
        sys.exit(f"{k['name']}: perf says {k['launched_blocks']} blocks, the launch has {grid}")
    checked["grid"] += 1
    if k["launched_smem_bytes"] >= 0:
        if k["launched_smem_bytes"] != launch["dynamic_smem_bytes"]:
            sys.exit(f"{k['name']}: perf says {k['launched_smem_bytes']} bytes of shared memory, "
                     f"the launch has {launch['dynamic_smem_bytes']}")
        checked["smem"] += 1
print(f"grids agree: {checked['grid']} kernels; tensor-core shared memory agrees: {checked['smem']} kernels")
