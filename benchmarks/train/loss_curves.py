#!/usr/bin/env python3
"""Long runs: llmc-train's loss beside PyTorch's from the same weights, step by step, as one picture.

Both start from one checkpoint (llmc-train's initialisation after one step, written as an llm.c checkpoint),
read the same batches in the same order (no shuffling), and train for -x steps at a constant learning rate
(no warmup, no decay, no weight decay unless given), gradients clipped at 1.0: llmc-train on the GPU in bf16,
benchmarks/train/train_gpt2_torch.py with torch.compile and bf16 autocast. Each step's training loss of both
is drawn in one SVG (thin lines, and each one's moving average over a twentieth of the run), and a table
beside it gives the mean loss of both per tenth of the run and their difference: where the two leave each
other, and by how much.

    python3 benchmarks/train/loss_curves.py --llmc-train build/bin/llmc-train --python /opt/torch/.venv/bin/python3 \\
        -e d12 -b 8 -t 1024 -x 5000 --out benchmarks/train/results/h200-d12-5000-steps

writes OUT.svg and OUT.txt (the table, the commands, machine, date and commit); each run's own log is kept
in --work. --only llmc runs llmc alone (its curve alone; with --device cpu a smoke test on a tiny model).
--plot LLMC_MAIN_LOG TORCH_LOG draws two logs made before (llmc-train's main.log, train_gpt2_torch.py's
output) without running anything. A CPU smoke test: --device cpu --only llmc -e d1 --init-arg=--channels
--init-arg=16 --init-arg=--heads --init-arg=1 -b 2 -t 12 -x 30 (tests/train/loss_curves.sh).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results_file  # noqa: E402  benchmarks/results_file.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_SCRIPT = os.path.join(ROOT, "benchmarks", "train", "train_gpt2_torch.py")


def llmc_losses(path):
    """{step: training loss} from llmc-train's main.log ("s:STEP trl:LOSS ..."); a later line for a step wins.
    main.log numbers the steps from 0, as llm.c's does; the steps here count from 1, as the step lines do."""
    out = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = dict(p.split(":", 1) for p in line.split() if ":" in p)
            if "s" in fields and "trl" in fields:
                try:
                    out[int(fields["s"]) + 1] = float(fields["trl"])
                except ValueError:
                    sys.exit(f"loss_curves.py: {path}:{number}: not a step and a loss: {line.strip()!r}")
    return out


STEP_LINE = re.compile(r"^step\s+(\d+)/\d+\s+\|\s+loss\s+(\S+)")


def torch_losses(path):
    """{step: training loss} from train_gpt2_torch.py's step lines ("step   12/5000 | loss 6.1234 | ...")."""
    out = {}
    with open(path) as f:
        for line in f:
            m = STEP_LINE.match(line.strip())
            if m:
                out[int(m.group(1))] = float(m.group(2))
    return out


def moving_average(points, window):
    """(step, mean of the last `window` finite losses) for each point."""
    out, kept = [], []
    for step, loss in points:
        if loss == loss and abs(loss) != float("inf"):
            kept.append(loss)
            if len(kept) > window:
                kept.pop(0)
        if kept:
            out.append((step, sum(kept) / len(kept)))
    return out


def window_table(curves, windows=10):
    """Rows (first step, last step, mean of each curve, difference of the first two) over `windows` equal spans."""
    last = max(max(c) for c in curves.values() if c)
    span = max(1, -(-last // windows))
    rows = []
    for w in range(windows):
        lo, hi = w * span + 1, min(last, (w + 1) * span)
        if lo > hi:
            break
        means = []
        for c in curves.values():
            vals = [v for s, v in c.items() if lo <= s <= hi and v == v and abs(v) != float("inf")]
            means.append(sum(vals) / len(vals) if vals else float("nan"))
        rows.append((lo, hi, means))
    return rows


def svg(curves, title, subtitle):
    """A self-contained SVG of the curves: each run's losses as a thin line, its moving average thick."""
    width, height, left, right, top, bottom = 880, 520, 70, 190, 60, 50
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    points = {name: sorted((s, v) for s, v in c.items() if v == v and abs(v) != float("inf"))
              for name, c in curves.items()}
    steps = [s for p in points.values() for s, _ in p]
    losses = [v for p in points.values() for _, v in p]
    if not steps:
        raise SystemExit("loss_curves.py: no finite loss to draw")
    x0, x1 = min(steps), max(max(steps), min(steps) + 1)
    # The y range of the moving averages after the first twentieth of the run, widened a little: the
    # first steps' losses (10.9 from a fresh model) would flatten everything after them (they run along
    # the top edge).
    averages = {name: moving_average(p, max(1, len(p) // 20)) for name, p in points.items()}
    smooth = [v for a in averages.values() for _, v in a[len(a) // 20:]] or losses
    y0, y1 = min(min(smooth), min(losses)), max(smooth)
    y1 += 0.1 * (y1 - y0) + 1e-9
    y0 -= 0.05 * (y1 - y0)

    def xy(s, v):
        px = left + (s - x0) / (x1 - x0) * (width - left - right)
        py = top + (y1 - min(max(v, y0), y1)) / (y1 - y0) * (height - top - bottom)
        return f"{px:.1f},{py:.1f}"

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{(width - right + left) / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">'
           f'{title}</text>',
           f'<text x="{(width - right + left) / 2}" y="44" text-anchor="middle" fill="#555">{subtitle}</text>']
    for k in range(6):  # grid and tick labels
        v = y0 + k * (y1 - y0) / 5
        s = x0 + k * (x1 - x0) / 5
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{xy(x0, v).split(",")[1]}" '
                   f'y2="{xy(x0, v).split(",")[1]}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{float(xy(x0, v).split(",")[1]) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        out.append(f'<text x="{xy(s, y0).split(",")[0]}" y="{height - bottom + 16}" text-anchor="middle">{s:.0f}</text>')
    out.append(f'<text x="{(width - right + left) / 2}" y="{height - 12}" text-anchor="middle">step</text>')
    out.append(f'<text x="18" y="{(height - bottom + top) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {(height - bottom + top) / 2})">training loss</text>')
    for i, (name, p) in enumerate(points.items()):
        color = colors[i % len(colors)]
        raw = " ".join(xy(s, v) for s, v in p)
        avg = " ".join(xy(s, v) for s, v in averages[name])
        out.append(f'<polyline class="raw" data-run="{name}" points="{raw}" fill="none" stroke="{color}" '
                   f'stroke-width="0.6" stroke-opacity="0.35"/>')
        out.append(f'<polyline class="average" data-run="{name}" points="{avg}" fill="none" stroke="{color}" '
                   f'stroke-width="2"/>')
        ly = top + 20 + 22 * i
        out.append(f'<line x1="{width - right + 16}" x2="{width - right + 40}" y1="{ly}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2"/>')
        out.append(f'<text x="{width - right + 46}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def table_text(curves):
    names = list(curves)
    lines = ["| steps | " + " | ".join(f"{n} mean loss" for n in names) +
             (f" | {names[0]} - {names[1]}" if len(names) == 2 else "") + " |",
             "| --- |" + " --- |" * (len(names) + (1 if len(names) == 2 else 0))]
    for lo, hi, means in window_table(curves):
        cells = [f"{m:.4f}" for m in means]
        if len(names) == 2:
            cells.append(f"{means[0] - means[1]:+.4f}")
        lines.append(f"| {lo}-{hi} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(cmd, log):
    print("+ " + " ".join(cmd), flush=True)
    with open(log, "w") as f:
        f.write("# " + " ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"loss_curves.py: the command failed ({r.returncode}); its output is in {log}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llmc-train", default=os.path.join(ROOT, "build", "bin", "llmc-train"))
    p.add_argument("--python", default=sys.executable, help="python with torch for train_gpt2_torch.py")
    p.add_argument("-i", "--data", default="data/shards/corpus_train_*.bin")
    p.add_argument("-e", "--model", default="d12", help="dN (fresh, initialised by llmc-train) or a checkpoint")
    p.add_argument("-b", "--batch-size", type=int, default=8)
    p.add_argument("-t", "--seq-len", type=int, default=1024)
    p.add_argument("-x", "--steps", type=int, default=5000)
    p.add_argument("-l", "--lr", type=float, default=3e-4, help="constant learning rate (default 3e-4)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--only", choices=("llmc", "both"), default="both")
    p.add_argument("--llmc-arg", action="append", default=[], help="one more argument for llmc-train (repeatable)")
    p.add_argument("--init-arg", action="append", default=[],
                   help="one more argument for the run that makes a fresh dN (repeatable): --init-arg=--channels ...")
    p.add_argument("--work", default="out/loss_curves", help="the runs' logs and the shared checkpoint")
    p.add_argument("--out", default=None, help="OUT.svg and OUT.txt (default WORK/loss_curves)")
    p.add_argument("--plot", nargs=2, metavar=("LLMC_MAIN_LOG", "TORCH_LOG"), help="draw these logs, run nothing")
    a = p.parse_args()
    out = a.out or os.path.join(a.work, "loss_curves")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)

    commands = []
    if a.plot:
        llmc_log, torch_log = a.plot
        for log in a.plot:
            if not os.path.isfile(log):
                sys.exit(f"loss_curves.py: --plot {log}: no such file")
    else:
        if not os.access(a.llmc_train, os.X_OK):
            sys.exit(f"loss_curves.py: {a.llmc_train} is not an executable (build llmc-train, or give --llmc-train)")
        if a.only == "both" and not os.access(a.python, os.X_OK):
            sys.exit(f"loss_curves.py: --python {a.python} is not an executable")
        if not glob.glob(a.data):
            sys.exit(f"loss_curves.py: -i {a.data}: no training shard matches")
        os.makedirs(a.work, exist_ok=True)
        common = ["-i", a.data, "-b", str(a.batch_size), "-t", str(a.seq_len)]
        start = a.model
        if not os.path.exists(a.model):  # a fresh dN: llmc-train's initialisation, one step, as the common start
            init = os.path.join(a.work, "init")
            cmd = [a.llmc_train, "--device", a.device, "-e", a.model, "-x", "1", "-l", str(a.lr), "-o", init,
                   "-v", "0", "-s", "0", "--shuffle", "0"] + common + a.llmc_arg + a.init_arg
            run(cmd, os.path.join(a.work, "init.log"))
            commands.append(cmd)
            start = os.path.join(init, "model_00000001.bin")
        llmc_dir = os.path.join(a.work, "llmc")
        cmd = [a.llmc_train, "--device", a.device, "-e", start, "-x", str(a.steps), "-l", str(a.lr), "-o", llmc_dir,
               "-v", "0", "-s", "0", "--shuffle", "0"] + common + a.llmc_arg
        run(cmd, os.path.join(a.work, "llmc.log"))
        commands.append(cmd)
        llmc_log = os.path.join(llmc_dir, "main.log")
        torch_log = None
        if a.only == "both":
            torch_log = os.path.join(a.work, "torch.log")
            cmd = [a.python, TORCH_SCRIPT, "--device", a.device, "-e", start, "-x", str(a.steps), "-l", str(a.lr),
                   "--compile", "1" if a.device == "cuda" else "0"] + common
            run(cmd, torch_log)
            commands.append(cmd)

    curves = {"llmc": llmc_losses(llmc_log)}
    if torch_log:
        curves["PyTorch"] = torch_losses(torch_log)
    for name, c in curves.items():
        if not c:
            sys.exit(f"loss_curves.py: no training loss in the {name} log")
    last = {name: c[max(c)] for name, c in curves.items()}
    subtitle = ", ".join(f"{name} {v:.4f} at step {max(curves[name])}" for name, v in last.items())
    title = ("training loss: " + " beside ".join(curves) +
             ("" if a.plot else f", {os.path.basename(a.model)}, B={a.batch_size}, T={a.seq_len}, lr {a.lr:g}"))
    # Whole or not at all: a fresh file beside it, renamed over it.
    with open(out + ".svg.tmp", "w") as f:
        f.write(svg(curves, title, subtitle))
    os.replace(out + ".svg.tmp", out + ".svg")
    text = table_text(curves)
    ran = "".join(f"# ran: {' '.join(c)}\n" for c in commands)
    results_file.write(out + ".txt", ["benchmarks/train/loss_curves.py"] + sys.argv[1:], ran + "\n" + text)
    print(text, end="")
    print(f"loss_curves.py: wrote {out}.svg and {out}.txt")


if __name__ == "__main__":
    main()
