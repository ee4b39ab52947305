#!/usr/bin/env python3
"""Data-parallel scaling of llmc-train: 1 GPU against N, in one run.

Runs llmc-train on d12 (B=32, T=1024 per GPU by default) on one GPU, then with
--gpus N: ZeRO-0 with the gradients averaged beside the backward (the
default), ZeRO-0 averaged after the step (--overlap 0, whose communication
llmc-train times on the GPU), and ZeRO-1; each for STEPS steps. The table: the
median ms per step after the warm-up, tokens per second over all GPUs, the
scaling efficiency (tokens/s over N times one GPU's), device memory per GPU,
the communication measured (GPU time of the NCCL calls, where they run
alone) and the time the step gained over one GPU's ("exposed"), each beside
the performance model's prediction (`llmc-compile --grad --emit perf --gpus N
--zero Z --json`: the transfer time, and what of it the model says the step
cannot hide).

exit status: 0 when every run finished, 1 when one failed, 2 for bad arguments.
"""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import results_file  # noqa: E402  benchmarks/results_file.py
RESULT = re.compile(r"^RESULT (\{.*\})\s*$")


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def run_llmc(args, gpus, zero, overlap, log_dir):
    command = [args.llmc_train, "--device", "cuda", "-e", args.model, "-b", str(args.batch_size), "-t",
               str(args.seq_len), "-x", str(args.steps), "-v", "0", "-s", "0", "-i", args.data, "-z", str(zero),
               "--overlap", "1" if overlap else "0"]
    if gpus > 1:
        command += ["--gpus", str(gpus)]
    log = Path(log_dir) / f"llmc_{gpus}gpu_zero{zero}{'' if overlap else '_after'}.txt"
    print(f"running: {' '.join(command)}  (log {log})", flush=True)
    with open(log, "w") as out:
        status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=args.timeout).returncode
    text = log.read_text()
    results = [json.loads(m.group(1)) for m in map(RESULT.match, text.splitlines()) if m]
    if status != 0 or not results:
        tail = "\n".join(text.splitlines()[-15:])
        print(f"FAILED ({gpus} GPU(s), ZeRO-{zero}), exit {status}:\n{tail}", file=sys.stderr)
        return None
    return results[-1]


def predicted_communication_ms(args, gpus, zero):
    """(transfer ms, exposed ms) by the performance model, or None."""
    sizes = {"d12": "L=12,C=768,H=12"}.get(args.model)
    if gpus == 1 or sizes is None:
        return None
    command = [args.llmc_compile, str(REPO / "diagrams/gpt2/model.dg"), "--entry", "gpt2", "--grad", "--set",
               f"B={args.batch_size},T={args.seq_len},maxT=1024,{sizes},V=50257,Vp=50304", "--emit", "perf", "--gpus",
               str(gpus), "--zero", str(zero), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"llmc-compile failed: {done.stderr.strip()}", file=sys.stderr)
        return None
    model = json.loads(done.stdout)["data_parallel"]
    return model["seconds"] * 1e3, model["exposed_seconds"] * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llmc-train", default=str(REPO / "build/bin/llmc-train"))
    p.add_argument("--llmc-compile", default=str(REPO / "build/bin/llmc-compile"))
    p.add_argument("-i", "--data", default="data/shards/corpus_train_*.bin", help="training shards glob")
    p.add_argument("-e", "--model", default="d12", help="dN (default d12; the prediction is made for d12)")
    p.add_argument("-b", "--batch-size", type=int, default=32, help="rows per GPU (default 32)")
    p.add_argument("-t", "--seq-len", type=int, default=1024)
    p.add_argument("-x", "--steps", type=int, default=20, help="steps of each run (default 20; the median leaves out the first 3)")
    p.add_argument("--gpus", type=int, default=gpu_count(), help="N (default: every GPU of this machine)")
    p.add_argument("--log-dir", default=str(REPO / "out/data_parallel_scaling"))
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--out", default=None, help="the results file, overwritten (earlier runs are in git's history); "
                   "'-': none (default results/MACHINExN-MODEL-data-parallel-scaling.txt beside this script)")
    args = p.parse_args(argv)
    if args.gpus < 2:
        print(f"data_parallel_scaling: needs 2 or more GPUs (--gpus {args.gpus})", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else str(
        Path(__file__).resolve().parent / "results"
        / f"{results_file.machine_slug(args.gpus)}-{args.model}-data-parallel-scaling.txt")
    with results_file.record(out):
        return run(args)


def run(args):
    os.makedirs(args.log_dir, exist_ok=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

    configurations = [(0, True), (0, False), (1, True)]
    rows = []
    one = run_llmc(args, 1, 0, True, args.log_dir)
    if one:
        rows.append((1, "-", one, None))
    for zero, overlap in configurations:
        result = run_llmc(args, args.gpus, zero, overlap, args.log_dir)
        if result:
            predicted = predicted_communication_ms(args, args.gpus, zero)
            if predicted and zero == 0 and not overlap:
                predicted = (predicted[0], predicted[0])  # after the step: all of it exposed
            how = f"{zero}" + (" beside" if zero == 0 and overlap else " after")
            rows.append((args.gpus, how, result, predicted))

    print(f"\nllmc-train data-parallel scaling: {args.model}, B={args.batch_size} T={args.seq_len} per GPU, "
          f"median of steps 4..{args.steps}")
    print(f"{'GPUs':>4} {'ZeRO, reduction':>16} {'ms/step':>8} {'tok/s':>8} {'efficiency':>10} {'GiB/GPU':>7} "
          f"{'comm ms':>8} {'predicted':>9} {'exposed ms':>10} {'predicted':>9}")
    base = one if one else None
    for gpus, how, r, predicted in rows:
        efficiency = f"{r['tokens_per_s'] / (gpus * base['tokens_per_s']):.1%}" if base else "-"
        measured = f"{r['communication_ms']:.2f}" if "communication_ms" in r else "-"
        exposed = f"{r['ms_per_step'] - base['ms_per_step']:.2f}" if base and gpus > 1 else "-"
        print(f"{gpus:>4} {how:>16} {r['ms_per_step']:>8.1f} {r['tokens_per_s']:>8.0f} {efficiency:>10} "
              f"{r['peak_memory_bytes'] / 2**30:>7.2f} {measured:>8} {'-' if predicted is None else f'{predicted[0]:.2f}':>9} "
              f"{exposed:>10} {'-' if predicted is None else f'{predicted[1]:.2f}':>9}")
    return 0 if len(rows) == 1 + len(configurations) else 1


if __name__ == "__main__":
    sys.exit(main())
