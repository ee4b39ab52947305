#!/usr/bin/env python3
"""benchmarks/train/gpu_watch.py and the training benchmark's use of it, without a GPU: nvidia-smi is a
script that prints samples as `nvidia-smi -lms` does (the clock and power change half-way, the power cap
set from then on), and the program watched is a script that prints step lines as llmc-train does. The
clock and power reported must be those of the timed steps only, the memory the most in use less the
baseline.

    python3 tests/benchmarks/gpu_watch_test.py SOURCE_DIR
"""
import datetime
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
sys.path.insert(0, str(SRC / "benchmarks/train"))
sys.path.insert(0, str(SRC / "benchmarks"))
import gpu_watch  # noqa: E402
import run_train_benchmark  # noqa: E402

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def stamp(t):
    return datetime.datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


# parse_sample: a sample, fields nvidia-smi lacks, and lines that are none.
now = time.time()
s = gpu_watch.parse_sample(f"{stamp(now)}, 12034, 1605, 694.12, 700.00, 0x0000000000000004")
check(s is not None and s["memory_mib"] == 12034 and s["sm_mhz"] == 1605 and abs(s["power_w"] - 694.12) < 1e-9
      and s["power_limit_w"] == 700 and s["reasons"] == 4 and abs(s["t"] - now) < 0.01, "a sample's fields")
s = gpu_watch.parse_sample(f"{stamp(now)}, 500, 1980, [N/A], [Not Supported], [N/A]")
check(s is not None and s["power_w"] is None and s["reasons"] is None and s["sm_mhz"] == 1980,
      "[N/A] and [Not Supported] read as no value")
check(gpu_watch.parse_sample("timestamp, memory.used [MiB], clocks.sm [MHz], power.draw [W], a, b") is None,
      "a header is no sample")
check(gpu_watch.parse_sample("No devices were found") is None, "an error message is no sample")

# steady_figures: medians over the span only; the fraction of samples at the power cap.
samples = [{"t": t, "memory_mib": 0, "sm_mhz": mhz, "power_w": w, "power_limit_w": 700.0, "reasons": r}
           for t, mhz, w, r in [(0, 1980, 80, 0), (1, 1600, 690, 4), (2, 1620, 695, 4), (3, 1700, 650, 0),
                                (4, 1980, 90, 0)]]
f = gpu_watch.steady_figures(samples, 1, 3)
check(f == {"sm_mhz": 1620, "power_w": 690, "power_limit_w": 700.0, "power_capped": 2 / 3, "samples": 3},
      f"the span's medians and cap fraction: {f}")
check(gpu_watch.steady_figures(samples, 10, 20) is None, "no sample in the span: None")

# The watcher and run_one end to end, with scripts for nvidia-smi and the trainer.
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    smi = tmp / "nvidia-smi"
    # 100 ms samples: idle at first (1980 MHz, 60 W, 1000 MiB), then from the first step line on
    # (the trainer writes tmp/started) at the cap (1600 MHz, 690 W, 9000 MiB).
    # It takes its arguments as nvidia-smi does (`-lms N`, `--id=N`, `--query-gpu=LIST`), else fails.
    smi.write_text(f"""#!/usr/bin/env python3
import datetime, os, sys, time
args = sys.argv[1:]
ok = ("-lms" in args and args[args.index("-lms") + 1:][:1] != [] and args[args.index("-lms") + 1].isdigit()
      and "--id=0" in args and "--query-gpu={gpu_watch.QUERY}" in args and "--format=csv,noheader,nounits" in args)
if not ok:
    sys.exit("nvidia-smi: unexpected arguments " + " ".join(args))
while True:
    busy = os.path.exists("{tmp}/started")
    t = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    print(f"{{t}}, {{9000 if busy else 1000}}, {{1600 if busy else 1980}}, {{690.0 if busy else 60.0}}, 700.00, "
          f"{{'0x0000000000000004' if busy else '0x0000000000000000'}}", flush=True)
    time.sleep(0.1)
""")
    trainer = tmp / "trainer"
    # Two warm-up steps at no load, then 8 timed steps of 0.15 s at the cap.
    trainer.write_text(f"""#!/usr/bin/env python3
import time
for step in range(1, 11):
    time.sleep(0.15)
    if step == 2:
        open("{tmp}/started", "w").close()
    print(f"step {{step:5d}}/10 | loss 5.0 | norm 1.0 | lr 3.00e-04 | 150.0 ms | 1000 tok/s", flush=True)
""")
    for path in (smi, trainer):
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{tmp}{os.pathsep}{os.environ['PATH']}"
    status, lines, first_step_s, gpu = run_train_benchmark.run_one(
        "fake", [sys.executable, str(trainer)], dict(os.environ), tmp / "log.txt", 60, 0, 2)
    check(status == 0 and len(lines) == 10, f"the trainer ran: status {status}, {len(lines)} lines")
    check(gpu is not None and gpu.get("sm_mhz") == 1600 and gpu.get("power_w") == 690.0
          and gpu.get("power_capped") == 1.0 and gpu.get("samples", 0) >= 8,
          f"clock and power over the timed steps alone: {gpu}")
    check(gpu is not None and gpu.get("device_memory_bytes") == 8000 * 1024 ** 2,
          f"device memory: the most in use less the first sample's: {gpu and gpu.get('device_memory_bytes')}")
    cells = run_train_benchmark.gpu_cells(gpu, 150.0)
    check(cells == ["1600", "690 cap", "103.5"], f"the table's cells (J/step: 690 W x 150 ms): {cells}")
    check(run_train_benchmark.gpu_cells(None, 150.0) == ["-", "-", "-"], "no nvidia-smi: '-' in every column")

print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} failed")
sys.exit(1 if failures else 0)
