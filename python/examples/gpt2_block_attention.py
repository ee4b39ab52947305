"""A small GPT-2 trained a few steps twice from the same start on the same batches: once in pure
PyTorch, once with every block's attention replaced by the diagram's (diagrams/gpt2/attention.dg,
entry self_attention: the qkv projection, causal attention over H heads, the output projection),
compiled by llmc with its derived backward. Prints both losses step by step.

    PYTHONPATH=build/python python3 python/examples/gpt2_block_attention.py [--steps 20] [--storage f32|bf16]

It needs a CUDA GPU and torch >= 2.4. Without them it prints why to stderr and exits with status
77 ("skipped", as the repository's GPU tests do): it has not shown anything, so it does not exit 0.
Exit status 1 when the two runs' losses differ by more than the tolerance (relative: 1e-3 with
f32 storage, 3e-2 with bf16).
"""

import argparse
import math
import sys
from pathlib import Path

SKIP = 77
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("skipped: this example needs PyTorch", file=sys.stderr)
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print("skipped: this example needs a CUDA GPU (llmc's kernels run on one)", file=sys.stderr)
    sys.exit(SKIP)
if not hasattr(torch.library, "custom_op"):
    print("skipped: this example needs torch >= 2.4 (torch.library.custom_op)", file=sys.stderr)
    sys.exit(SKIP)

import llmc  # noqa: E402

ATTENTION_DG = Path(__file__).resolve().parents[2] / "diagrams/gpt2/attention.dg"


class CausalSelfAttention(nn.Module):
    """GPT-2's attention in PyTorch: c_attn (C -> 3C), heads, causal softmax, c_proj."""

    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class DiagramAttention(nn.Module):
    """The same parameters through the diagram's self_attention: wqkv is c_attn's weight [e c] with
    e = 3C split as [3, H, C/H] (PyTorch's q, k, v order and heads), wproj c_proj's weight [o c]."""

    def __init__(self, torch_attention, storage):
        super().__init__()
        self.inner = torch_attention
        self.dtype = torch.bfloat16 if storage == "bf16" else torch.float32
        # x: f32[.. t c] takes [B, T, C]; H is the one size the tensors do not give.
        self.op = llmc.compile(ATTENTION_DG, entry="self_attention", sizes={"H": torch_attention.H}, grad=True,
                               storage=storage)

    def forward(self, x):
        a = self.inner
        args = [t.to(self.dtype) for t in (x, a.c_attn.weight, a.c_attn.bias, a.c_proj.weight, a.c_proj.bias)]
        return self.op(*args).to(x.dtype)


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, H)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(approximate="tanh"), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, V, T, L, C, H):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def train(model, batches, steps, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for step in range(steps):
        idx, targets = batches[step % len(batches)]
        loss = model(idx, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--storage", choices=("f32", "bf16"), default="f32")
    parser.add_argument("-B", type=int, default=4)
    parser.add_argument("-T", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1024)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch in full f32, the reference
    torch.manual_seed(0)
    device = "cuda"
    # Batches with something to learn: each sequence counts up from a random start.
    batches = []
    for _ in range(4):
        start = torch.randint(0, args.vocab, (args.B, 1), device=device)
        seq = (start + torch.arange(args.T + 1, device=device)) % args.vocab
        batches.append((seq[:, :-1].contiguous(), seq[:, 1:].contiguous()))

    reference = GPT(args.vocab, args.T, args.layers, args.channels, args.heads).to(device)
    diagram = GPT(args.vocab, args.T, args.layers, args.channels, args.heads).to(device)
    diagram.load_state_dict(reference.state_dict())
    for block in diagram.blocks:
        block.attn = DiagramAttention(block.attn, args.storage)
    # The two models must hold the same parameters under the same names (the swap keeps them).
    assert [n for n, _ in diagram.named_parameters()] == [n.replace(".attn.", ".attn.inner.") for n, _ in
                                                          reference.named_parameters()]

    torch_losses = train(reference, batches, args.steps, 1e-3)
    llmc_losses = train(diagram, batches, args.steps, 1e-3)
    tolerance = 1e-3 if args.storage == "f32" else 3e-2
    arch = next(iter(diagram.blocks[0].attn.op._modules.values())).arch
    print("{} ({}), torch {}; GPT-2 L={} C={} H={} T={} B={} V={}, storage {}".format(
        torch.cuda.get_device_name(), arch, torch.__version__, args.layers, args.channels, args.heads, args.T,
        args.B, args.vocab, args.storage))
    print("{:>5} {:>12} {:>12} {:>10}".format("step", "pytorch", "llmc attn", "rel diff"))
    worst = 0.0
    for step, (a, b) in enumerate(zip(torch_losses, llmc_losses)):
        diff = abs(a - b) / max(abs(a), 1e-12)
        worst = max(worst, diff if math.isfinite(b) else math.inf)
        print("{:>5} {:>12.6f} {:>12.6f} {:>10.2e}".format(step, a, b, diff))
    ok = worst <= tolerance
    print("largest relative difference {:.2e}, tolerance {:.0e}: {}".format(worst, tolerance,
                                                                             "match" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
