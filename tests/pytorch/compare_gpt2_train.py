#!/usr/bin/env python3
"""Checks llmc's GPT-2 training step (gradient, clipping, AdamW) against PyTorch.

Reads what gpt2-train-dump wrote to DIR (an llm.c fp32 checkpoint, one batch,
llmc's fp32 step-0 loss and gradient, and the losses and gradient norms of its
AdamW steps on that batch), and redoes it all with the plain-PyTorch GPT-2 of
compare_gpt2_forward.py in fp32 (on CUDA when there is a GPU; TF32 off,
deterministic algorithms):

  * the step-0 loss (mean cross-entropy over B*T, the padded vocabulary left
    out) and every parameter's gradient, compared by the relative error
    ||llmc - torch|| / ||torch|| per parameter (the per-layer parameters stacked
    over the layers, as llm.c stores them);
  * the same number of steps of torch.nn.utils.clip_grad_norm_ and
    torch.optim.AdamW (two parameter groups: weight decay on wte, wpe, qkvw,
    attprojw, fcw, fcprojw only), comparing the loss before every step, the
    loss after the last, and every step's gradient norm before clipping.

Every error must be within the tolerance; the gradient norms have their own
(--norm-tolerance, default the same 1e-5): llmc's norm is one sum of the
squares of all the parameters' gradients (the interpreter accumulates sums in
double), PyTorch's a norm of per-parameter norms. For scale, the tables also show how
far PyTorch's own fp32 results are from the same computation in float64 (not
judged).

usage: compare_gpt2_train.py DIR [--tolerance 1e-5] [--norm-tolerance 1e-5]
exit status: 0 when every error is within the tolerance, 1 when one is not,
2 when the files in DIR are unusable.
"""

import argparse
import json
import os
import sys
from pathlib import Path

# Deterministic cuBLAS needs this before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from compare_gpt2_forward import (  # noqa: E402
    Gpt2, UnusableInput, parameter_shapes, read_checkpoint, read_int32, relative_error)

# The parameters AdamW decays (llm.c's and nanoGPT's choice: the matrices).
DECAYED = ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw")
# The parameters that are not per layer.
SHARED = ("wte", "wpe", "lnfw", "lnfb")


def llmc_parameters(model):
    """The model's tensors by llm.c parameter name, in checkpoint order: one
    tensor for the shared ones, one per layer for the per-layer ones."""
    per_layer = {
        "ln1w": lambda b: b.ln1.weight, "ln1b": lambda b: b.ln1.bias,
        "qkvw": lambda b: b.attention.qkv.weight, "qkvb": lambda b: b.attention.qkv.bias,
        "attprojw": lambda b: b.attention.proj.weight, "attprojb": lambda b: b.attention.proj.bias,
        "ln2w": lambda b: b.ln2.weight, "ln2b": lambda b: b.ln2.bias,
        "fcw": lambda b: b.mlp.fc.weight, "fcb": lambda b: b.mlp.fc.bias,
        "fcprojw": lambda b: b.mlp.proj.weight, "fcprojb": lambda b: b.mlp.proj.bias,
    }
    shared = {"wte": model.wte.weight, "wpe": model.wpe.weight, "lnfw": model.lnf.weight, "lnfb": model.lnf.bias}
    assert set(shared) == set(SHARED)
    names = [name for name, _ in parameter_shapes(1, 1, 1, 1)]
    return [(name, [shared[name]] if name in SHARED else [per_layer[name](b) for b in model.blocks])
            for name in names]


def error(a, b):
    """relative_error, with the absolute error where the reference is zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not np.any(b):
        return float(np.linalg.norm(a))
    return relative_error(a, b)


class Torch:
    """The PyTorch side for one dtype: the model, the batch, the loss."""

    def __init__(self, config, sizes, params, tokens, targets, dtype, device):
        self.V = config["V"]
        self.model = Gpt2(sizes["maxT"], sizes["L"], sizes["H"], sizes["C"], config["Vp"])
        self.model.load_llmc(params)
        self.model.to(device=device, dtype=dtype)
        self.tokens = torch.from_numpy(tokens).to(device)
        self.targets = torch.from_numpy(targets).to(device).reshape(-1)

    def loss(self):
        # As diagrams/gpt2/model.dg: the mean over B*T of the cross-entropy over
        # the real vocabulary (the padded logits are -inf there: left out here).
        logits = self.model(self.tokens)
        return F.cross_entropy(logits[..., :self.V].reshape(-1, self.V), self.targets)

    def gradient(self):
        """The step-0 loss and the gradient as numpy arrays by llm.c name."""
        self.model.zero_grad(set_to_none=True)
        loss = self.loss()
        loss.backward()
        # The per-layer gradients stacked over the layers: [L, ...], as llm.c's.
        grads = {name: tensors[0].grad if name in SHARED else torch.stack([t.grad for t in tensors])
                 for name, tensors in llmc_parameters(self.model)}
        return loss.item(), {name: g.detach().cpu().double().numpy() for name, g in grads.items()}

    def train(self, steps, settings):
        """Losses before each step and after the last, and each step's norm."""
        decayed, other = [], []
        for name, tensors in llmc_parameters(self.model):
            (decayed if name in DECAYED else other).extend(tensors)
        optimizer = torch.optim.AdamW(
            [{"params": decayed, "weight_decay": settings["weight_decay"]}, {"params": other, "weight_decay": 0.0}],
            lr=settings["lr"], betas=(settings["beta1"], settings["beta2"]), eps=settings["eps"])
        losses, norms = [], []
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = self.loss()
            losses.append(loss.item())
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(self.model.parameters(), settings["grad_clip"]).item())
            optimizer.step()
        with torch.no_grad():
            losses.append(self.loss().item())
        return losses, norms


def read_numbers(path, count):
    values = [float(line) for line in path.read_text().split()]
    if len(values) != count:
        raise UnusableInput(f"{path}: {len(values)} numbers, expected {count}")
    return values


def compare(directory, tolerance, norm_tolerance):
    """Prints the tables; returns (passed, the one-line summary)."""
    config = json.loads((directory / "config.json").read_text())
    sizes, params = read_checkpoint(directory / "model.bin")
    for name, value in sizes.items():
        if config[name] != value:
            raise UnusableInput(f"config.json has {name} = {config[name]}, model.bin {value}")
    if tuple(config["decayed"]) != DECAYED:
        raise UnusableInput(f"config.json decays {config['decayed']}, this script {list(DECAYED)}")
    B, T, steps = config["B"], config["T"], config["steps"]
    tokens = read_int32(directory / "tokens.bin", (B, T))
    targets = read_int32(directory / "targets.bin", (B, T))
    shapes = parameter_shapes(sizes["maxT"], sizes["L"], sizes["C"], config["Vp"])
    flat = np.fromfile(directory / "grads.bin", dtype="<f4")
    expected = sum(int(np.prod(shape)) for _, shape in shapes)
    if flat.size != expected:
        raise UnusableInput(f"grads.bin: {flat.size} floats, the parameters are {expected}")
    llmc_grads, offset = {}, 0
    for name, shape in shapes:
        count = int(np.prod(shape))
        llmc_grads[name] = flat[offset:offset + count].reshape(shape)
        offset += count
    llmc_loss0 = read_numbers(directory / "loss0.txt", 1)[0]
    llmc_losses = read_numbers(directory / "losses.txt", steps + 1)
    llmc_norms = read_numbers(directory / "grad_norms.txt", steps)

    # Full fp32: no TF32 anywhere, deterministic kernels.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def side(dtype):
        return Torch(config, sizes, params, tokens, targets, dtype, device)

    loss32, grads32 = side(torch.float32).gradient()
    loss64, grads64 = side(torch.float64).gradient()

    failures = []
    print(f"step-0 gradient, relative error per parameter (tolerance {tolerance:.0e}):")
    print(f"  {'parameter':<10} {'shape':<16} {'||grad||':>11} {'llmc vs torch':>14} {'torch32 vs 64':>14}")
    grad_errors = {}
    for name, shape in shapes:
        e = grad_errors[name] = error(llmc_grads[name], grads32[name])
        if not e <= tolerance:
            failures.append(f"gradient {name}")
        print(f"  {name:<10} {str(list(shape)):<16} {np.linalg.norm(grads32[name]):11.4e} {e:14.2e} "
              f"{error(grads32[name], grads64[name]):14.2e}{'' if e <= tolerance else '  FAIL'}")
    all_llmc = np.concatenate([llmc_grads[n].ravel() for n, _ in shapes])
    all_torch = np.concatenate([grads32[n].ravel() for n, _ in shapes])
    whole_error = error(all_llmc, all_torch)
    print(f"  {'(all)':<10} {'':<16} {np.linalg.norm(all_torch):11.4e} {whole_error:14.2e}")

    loss0_error = error(llmc_loss0, loss32)
    if not loss0_error <= tolerance:
        failures.append("step-0 loss")
    # The trainer's first loss comes from the same graph as loss0.txt.
    if llmc_losses[0] != llmc_loss0:
        failures.append("loss0.txt against losses.txt")
    print(f"step-0 loss: llmc {llmc_loss0:.9g}, torch fp32 {loss32:.9g}, torch fp64 {loss64:.9g}: "
          f"relative error {loss0_error:.2e}")

    losses32, norms32 = side(torch.float32).train(steps, config)
    losses64, norms64 = side(torch.float64).train(steps, config)
    print(f"{steps} AdamW steps on the batch (lr {config['lr']:g}, betas ({config['beta1']:g}, {config['beta2']:g}), "
          f"eps {config['eps']:g}, weight decay {config['weight_decay']:g}, clip {config['grad_clip']:g}):")
    print(f"  {'step':>5} {'llmc loss':>12} {'torch loss':>12} {'rel err':>9} {'torch32-64':>10}   "
          f"{'llmc norm':>10} {'torch norm':>10} {'rel err':>9} {'torch32-64':>10}")
    loss_errors, norm_errors = [], []
    for step in range(steps + 1):
        e = error(llmc_losses[step], losses32[step])
        loss_errors.append(e)
        if not e <= tolerance:
            failures.append(f"loss before step {step}" if step < steps else "final loss")
        line = (f"  {step if step < steps else 'final':>5} {llmc_losses[step]:12.7f} {losses32[step]:12.7f} {e:9.2e} "
                f"{error(losses32[step], losses64[step]):10.2e}")
        if step < steps:
            n = error(llmc_norms[step], norms32[step])
            norm_errors.append(n)
            if not n <= norm_tolerance:
                failures.append(f"gradient norm at step {step}")
            clipped = "c" if norms32[step] + 1e-6 > config["grad_clip"] else " "
            line += (f"   {llmc_norms[step]:10.5f} {norms32[step]:10.5f}{clipped}{n:9.2e} "
                     f"{error(norms32[step], norms64[step]):10.2e}")
        print(line + ("" if e <= tolerance else "  FAIL"))
    clips = sum(n + 1e-6 > config["grad_clip"] for n in norms32)
    print(f"  (c: the step clipped the gradient; {clips} of {steps} did; gradient norms judged to "
          f"{norm_tolerance:.0e}; llmc's step-0 norm from "
          f"grads.bin in float64 is {np.linalg.norm(all_llmc.astype(np.float64)):.7f}, torch's {norms32[0]:.7f})")

    passed = not failures
    worst = max(grad_errors, key=grad_errors.get)
    summary = (f"pytorch_gpt2_train: {'PASS' if passed else 'FAIL'}: gradient max relative error "
               f"{grad_errors[worst]:.2e} ({worst}), step-0 loss {loss0_error:.2e}, "
               f"{steps}-step losses max {max(loss_errors):.2e} ({llmc_losses[0]:.4f} -> {llmc_losses[-1]:.4f}), "
               f"grad norms max {max(norm_errors, default=0):.2e} ({clips} clipped); tolerance {tolerance:.0e} "
               f"(norms {norm_tolerance:.0e}); "
               f"B={B} T={T} maxT={sizes['maxT']} L={sizes['L']} C={sizes['C']} H={sizes['H']} V={config['V']} "
               f"Vp={config['Vp']}; torch {torch.__version__} on {device}"
               + ("" if passed else f"; failed: {', '.join(failures)}"))
    return passed, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where gpt2-train-dump wrote its files")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="largest relative error that passes")
    parser.add_argument("--norm-tolerance", type=float, default=1e-5,
                        help="largest relative error of a gradient norm that passes")
    args = parser.parse_args()
    try:
        passed, summary = compare(args.directory, args.tolerance, args.norm_tolerance)
    except (UnusableInput, OSError, KeyError, ValueError) as error_:
        print(f"compare_gpt2_train.py: {args.directory}: {error_}", file=sys.stderr)
        return 2
    print(summary)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
