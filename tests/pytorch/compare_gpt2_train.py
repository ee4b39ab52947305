#!/usr/bin/env python3
"""Checks llmc's GPT-2 training step (gradient, clipping, AdamW) against PyTorch.

Reads what gpt2-train-dump wrote to DIR (an llm.c fp32 checkpoint, one batch,
llmc's step-0 loss and gradient, and the losses and gradient norms of its
AdamW steps on that batch; on the CPU from the interpreter, or on the GPU from
GpuTrainer in fp32 or bf16, as config.json's "device" and "precision" say), and
redoes it all with the plain-PyTorch GPT-2 of compare_gpt2_forward.py in fp32
(on CUDA when there is a GPU; TF32 off, deterministic algorithms):

  * the step-0 loss (mean cross-entropy over B*T, the padded vocabulary left
    out) and every parameter's gradient, compared by the relative error
    ||llmc - torch|| / ||torch|| per parameter (the per-layer parameters stacked
    over the layers, as llm.c stores them);
  * the same number of steps of torch.nn.utils.clip_grad_norm_ and
    torch.optim.AdamW (two parameter groups: weight decay on wte, wpe, qkvw,
    attprojw, fcw, fcprojw only), comparing the loss before every step, the
    loss after the last, and every step's gradient norm before clipping.

Every error must be within its tolerance. For scale, the tables also show how
far PyTorch's own fp32 results are from the same computation in float64 (not
judged). The tolerances follow config.json's "precision" (f32 where it names
none) unless the command line gives them:

  f32 (the CPU interpreter, and the GPU path with fp32 storage): every
    relative error within 1e-5 -- each parameter's gradient, the step-0 loss,
    the loss before every step and after the last (--tolerance), and every
    step's gradient norm (--norm-tolerance; llmc's norm is one sum of the
    squares of all the parameters' gradients, PyTorch's a norm of per-parameter
    norms). The interpreter accumulates its sums in double, so its errors are
    PyTorch's own fp32 rounding (about 1e-6, the torch32-vs-64 column). The GPU
    path's fp32 kernels sum in float, in another order than PyTorch (blocked
    and split reductions, on CUDA cores: fp32 storage puts no GEMM on TF32
    tensor cores), which adds rounding of the same kind and size -- a float
    sum of n terms is off by about sqrt(n) * 6e-8 of its size, 1e-6 for the
    few thousand terms of these models' longest sums -- so the same 1e-5
    holds, with the same margin of ten. Should a larger model's longer sums
    need more, --tolerance 1e-4 is still a check no fp32 bug passes: a wrong
    term, scale or index moves a gradient by far more than 1e-4 of its norm,
    while bf16 storage would already be off by 1e-2.
  bf16 (the GPU path in mixed precision: bf16 parameters and activations,
    fp32 gradients, master weights and AdamW): compared with PyTorch's fp32
    model, the reference -- what bf16 approximates; llm.c's test_gpt2.cu
    likewise checks its bf16 build against the fp32 gradients and losses
    PyTorch wrote. llmc's gradient is fp32 arithmetic on bf16
    inputs, so its error is bf16 rounding (2^-9 = 2e-3 relative per stored
    value) carried through every stored activation of the forward and
    backward passes, not a summation error:
      - each parameter's gradient: relative error ||llmc - torch|| / ||torch||
        within 5e-2 (--grad-tolerance). llm.c's test_gpt2.cu judges its bf16
        gradients per tensor by the largest elementwise difference, with
        hand-set thresholds from 5e-4 to 5e-1 for GPT-2 124M (2e-2 to 5e-2
        for most matrices and biases); a norm-wise 5e-2 is of the same spirit
        and one rule for every tensor. A simulation of llmc's bf16 storage in
        PyTorch, run when these were chosen (the parameters and the outputs of
        every linear, layernorm and embedding, the logits, and the gradients
        flowing into them rounded to bf16), puts the three shapes of
        run_gpt2_train_gpu_comparison.sh at 3e-3 to 1.5e-2,
        so 5e-2 leaves room for rounding that simulation does not see
        (attention's scores, the softmax, fused epilogues) and still fails a
        gradient off by a wrong term or scale;
      - the step-0 loss: absolute difference within 1e-2 (--loss0-tolerance;
        the simulation: 3e-3 to 6e-3 on losses of 11 to 23);
      - the loss before every step and after the last: absolute difference
        within 0.05 (--loss-tolerance), llm.c's bf16 loss_diff_threshold for
        its 10 steps (the simulation: at most 0.025). The trajectories differ
        by more than the step-0 loss, since AdamW normalises each update and
        so turns small gradient errors into whole-size steps;
      - every step's gradient norm: relative error within 3e-2
        (--norm-tolerance): a few percent; the norm sums the squares of every
        gradient value, so its error is smaller than the worst parameter's
        (the simulation: at most 3e-3).
    The torch32-vs-64 column stays fp32 against fp64 for scale.

usage: compare_gpt2_train.py DIR [--tolerance T] [--grad-tolerance T] [--loss0-tolerance T]
                             [--loss-tolerance T] [--norm-tolerance T]
  --tolerance sets the gradient's, the step-0 loss's and the steps' losses'
  tolerances at once (for f32, today's one tolerance); the others set one
  each and win over --tolerance. Losses are judged by relative error in f32,
  by absolute difference in bf16.
exit status: 0 when every error is within its tolerance, 1 when one is not,
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

# The default tolerances by config.json's "precision" (the docstring says why):
# the gradient's relative error per parameter, the step-0 loss's and the steps'
# losses' error (relative or absolute, as "losses" says), the gradient norms'
# relative error.
TOLERANCES = {
    "f32": {"gradient": 1e-5, "loss0": 1e-5, "losses": 1e-5, "norms": 1e-5, "loss_error": "relative"},
    "bf16": {"gradient": 5e-2, "loss0": 1e-2, "losses": 5e-2, "norms": 3e-2, "loss_error": "absolute"},
}


def default_tolerances(precision):
    """The tolerances for a precision config.json names."""
    if precision not in TOLERANCES:
        raise UnusableInput(f"config.json: precision '{precision}' is none of {', '.join(TOLERANCES)}")
    return dict(TOLERANCES[precision])


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


def compare(directory, overrides):
    """Prints the tables; returns (passed, the one-line summary). overrides:
    tolerances by TOLERANCES's keys, given on the command line."""
    config = json.loads((directory / "config.json").read_text())
    llmc_device, precision = config.get("device", "cpu"), config.get("precision", "f32")
    tolerances = default_tolerances(precision)
    tolerances.update({key: value for key, value in overrides.items() if value is not None})
    tolerance, norm_tolerance = tolerances["gradient"], tolerances["norms"]
    absolute = tolerances["loss_error"] == "absolute"
    loss_kind = "absolute difference" if absolute else "relative error"

    def loss_error(a, b):
        return abs(a - b) if absolute else error(a, b)

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
    print(f"llmc on {llmc_device}" + (f" ({config['gpu']})" if "gpu" in config else "") +
          f" in {precision}, against torch fp32 on {device}")
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

    loss0_error = loss_error(llmc_loss0, loss32)
    if not loss0_error <= tolerances["loss0"]:
        failures.append("step-0 loss")
    # The trainer's first loss comes from the same graph as loss0.txt.
    if llmc_losses[0] != llmc_loss0:
        failures.append("loss0.txt against losses.txt")
    print(f"step-0 loss: llmc {llmc_loss0:.9g}, torch fp32 {loss32:.9g}, torch fp64 {loss64:.9g}: "
          f"{loss_kind} {loss0_error:.2e} (tolerance {tolerances['loss0']:.0e})"
          f"{'' if loss0_error <= tolerances['loss0'] else '  FAIL'}")

    losses32, norms32 = side(torch.float32).train(steps, config)
    losses64, norms64 = side(torch.float64).train(steps, config)
    print(f"{steps} AdamW steps on the batch (lr {config['lr']:g}, betas ({config['beta1']:g}, {config['beta2']:g}), "
          f"eps {config['eps']:g}, weight decay {config['weight_decay']:g}, clip {config['grad_clip']:g}):")
    print(f"  losses judged by {loss_kind} (tolerance {tolerances['losses']:.0e}), gradient norms by relative "
          f"error (tolerance {norm_tolerance:.0e})")
    print(f"  {'step':>5} {'llmc loss':>12} {'torch loss':>12} {'abs diff' if absolute else 'rel err':>9} "
          f"{'torch32-64':>10}   "
          f"{'llmc norm':>10} {'torch norm':>10} {'rel err':>9} {'torch32-64':>10}")
    loss_errors, norm_errors = [], []
    for step in range(steps + 1):
        e = loss_error(llmc_losses[step], losses32[step])
        loss_errors.append(e)
        if not e <= tolerances["losses"]:
            failures.append(f"loss before step {step}" if step < steps else "final loss")
        line = (f"  {step if step < steps else 'final':>5} {llmc_losses[step]:12.7f} {losses32[step]:12.7f} {e:9.2e} "
                f"{loss_error(losses32[step], losses64[step]):10.2e}")
        if step < steps:
            n = error(llmc_norms[step], norms32[step])
            norm_errors.append(n)
            if not n <= norm_tolerance:
                failures.append(f"gradient norm at step {step}")
            clipped = "c" if norms32[step] + 1e-6 > config["grad_clip"] else " "
            line += (f"   {llmc_norms[step]:10.5f} {norms32[step]:10.5f}{clipped}{n:9.2e} "
                     f"{error(norms32[step], norms64[step]):10.2e}")
        print(line + ("" if e <= tolerances["losses"] and (step == steps or n <= norm_tolerance) else "  FAIL"))
    clips = sum(n + 1e-6 > config["grad_clip"] for n in norms32)
    print(f"  (c: the step clipped the gradient; {clips} of {steps} did; gradient norms judged to "
          f"{norm_tolerance:.0e}; llmc's step-0 norm from "
          f"grads.bin in float64 is {np.linalg.norm(all_llmc.astype(np.float64)):.7f}, torch's {norms32[0]:.7f})")

    passed = not failures
    worst = max(grad_errors, key=grad_errors.get)
    if absolute or set(tolerances[k] for k in ("gradient", "loss0", "losses")) != {tolerance}:
        judged = (f"tolerances: gradient {tolerance:.0e}, step-0 loss {tolerances['loss0']:.0e}, losses "
                  f"{tolerances['losses']:.0e} ({'absolute' if absolute else 'relative'}), norms {norm_tolerance:.0e}")
    else:
        judged = f"tolerance {tolerance:.0e} (norms {norm_tolerance:.0e})"
    name = "pytorch_gpt2_train" + ("" if (llmc_device, precision) == ("cpu", "f32") else
                                   f" (llmc on {llmc_device}, {precision})")
    summary = (f"{name}: {'PASS' if passed else 'FAIL'}: gradient max relative error "
               f"{grad_errors[worst]:.2e} ({worst}), step-0 loss {loss0_error:.2e}, "
               f"{steps}-step losses max {max(loss_errors):.2e} ({llmc_losses[0]:.4f} -> {llmc_losses[-1]:.4f}), "
               f"grad norms max {max(norm_errors, default=0):.2e} ({clips} clipped); {judged}; "
               f"B={B} T={T} maxT={sizes['maxT']} L={sizes['L']} C={sizes['C']} H={sizes['H']} V={config['V']} "
               f"Vp={config['Vp']}; torch {torch.__version__} on {device}"
               + ("" if passed else f"; failed: {', '.join(failures)}"))
    return passed, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where gpt2-train-dump wrote its files")
    parser.add_argument("--tolerance", type=float,
                        help="the gradient's, the step-0 loss's and the steps' losses' tolerance at once "
                             "(default: by config.json's precision: f32 1e-5; bf16 as the next ones)")
    parser.add_argument("--grad-tolerance", type=float,
                        help="largest relative error of a parameter's gradient that passes (bf16: 5e-2)")
    parser.add_argument("--loss0-tolerance", type=float,
                        help="largest error of the step-0 loss that passes (bf16: 1e-2, absolute)")
    parser.add_argument("--loss-tolerance", type=float,
                        help="largest error of a step's loss that passes (bf16: 0.05, absolute)")
    parser.add_argument("--norm-tolerance", type=float,
                        help="largest relative error of a gradient norm that passes (f32 1e-5, bf16 3e-2)")
    args = parser.parse_args()
    overrides = {key: args.tolerance for key in ("gradient", "loss0", "losses")}
    overrides.update({key: value for key, value in (("gradient", args.grad_tolerance), ("loss0", args.loss0_tolerance),
                                                   ("losses", args.loss_tolerance), ("norms", args.norm_tolerance))
                      if value is not None})
    try:
        passed, summary = compare(args.directory, overrides)
    except (UnusableInput, OSError, KeyError, ValueError) as error_:
        print(f"compare_gpt2_train.py: {args.directory}: {error_}", file=sys.stderr)
        return 2
    print(summary)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
