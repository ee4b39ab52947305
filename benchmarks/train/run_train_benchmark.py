#!/usr/bin/env python3
"""GPT-2 training step: llmc-train against PyTorch (torch.compile and eager), in one run.

For each model (-e, or several with --models d12:32,d24:32,d48:16), runs one
after the other on the same GPU, with the same model, batch, steps and data:
  llmc           build/bin/llmc-train --device cuda -e d12 -b 32 -t 1024 -x STEPS -v 0 -s 0 --shuffle 0 -i GLOB
  compile        train_gpt2_torch.py --compile 1 --attention auto (same flags)
  compile-cudnn  train_gpt2_torch.py --compile 1 --attention cudnn
  eager          train_gpt2_torch.py --compile 0 --attention auto
and prints a table, one row per model and configuration: the median time per
step over the steps after the warm-up, the tokens per second it implies, the
peak memory, the time from the process's start to the end of its first step,
the final loss, and the GPU's SM clock and power draw over the timed steps
(nvidia-smi's medians, `cap` where the board's power limit held the clock
down); then llmc's ratios to the best PyTorch configuration of that model (the
most tokens/s in this run) and to each one.

Each implementation's own `RESULT {json}` line is preferred; without one (an
llmc-train that does not print it yet), the figures come from its step lines
`step N/M | loss L | ... | X ms | Y tok/s [| mem Z GiB]`, the time to the first
step from when that line came out. Device memory is also read from
nvidia-smi while each one runs (the most in use, less what was in use before
it started), the same measure for all of them, as are the clock and power
(gpu_watch.py). Each PyTorch run compiles into
empty caches (--warm-torch-cache: its usual ones), so that its time to the
first step is the cold figure.

exit status: 0 when every configuration ran (or was unavailable: a forced
attention backend that cannot run the model on this GPU), 1 when one failed
(its row says why), 2 for bad arguments or missing shards.
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import results_file  # noqa: E402  benchmarks/results_file.py
from gpu_watch import GpuWatcher, steady_figures  # noqa: E402  beside this script
TORCH_TRAINER = Path(__file__).resolve().parent / "train_gpt2_torch.py"
DEFAULT_DATA = "data/shards/corpus_train_*.bin"
GIB = 1024 ** 3

# One step line of llmc-train (and of train_gpt2_torch.py, which prints the
# same): "step     3/50 | loss 10.1 | norm 1.2 | lr 3.00e-04 | 62.1 ms | 527000 tok/s | MFU 40% | mem 12.3 GiB".
STEP_LINE = re.compile(r"^\s*step\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
FIELD_MS = re.compile(NUMBER + r"\s*ms\b")
FIELD_TOKS = re.compile(NUMBER + r"\s*tok/s\b")
FIELD_LOSS = re.compile(r"\bloss\s+" + NUMBER)
FIELD_MEM = re.compile(r"\bmem\s+" + NUMBER + r"\s*(GiB|MiB|GB|MB)\b")
MEM_UNITS = {"GiB": GIB, "MiB": 1024 ** 2, "GB": 1e9, "MB": 1e6}


def parse_step_line(line):
    """The fields of one step line: {step, steps, ms, tok_s, loss, mem_bytes}
    (absent fields None), or None when the line is no step line."""
    match = STEP_LINE.match(line)
    if not match:
        return None
    rest = match.group(3)

    def number(pattern):
        found = pattern.search(rest)
        return float(found.group(1)) if found else None

    mem = FIELD_MEM.search(rest)
    return {"step": int(match.group(1)), "steps": int(match.group(2)), "ms": number(FIELD_MS),
            "tok_s": number(FIELD_TOKS), "loss": number(FIELD_LOSS),
            "mem_bytes": float(mem.group(1)) * MEM_UNITS[mem.group(2)] if mem else None}


def parse_result_line(line):
    """The JSON of a `RESULT {...}` line, or None."""
    if not line.startswith("RESULT "):
        return None
    try:
        value = json.loads(line[len("RESULT "):])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def summarize(lines, warmup_steps, tokens_per_step, first_step_s=None):
    """One implementation's figures from its output lines: its RESULT line's
    where it printed one, each missing figure from the step lines (the median
    over the steps after warmup_steps). first_step_s: seconds from its start to
    the first step line, when the caller timed it."""
    steps, result = [], None
    for line in lines:
        step = parse_step_line(line)
        if step:
            steps.append(step)
        result = parse_result_line(line) or result
    summary = {"steps_seen": len(steps), "from_result_line": result is not None}
    timed = [s for s in steps if s["step"] > warmup_steps and s["ms"] is not None]
    if timed:
        ms = statistics.median(s["ms"] for s in timed)
        summary["ms_per_step"] = ms
        summary["tokens_per_s"] = tokens_per_step / (ms / 1e3)
    memories = [s["mem_bytes"] for s in steps if s["mem_bytes"] is not None]
    if memories:
        summary["peak_memory_bytes"] = max(memories)
    if steps and steps[-1]["loss"] is not None:
        summary["final_loss"] = steps[-1]["loss"]
    if first_step_s is not None:
        summary["time_to_first_step_s"] = first_step_s
    for key, value in (result or {}).items():
        if value is not None:
            summary[key] = value
    return summary


def run_one(name, command, env, log_path, timeout_s, gpu_index, warmup_steps):
    """Runs one implementation, echoing and logging its output; returns (exit status or a reason it
    did not finish, its lines, seconds to its first step line, nvidia-smi's figures: {device_memory_bytes,
    and over the timed steps sm_mhz, power_w, power_limit_w, power_capped, samples}, None without nvidia-smi)."""
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    lines, first_step_s, step_times = [], None, {}
    # llmc-train flushes each step line; stdbuf keeps any other C stdio output
    # line-buffered through the pipe so that the timestamps mean something.
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL", "-eL"] + command
    with GpuWatcher(gpu_index) as gpu, open(log_path, "w") as log:
        start = time.time()
        try:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       env=env, cwd=REPO, bufsize=1, errors="replace")
        except OSError as error:
            return f"could not start: {error}", lines, None, None
        timer = threading.Timer(timeout_s, process.kill)
        timer.start()
        for line in process.stdout:
            if step := STEP_LINE.match(line):
                step_times[int(step.group(1))] = time.time()
                if first_step_s is None:
                    first_step_s = time.time() - start
            lines.append(line.rstrip("\n"))
            log.write(line)
            print(f"  {line}", end="", flush=True)
        status = process.wait()
        timer.cancel()
        if status != 0 and time.time() - start >= timeout_s:
            status = f"killed after {timeout_s} s"
    # The timed steps run from the end of the last warm-up step to the last step line.
    timed = sorted(n for n in step_times if n > warmup_steps)
    steady = steady_figures(gpu.samples, step_times.get(warmup_steps, start), step_times[timed[-1]]) if timed else None
    figures = {"device_memory_bytes": gpu.used_bytes(), **(steady or {})} if gpu.samples else None
    return status, lines, first_step_s, figures


def failure_reason(status, lines):
    """A short reason for a failed run: its exit status and its last words."""
    last = next((line.strip() for line in reversed(lines) if line.strip()), "no output")
    reason = status if isinstance(status, str) else f"exit {status}"
    return f"{reason}: {last[:160]}"


# The configurations, in the order they run for each model: llmc-train, then
# PyTorch's reference trainer in the configurations a user would choose.
# compile: torch.compile with the attention backend PyTorch picks; compile-cudnn:
# with cuDNN's fused attention forced; eager: no compilation, PyTorch's pick.
CONFIGS = {
    "llmc": {"implementation": "llmc", "torch_flags": None},
    "compile": {"implementation": "torch.compile", "torch_flags": ["--compile", "1", "--attention", "auto"]},
    "compile-cudnn": {"implementation": "torch.compile", "torch_flags": ["--compile", "1", "--attention", "cudnn"]},
    "eager": {"implementation": "eager", "torch_flags": ["--compile", "0", "--attention", "auto"]},
}
CONFIG_ALIASES = {"compile-auto": "compile"}
# train_gpt2_torch.py's exit status when the --attention backend asked for
# cannot run the model on this GPU: that configuration is reported unavailable,
# not failed.
EXIT_UNAVAILABLE = 3


def parse_models(text, default_batch):
    """'d12:32,d24:32,d48:16' -> [('d12', 32), ('d24', 32), ('d48', 16)]; a model without ':B' gets
    default_batch. Raises ValueError on a malformed entry."""
    models = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, _, batch = entry.rpartition(":") if ":" in entry else (entry, "", "")
        if not name:
            raise ValueError(f"'{entry}': expected MODEL or MODEL:B, e.g. d12:32")
        if batch and not (batch.isdigit() and int(batch) > 0):
            raise ValueError(f"'{entry}': the batch size after ':' must be a positive integer")
        if any(name == seen for seen, _ in models):
            raise ValueError(f"'{name}' is given twice")
        models.append((name, int(batch) if batch else default_batch))
    if not models:
        raise ValueError("no model given")
    return models


def model_tag(model):
    """A model's name in file names: dN as it is, a checkpoint file by its stem."""
    return Path(model).stem if model.endswith(".bin") else re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


def attention_cell(row):
    """What the attention column says: 'auto: flash' (PyTorch's pick, where the
    trainer could tell), 'cudnn', '-' for llmc."""
    if row["config"] == "llmc":
        return "-"
    flags = CONFIGS[row["config"]]["torch_flags"]
    asked = row["summary"].get("attention") or flags[flags.index("--attention") + 1]
    picked = row["summary"].get("attention_backend")
    return f"{asked}: {picked}" if asked == "auto" and picked else asked


def best_pytorch(rows, model):
    """The PyTorch row of this model with the most tokens/s among those that ran, or None."""
    candidates = [r for r in rows if r["model"] == model and r["config"] != "llmc" and r["ok"]
                  and r["summary"].get("tokens_per_s")]
    return max(candidates, key=lambda r: r["summary"]["tokens_per_s"], default=None)


def format_grid(headers, body):
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in body])


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def format_table(rows):
    headers = ["model", "B", "config", "attention", "ms/step", "tok/s", "peak mem GiB", "device mem GiB",
               "first step s", "final loss", "SM MHz", "power W", "J/step", "status"]
    body = []
    for row in rows:
        s = row["summary"]
        mem = s.get("peak_memory_bytes")
        device_mem = row["device_memory_bytes"]
        best = best_pytorch(rows, row["model"])
        status = row["status"] + (" (best PyTorch)" if best is row else "")
        config = row["config"]
        if s.get("mode") and config != "llmc" and not config.startswith(s["mode"]):
            config += f" (ran {s['mode']})"  # torch.compile on the CPU runs eager
        body.append([row["model"], str(row["B"]), config, attention_cell(row), fmt(s.get("ms_per_step"), ".1f"),
                     fmt(s.get("tokens_per_s"), ",.0f"), fmt(mem / GIB if mem else None, ".2f"),
                     fmt(device_mem / GIB if device_mem else None, ".2f"), fmt(s.get("time_to_first_step_s"), ".1f"),
                     fmt(s.get("final_loss"), ".4f")] + gpu_cells(row.get("gpu"), s.get("ms_per_step")) + [status])
    return format_grid(headers, body)


def joules_per_step(gpu, ms_per_step):
    """The energy of a step: the median power over the timed steps times the step's time, in joules;
    None without either. At the board's power limit it is what a step's time is made of."""
    power = (gpu or {}).get("power_w")
    return power * ms_per_step / 1e3 if power and ms_per_step else None


def gpu_cells(gpu, ms_per_step=None):
    """The SM clock, power and energy columns: nvidia-smi's medians over the timed steps, the power marked
    'cap' where the software power cap held the clock down in at least half of the samples, and the
    energy a step (joules_per_step)."""
    gpu = gpu or {}
    capped = gpu.get("power_capped") is not None and gpu["power_capped"] >= 0.5
    return [fmt(gpu.get("sm_mhz"), ".0f"), fmt(gpu.get("power_w"), ".0f") + (" cap" if capped else ""),
            fmt(joules_per_step(gpu, ms_per_step), ".1f")]


def ratios(llmc, other):
    """llmc's figures over another row's: {tokens_per_s, ms_per_step, joules_per_step, peak_memory,
    device_memory, first_step}, each None where either lacks it; None when either did not run."""
    if not (llmc and other and llmc["ok"] and other["ok"]):
        return None
    a, b = llmc["summary"], other["summary"]

    def over(x, y):
        return x / y if x and y else None

    return {"tokens_per_s": over(a.get("tokens_per_s"), b.get("tokens_per_s")),
            "ms_per_step": over(a.get("ms_per_step"), b.get("ms_per_step")),
            "joules_per_step": over(joules_per_step(llmc.get("gpu"), a.get("ms_per_step")),
                                    joules_per_step(other.get("gpu"), b.get("ms_per_step"))),
            "peak_memory": over(a.get("peak_memory_bytes"), b.get("peak_memory_bytes")),
            "device_memory": over(llmc["device_memory_bytes"], other["device_memory_bytes"]),
            "first_step": over(a.get("time_to_first_step_s"), b.get("time_to_first_step_s"))}


def ratio_table(rows):
    """llmc against the best PyTorch configuration of each model, then against each one: its figure over
    PyTorch's. Empty when llmc did not run."""
    headers = ["model", "llmc / ...", "tok/s", "ms/step", "J/step", "peak mem", "device mem", "first step"]
    body = []
    models = list(dict.fromkeys(row["model"] for row in rows))
    for model in models:
        llmc = next((r for r in rows if r["model"] == model and r["config"] == "llmc"), None)
        if llmc is None:
            continue
        best = best_pytorch(rows, model)
        others = [(f"best PyTorch ({best['config']})" if best else "best PyTorch (none ran)", best)]
        others += [(r["config"], r) for r in rows if r["model"] == model and r["config"] != "llmc"]
        for label, other in others:
            r = ratios(llmc, other)
            if r is None:
                why = "llmc failed" if not llmc["ok"] else other["status"].split(":")[0] if other else "none ran"
                body.append([model, label, f"n/a ({why})", "", "", "", "", ""])
                continue
            body.append([model, label] + [fmt(r[k], ".3f") + ("x" if r[k] is not None else "")
                                          for k in ("tokens_per_s", "ms_per_step", "joules_per_step", "peak_memory",
                                                    "device_memory", "first_step")])
    return format_grid(headers, body) if body else ""


def first_visible_gpu():
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llmc-train", default=str(REPO / "build/bin/llmc-train"), help="the llmc-train binary")
    p.add_argument("-i", "--data", default=DEFAULT_DATA, help=f"training shards glob (default {DEFAULT_DATA})")
    p.add_argument("-e", "--model", default="d12", help="dN or an llm.c checkpoint file (default d12)")
    p.add_argument("-b", "--batch-size", type=int, default=32, help="default 32")
    p.add_argument("--models", default=None,
                   help="several models in one run, MODEL[:B] separated by commas, e.g. d12:32,d24:32,d48:16 "
                        "(B defaults to -b); replaces -e")
    p.add_argument("-t", "--seq-len", type=int, default=1024, help="default 1024")
    p.add_argument("-x", "--steps", type=int, default=50, help="steps of each run, warm-up included (default 50)")
    p.add_argument("--warmup-steps", type=int, default=5, help="first steps left out of the median (default 5)")
    p.add_argument("-l", "--lr", type=float, default=3e-4, help="learning rate, passed to all (default 3e-4)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cuda (default); cpu only to try the runner on a small model")
    p.add_argument("--only", default=",".join(CONFIGS),
                   help=f"which to run, of {','.join(CONFIGS)} (compile-auto: compile; default all)")
    p.add_argument("--llmc-arg", action="append", default=[], help="one more argument for llmc-train (repeatable)")
    p.add_argument("--torch-arg", action="append", default=[],
                   help="one more argument for every train_gpt2_torch.py run (repeatable; after the configuration's "
                        "own, so it overrides them), e.g. --torch-arg=--autocast=fp32")
    p.add_argument("--python", default=sys.executable, help="python for the PyTorch runs (default this one)")
    p.add_argument("--log-dir", default=str(REPO / "out/train_benchmark"),
                   help="each run's full output and summary.json go here (default out/train_benchmark)")
    p.add_argument("--warm-torch-cache", action="store_true",
                   help="let PyTorch use its usual compile caches (default: fresh empty ones for each run)")
    p.add_argument("--timeout", type=float, default=900, help="seconds each run may take (default 900)")
    p.add_argument("--out", default=None, help="the results file, overwritten (earlier runs are in git's history); "
                   "'-': none (default on the GPU results/MACHINE-MODELS-train-benchmark.txt beside this script)")
    p.add_argument("--gpu", type=int, default=first_visible_gpu(),
                   help="the GPU index nvidia-smi watches (default the first of CUDA_VISIBLE_DEVICES, else 0)")
    args = p.parse_args(argv)
    only = [CONFIG_ALIASES.get(name.strip(), name.strip()) for name in args.only.split(",") if name.strip()]
    if unknown := set(only) - set(CONFIGS):
        p.error(f"--only: unknown {', '.join(sorted(unknown))} (known: {', '.join(CONFIGS)}, compile-auto)")
    args.only = [name for name in CONFIGS if name in only]  # each once, in the running order
    if args.batch_size <= 0:
        p.error("-b must be positive")
    try:
        args.models = parse_models(args.models, args.batch_size) if args.models else [(args.model, args.batch_size)]
    except ValueError as error:
        p.error(f"--models: {error}")
    if not 0 <= args.warmup_steps < args.steps:
        p.error(f"--warmup-steps {args.warmup_steps} leaves no timed step of -x {args.steps}")
    return args


def main(argv=None):
    args = parse_args(argv)
    out = args.out
    if out is None:
        tags = "-".join(model_tag(model) for model, _ in args.models)
        out = "-" if args.device != "cuda" else str(
            Path(__file__).resolve().parent / "results" / f"{results_file.machine_slug()}-{tags}-train-benchmark.txt")
    with results_file.record(out):
        return run(args)


def plan_runs(args):
    """[(model, B, config, command)] in the order they run: each model's configurations in turn."""
    plans = []
    for model, batch in args.models:
        common = ["-i", args.data, "-e", model, "-b", str(batch), "-t", str(args.seq_len),
                  "-x", str(args.steps), "-l", str(args.lr)]
        for config in args.only:
            flags = CONFIGS[config]["torch_flags"]
            if flags is None:
                # The same batches in the same order as PyTorch's script reads
                # them: llmc-train shuffles by default (as llm.c does).
                command = ([args.llmc_train, "--device", args.device] + common
                           + ["-v", "0", "-s", "0", "--shuffle", "0"] + args.llmc_arg)
            else:
                command = ([args.python, str(TORCH_TRAINER), "--device", args.device] + common + flags
                           + ["--warmup-steps", str(args.warmup_steps)] + args.torch_arg)
            plans.append((model, batch, config, command))
    return plans


def run(args):
    if not glob.glob(args.data if os.path.isabs(args.data) else str(REPO / args.data)):
        print(f"run_train_benchmark.py: no shards match \"{args.data}\". Make them (on a machine with the text):\n"
              f"  build/bin/llmc-data --tokenizer ../shared/data/gpt2-bpe --out data/shards --name corpus "
              f"--val-fraction 0.05 ../shared/data/text\n(scripts/run.sh makes the same), and carry data/shards "
              f"to the GPU machine.", file=sys.stderr)
        return 2
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)

    env = dict(os.environ)
    # llmc-train's JIT finds its sources, targets and device headers in this
    # tree (as the GPU tests do on the copied tree); PyTorch's output unbuffered.
    env.setdefault("LLMC_SOURCE_DIR", str(REPO))
    env.setdefault("LLMC_TARGETS", str(REPO / "compiler/targets"))
    env.setdefault("LLMC_DEVICE_INCLUDE", str(REPO / "runtime/cuda/device"))
    env["PYTHONUNBUFFERED"] = "1"
    cache_root = None
    if not args.warm_torch_cache:
        # Each PyTorch run compiles into empty Inductor and Triton caches, so
        # that its time to the first step is the cold figure whatever ran before.
        cache_root = Path(tempfile.mkdtemp(prefix="train_benchmark_cache_"))

    rows = []
    for model, batch, config, command in plan_runs(args):
        tag = f"{model_tag(model)}-{config}"
        log_path = log_dir / f"{tag}.log"
        run_env = dict(env)
        if cache_root and config != "llmc":
            run_env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_root / tag / "inductor")
            run_env["TRITON_CACHE_DIR"] = str(cache_root / tag / "triton")
        if not os.access(command[0], os.X_OK):
            status, lines, first_step_s, gpu = "not run", [f"no executable {command[0]}"], None, None
        else:
            status, lines, first_step_s, gpu = run_one(f"{model} {config}", command, run_env, log_path, args.timeout,
                                                       args.gpu, args.warmup_steps)
        summary = summarize(lines, args.warmup_steps, batch * args.seq_len, first_step_s)
        ok = status == 0 and "ms_per_step" in summary
        unavailable = config != "llmc" and status == EXIT_UNAVAILABLE
        if ok:
            state = "ok" + ("" if summary["from_result_line"] else " (from step lines)")
        elif unavailable:
            last = next((line.strip() for line in reversed(lines) if line.strip()), "")
            state = "unavailable: " + last.split("unavailable: ", 1)[-1][:160]
        elif status == 0:
            state = f"failed: no timed step lines (saw {summary['steps_seen']})"
        else:
            state = "failed: " + failure_reason(status, lines)
        rows.append({"model": model, "B": batch, "config": config, "name": CONFIGS[config]["implementation"],
                     "mode": config, "command": command, "ok": ok, "unavailable": unavailable, "status": state,
                     "summary": summary, "device_memory_bytes": (gpu or {}).get("device_memory_bytes"),
                     "gpu": gpu, "log": str(log_path)})

    if cache_root:
        shutil.rmtree(cache_root, ignore_errors=True)

    models = ", ".join(f"{model} B={batch}" for model, batch in args.models)
    print(f"\nGPT-2 training step: {models}; T={args.seq_len}, {args.steps} steps (median over the last "
          f"{args.steps - args.warmup_steps}), data {args.data}, device {args.device}")
    print(format_table(rows))
    print("(SM MHz, power W: nvidia-smi's medians over the timed steps; cap: the board's power limit held the "
          "clock down; J/step: that power times ms/step)")
    table = ratio_table(rows)
    if table:
        print("\nllmc's figure over PyTorch's (best PyTorch: the configuration of the most tokens/s in this run)")
        print(table)
        print("(below 1 is better for ms/step, J/step, memory and first step, above 1 for tok/s; peak mem is each "
              "one's own report, device mem nvidia-smi's)")
    (log_dir / "summary.json").write_text(json.dumps(
        {"models": [{"model": model, "B": batch} for model, batch in args.models], "T": args.seq_len,
         "steps": args.steps, "warmup_steps": args.warmup_steps, "data": args.data,
         "best_pytorch": {model: (best["config"] if (best := best_pytorch(rows, model)) else None)
                          for model, _ in args.models},
         "ratios_to_best": {model: ratios(next((r for r in rows if r["model"] == model and r["config"] == "llmc"),
                                               None), best_pytorch(rows, model))
                            for model, _ in args.models},
         "rows": rows}, indent=2) + "\n")
    print(f"logs and summary.json in {log_dir}")
    return 0 if all(row["ok"] or row["unavailable"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
