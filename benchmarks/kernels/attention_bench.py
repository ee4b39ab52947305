#!/usr/bin/env python3
"""Causal attention: llmc's generated kernels against PyTorch's scaled-dot-product attention, in one run.

llmc's side is `step_kernels_bench` on two diagrams: tests/lit/pseudocode/attention.dg (the forward stream
alone) and tests/lit/pseudocode/attention_loss.dg (the training step of attention under a loss: the
forward recomputation and the backward streams, plus the loss's own small kernels, reported apart). PyTorch's
side is F.scaled_dot_product_attention(is_causal=True) in bf16 with the flash and the cuDNN backends, forward
alone and forward plus backward. All times are medians of CUDA-event-timed repetitions after warm-up, on
the same GPU in the same command; the table gives TFLOP/s (causal: half the T x T scores) and llmc's ratio to
each backend.

    python3 benchmarks/kernels/attention_bench.py --bench build/bin/step_kernels_bench

Needs a GPU and torch with CUDA; --torch-only times PyTorch alone (on the CPU too, as a smoke test).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results_file  # noqa: E402  benchmarks/results_file.py
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTHELP = "the results file, overwritten (earlier runs are in git's history); '-': none"


def llmc_times(bench, sizes, reps):
    """(forward ms, backward-stream ms, loss ms) from step_kernels_bench's JSON rows."""
    out = {}
    for name, diagram, extra in (("forward", "tests/lit/pseudocode/attention.dg", ["--entry", "attend", "--forward"]),
                                 ("training", "tests/lit/pseudocode/attention_loss.dg", ["--entry", "attention_loss"])):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        cmd = [bench, "--diagram", os.path.join(ROOT, diagram), "--set", sizes, "--reps", str(reps), "--top", "0",
               "--json", path] + extra
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"attention_bench: {' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
        with open(path) as f:
            rows = json.load(f)
        os.unlink(path)
        streams = sum(r["measured_us"] for r in rows if r["tensor_cores"]) / 1e3
        rest = sum(r["measured_us"] for r in rows if not r["tensor_cores"]) / 1e3
        out[name] = (streams, rest, sum(1 for r in rows if r["tensor_cores"]))
    return out


def torch_times(B, H, T, D, reps, device):
    import contextlib

    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = (torch.randn(B, H, T, D, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, H, T, D, device=device, dtype=dtype)

    def timed(fn):
        for _ in range(3):
            fn()
        if device != "cuda":
            import time
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return sorted(times)[len(times) // 2]
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    def attend(q, k, v):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # torch before 2.0 (a CPU smoke test only): the same attention spelled out.
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, -1) @ v

    if device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = {"flash": lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION),
                    "cudnn": lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)}
    else:
        backends = {"cpu": contextlib.nullcontext}
    out = {}
    for name, backend in backends.items():
        try:
            with backend():
                fwd = timed(lambda: attend(q, k, v))
                both = timed(lambda: torch.autograd.grad(attend(q, k, v), (q, k, v), grad))
            out[name] = (fwd, both)
        except RuntimeError as e:
            out[name] = str(e).splitlines()[0]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default=os.path.join(ROOT, "build/bin/step_kernels_bench"), help="step_kernels_bench")
    p.add_argument("-B", type=int, default=32)
    p.add_argument("-H", type=int, default=12)
    p.add_argument("-T", type=int, default=1024)
    p.add_argument("-D", type=int, default=64)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--torch-only", action="store_true", help="time PyTorch alone (any device)")
    p.add_argument("--out", default=None, help=f"{OUTHELP} (default results/MACHINE-attention-vs-sdpa.txt beside "
                   "this script; none with --torch-only)")
    a = p.parse_args()
    out = a.out if a.out is not None else "-" if a.torch_only else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", f"{results_file.machine_slug()}-attention-vs-sdpa.txt")
    with results_file.record(out):
        measure(a)


def measure(a):

    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cuda" and not a.torch_only:
        sys.exit("attention_bench: no CUDA GPU for torch (use --torch-only for a CPU smoke test)")
    flops = 4 * a.B * a.H * a.T * a.T * a.D / 2  # q.k and p.v over the causal half
    print(f"causal attention B={a.B} H={a.H} T={a.T} d={a.D}, bf16, median of {a.reps}; "
          f"forward {flops / 1e9:.1f} GFLOP, backward 2.5x that")
    print("| implementation | forward ms | forward TFLOP/s | forward + backward ms | fwd+bwd TFLOP/s |")
    print("| --- | --- | --- | --- | --- |")
    theirs = torch_times(a.B, a.H, a.T, a.D, a.reps, device)
    for name, t in theirs.items():
        if isinstance(t, str):
            print(f"| torch {name} | unavailable: {t} | | | |")
            continue
        print(f"| torch {name} | {t[0]:.3f} | {flops / t[0] / 1e9:.0f} | {t[1]:.3f} | {3.5 * flops / t[1] / 1e9:.0f} |")
    if a.torch_only:
        return
    if not os.access(a.bench, os.X_OK):
        sys.exit(f"attention_bench: no step_kernels_bench at {a.bench} (build it, or give --bench)")
    ours = llmc_times(a.bench, f"B={a.B},H={a.H},T={a.T},D={a.D}", a.reps)
    fwd = ours["forward"][0]
    both = ours["training"][0]
    print(f"| llmc | {fwd:.3f} | {flops / fwd / 1e9:.0f} | {both:.3f} | {3.5 * flops / both / 1e9:.0f} |")
    print(f"(llmc forward: {ours['forward'][2]} stream launch(es) on the tensor cores; forward + backward: "
          f"{ours['training'][2]} stream launches, the forward recomputed within them; the loss's own kernels, "
          f"{ours['training'][1]:.3f} ms, left out)")
    for name, t in theirs.items():
        if not isinstance(t, str):
            print(f"llmc / torch {name}: forward {fwd / t[0]:.2f}x the time, forward + backward {both / t[1]:.2f}x")


if __name__ == "__main__":
    main()
