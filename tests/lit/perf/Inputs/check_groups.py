"""Checks llmc-compile --emit perf --sort time --group-by ... text on stdin:
the kernel rows slowest first, and each grouping's table accounting for
every kernel and the whole predicted time (shares summing to 100%).
Prints one line per table and 'ok', or exits 1 with what is wrong."""
import re
import sys

lines = sys.stdin.read().splitlines()
total = next(l for l in lines if l.startswith("total:"))
kernels, predicted = re.match(r"total: (\d+) kernels, ([\d.]+) ms predicted", total).groups()
kernels, predicted = int(kernels), float(predicted)
rows = [l for l in lines[2:lines.index(total)]]
times = [float(l.split()[-2]) for l in rows]
if len(rows) != kernels:
    sys.exit(f"{len(rows)} kernel rows for {kernels} kernels")
if times != sorted(times, reverse=True):
    sys.exit("kernel rows are not slowest first")
tables = [i for i, l in enumerate(lines) if l.startswith("by ")]
if not tables:
    sys.exit("no group tables")
for n, start in enumerate(tables):
    name = " ".join(lines[start].split()[:2]).rstrip(":")
    end = tables[n + 1] if n + 1 < len(tables) else len(lines)
    groups = [l.split() for l in lines[start + 1:end] if l.startswith("  ")]
    count = sum(int(g[-3]) for g in groups)
    time = sum(float(g[-2]) for g in groups)
    share = sum(float(g[-1].rstrip("%")) for g in groups)
    if count != kernels or abs(time - predicted) > 0.002 * len(groups) + 1e-3 or abs(share - 100) > 0.1 * len(groups):
        sys.exit(f"{name}: {count} kernels, {time:.3f} ms, {share:.1f}% "
                 f"(expected {kernels}, {predicted:.3f} ms, 100%)")
    print(f"{name}: {len(groups)} groups")
print("ok")
