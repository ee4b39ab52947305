"""The diagram attention and MLP ops (llmc's Python package) against PyTorch's own, on a GPU:
values, gradients through torch.autograd, torch.compile, and time side by side, in one table.

    PYTHONPATH=build/python python3 tests/python/compare_ops_gpu.py [--storage bf16|f32] [--reps N]

Each llmc result and PyTorch's own (at the same storage dtype) is compared with an f64 PyTorch
reference on the same inputs; llmc passes where its relative error (Frobenius norms) is within
twice PyTorch's plus a floor (1e-2 for bf16, 1e-5 for f32). Exit status: 0 when all pass, 1
when one fails, 77 (skipped) without a GPU or without torch >= 2.4.
"""

import argparse
import sys

SKIP = 77


def skip(why):
    print("skipped: " + why, file=sys.stderr)
    sys.exit(SKIP)


try:
    import torch
    import torch.nn.functional as F
except ImportError:
    skip("PyTorch is not installed")
if not torch.cuda.is_available():
    skip("no CUDA GPU")
if not hasattr(torch.library, "custom_op"):
    skip("torch {} lacks torch.library.custom_op (2.4+)".format(torch.__version__))

from pathlib import Path  # noqa: E402

import llmc  # noqa: E402

SOURCE = Path(__file__).resolve().parents[2]


def relative(got, want):
    want = want.double()
    return ((got.double() - want).norm() / want.norm().clamp_min(1e-30)).item()


def time_ms(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def check_case(name, llmc_fn, torch_fn, inputs, names, dtype, reps, rows, timings, floor):
    """Values and gradients of llmc_fn and torch_fn against torch_fn in f64; times of both."""
    exact_in = [x.detach().double().requires_grad_() for x in inputs]
    exact = torch_fn(*exact_in)
    seed = torch.randn_like(exact)
    exact_grads = torch.autograd.grad(exact, exact_in, seed)

    results = {}
    for who, fn in (("llmc", llmc_fn), ("torch", torch_fn), ("llmc compiled", torch.compile(llmc_fn, fullgraph=True))):
        xs = [x.detach().to(dtype).requires_grad_() for x in inputs]
        out = fn(*xs)
        grads = torch.autograd.grad(out, xs, seed.to(out.dtype))
        results[who] = [out] + list(grads)
    labels = ["output"] + ["grad " + n for n in names]
    ok = True
    for i, label in enumerate(labels):
        want = exact if i == 0 else exact_grads[i - 1]
        t_err = relative(results["torch"][i], want)
        for who in ("llmc", "llmc compiled"):
            err = relative(results[who][i], want)
            passed = err <= 2 * t_err + floor
            ok &= passed
            rows.append((name, who, label, err, t_err, "ok" if passed else "FAIL"))

    xs = [x.detach().to(dtype).requires_grad_() for x in inputs]
    for who, fn in (("llmc", llmc_fn), ("torch", torch_fn)):
        forward = time_ms(lambda: fn(*[x.detach() for x in xs]), reps)

        def step():
            out = fn(*xs)
            torch.autograd.grad(out, xs, seed.to(out.dtype))

        timings.append((name, who, forward, time_ms(step, reps)))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", choices=("bf16", "f32"), default="bf16")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("-B", type=int, default=4)
    parser.add_argument("-T", type=int, default=1024)
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.storage == "bf16" else torch.float32
    floor = 1e-2 if args.storage == "bf16" else 1e-5
    torch.manual_seed(0)
    device = "cuda"
    B, H, T, D, C = args.B, 12, args.T, 64, 768

    attention = llmc.compile(SOURCE / "diagrams/gpt2/attention.dg", entry="causal_attention", grad=True,
                             storage=args.storage)
    mlp = llmc.compile(SOURCE / "diagrams/gpt2/mlp.dg", entry="mlp", grad=True, storage=args.storage)

    def torch_attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def torch_mlp(x, wfc, bfc, wproj, bproj):
        return F.linear(F.gelu(F.linear(x, wfc, bfc), approximate="tanh"), wproj, bproj)

    rows, timings = [], []
    qkv = [torch.randn(B, H, T, D, device=device) for _ in range(3)]
    ok = check_case("attention", attention, torch_attention, qkv, ("q", "k", "v"), dtype, args.reps, rows, timings, floor)
    mlp_inputs = [torch.randn(B, T, C, device=device), torch.randn(4 * C, C, device=device) * C ** -0.5,
                  torch.randn(4 * C, device=device) * 0.1, torch.randn(C, 4 * C, device=device) * (4 * C) ** -0.5,
                  torch.randn(C, device=device) * 0.1]
    ok &= check_case("mlp", mlp, torch_mlp, mlp_inputs, ("x", "wfc", "bfc", "wproj", "bproj"), dtype, args.reps, rows, timings, floor)

    print("{} ({}), torch {}, storage {}; B={} H={} T={} D={} C={}".format(
        torch.cuda.get_device_name(), attention.module_for_arrays(qkv).arch, torch.__version__, args.storage,
        B, H, T, D, C))
    print("\nrelative error against PyTorch in f64 (Frobenius norms)")
    print("{:<10} {:<14} {:<11} {:>12} {:>12}  {}".format("op", "who", "value", "llmc", "torch", ""))
    for r in rows:
        print("{:<10} {:<14} {:<11} {:>12.3e} {:>12.3e}  {}".format(*r))
    print("\ntime (median of {}, CUDA events), ms".format(args.reps))
    print("{:<10} {:<6} {:>10} {:>16}".format("op", "who", "forward", "forward+backward"))
    for t in timings:
        print("{:<10} {:<6} {:>10.3f} {:>16.3f}".format(*t))
    print("\n" + ("all within tolerance" if ok else "SOME VALUES BEYOND TOLERANCE"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
