#!/usr/bin/env python3
"""Checks llmc's GPT-2 forward pass against GPT-2 written here in plain PyTorch.

Reads what gpt2-forward-dump wrote to DIR (an llm.c fp32 checkpoint, tokens,
targets, and llmc's fp32 logits and loss), runs the same tokens through the
PyTorch model below in fp32 (on CUDA when there is a GPU), and prints the
relative errors ||llmc - torch|| / ||torch|| of the logits over the real
vocabulary (the first V columns) and of the loss.

usage: compare_gpt2_forward.py DIR [--tolerance 1e-5]
exit status: 0 when both errors are within the tolerance, 1 when one is not,
2 when the files in DIR are unusable.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

CHECKPOINT_MAGIC = 20240326
CHECKPOINT_VERSION_FP32 = 3
CHECKPOINT_HEADER_WORDS = 256


def parameter_shapes(maxT, L, C, Vp):
    """llm.c's parameters, in checkpoint order, with their shapes."""
    return [
        ("wte", (Vp, C)), ("wpe", (maxT, C)),
        ("ln1w", (L, C)), ("ln1b", (L, C)),
        ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
        ("attprojw", (L, C, C)), ("attprojb", (L, C)),
        ("ln2w", (L, C)), ("ln2b", (L, C)),
        ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
        ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
        ("lnfw", (C,)), ("lnfb", (C,)),
    ]


class UnusableInput(Exception):
    """The files gpt2-forward-dump wrote are missing or inconsistent."""


def read_checkpoint(path):
    """An llm.c fp32 checkpoint: its sizes (a dict) and its parameters (numpy arrays by name)."""
    header = np.fromfile(path, dtype="<i4", count=CHECKPOINT_HEADER_WORDS)
    if header.size != CHECKPOINT_HEADER_WORDS:
        raise UnusableInput(f"{path}: truncated header")
    if header[0] != CHECKPOINT_MAGIC:
        raise UnusableInput(f"{path}: bad magic {header[0]} in header[0] (expected {CHECKPOINT_MAGIC})")
    if header[1] != CHECKPOINT_VERSION_FP32:
        raise UnusableInput(f"{path}: version {header[1]} in header[1] (expected {CHECKPOINT_VERSION_FP32} = fp32)")
    sizes = dict(zip(["maxT", "V", "L", "H", "C", "Vp"], (int(v) for v in header[2:8])))
    values = np.fromfile(path, dtype="<f4", offset=4 * CHECKPOINT_HEADER_WORDS)
    params, offset = {}, 0
    for name, shape in parameter_shapes(sizes["maxT"], sizes["L"], sizes["C"], sizes["Vp"]):
        count = math.prod(shape)
        params[name] = values[offset:offset + count].reshape(shape)
        offset += count
    if offset != values.size:
        raise UnusableInput(f"{path}: {values.size} parameter values, the header implies {offset}")
    return sizes, params


class CausalSelfAttention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        # The 3C outputs are q, k, v one after the other, each H heads of C/H.
        q, k, v = (part.view(B, T, self.H, C // self.H).transpose(1, 2)
                   for part in self.qkv(x).split(C, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.H)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        heads = scores.softmax(dim=-1) @ v
        return self.proj(heads.transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.attention = CausalSelfAttention(C, H)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = Mlp(C)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt2(nn.Module):
    def __init__(self, maxT, L, H, C, Vp):
        super().__init__()
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.lnf(x) @ self.wte.weight.T  # the classifier shares wte: logits [B, T, Vp]

    @torch.no_grad()
    def load_llmc(self, params):
        """Copies llm.c's parameters in; its weights are [out, in], as nn.Linear's."""
        def put(target, value):
            target.copy_(torch.from_numpy(np.ascontiguousarray(value)))

        put(self.wte.weight, params["wte"])
        put(self.wpe.weight, params["wpe"])
        for l, block in enumerate(self.blocks):
            put(block.ln1.weight, params["ln1w"][l])
            put(block.ln1.bias, params["ln1b"][l])
            put(block.attention.qkv.weight, params["qkvw"][l])
            put(block.attention.qkv.bias, params["qkvb"][l])
            put(block.attention.proj.weight, params["attprojw"][l])
            put(block.attention.proj.bias, params["attprojb"][l])
            put(block.ln2.weight, params["ln2w"][l])
            put(block.ln2.bias, params["ln2b"][l])
            put(block.mlp.fc.weight, params["fcw"][l])
            put(block.mlp.fc.bias, params["fcb"][l])
            put(block.mlp.proj.weight, params["fcprojw"][l])
            put(block.mlp.proj.bias, params["fcprojb"][l])
        put(self.lnf.weight, params["lnfw"])
        put(self.lnf.bias, params["lnfb"])


def relative_error(a, b):
    """||a - b|| / ||b||, in float64."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def read_int32(path, shape):
    values = np.fromfile(path, dtype="<i4")
    if values.size != math.prod(shape):
        raise UnusableInput(f"{path}: {values.size} int32 values, expected {shape}")
    return values.reshape(shape).astype(np.int64)


def compare(directory, tolerance):
    """Returns (passed, the one-line summary)."""
    config = json.loads((directory / "config.json").read_text())
    sizes, params = read_checkpoint(directory / "model.bin")
    for name, value in sizes.items():
        if config[name] != value:
            raise UnusableInput(f"config.json has {name} = {config[name]}, model.bin {value}")
    B, T, V, Vp = config["B"], config["T"], config["V"], config["Vp"]
    tokens = read_int32(directory / "tokens.bin", (B, T))
    targets = read_int32(directory / "targets.bin", (B, T))
    llmc_logits = np.fromfile(directory / "logits.bin", dtype="<f4")
    if llmc_logits.size != B * T * Vp:
        raise UnusableInput(f"logits.bin: {llmc_logits.size} floats, expected [B, T, Vp] = [{B}, {T}, {Vp}]")
    llmc_logits = llmc_logits.reshape(B, T, Vp)
    llmc_loss = float((directory / "loss.txt").read_text())

    # Full fp32: no TF32 in matrix products.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Gpt2(sizes["maxT"], sizes["L"], sizes["H"], sizes["C"], Vp)
    model.load_llmc(params)
    model.to(device)
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens).to(device))
        loss = F.cross_entropy(logits[..., :V].reshape(-1, V), torch.from_numpy(targets).to(device).reshape(-1))
    torch_logits = logits.cpu().numpy()

    logits_error = relative_error(llmc_logits[..., :V], torch_logits[..., :V])
    padded_error = relative_error(llmc_logits[..., V:], torch_logits[..., V:]) if Vp > V else 0.0
    loss_error = abs(llmc_loss - loss.item()) / abs(loss.item())
    passed = logits_error <= tolerance and loss_error <= tolerance
    summary = (f"pytorch_gpt2_forward: {'PASS' if passed else 'FAIL'}: relative error logits {logits_error:.2e} "
               f"(padded columns {padded_error:.2e}, not judged), loss {loss_error:.2e} "
               f"(llmc {llmc_loss:.7f}, torch {loss.item():.7f}); tolerance {tolerance:.0e}; "
               f"B={B} T={T} maxT={sizes['maxT']} L={sizes['L']} C={sizes['C']} H={sizes['H']} V={V} Vp={Vp}; "
               f"torch {torch.__version__} on {device}")
    return passed, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="where gpt2-forward-dump wrote its files")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="largest relative error that passes")
    args = parser.parse_args()
    try:
        passed, summary = compare(args.directory, args.tolerance)
    except (UnusableInput, OSError, KeyError, ValueError) as error:
        print(f"compare_gpt2_forward.py: {args.directory}: {error}", file=sys.stderr)
        return 2
    print(summary)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
