#!/usr/bin/env python3
"""Diagrams GPT-2 does not use, timed on the GPU: llmc beside PyTorch eager and
torch.compile on the same computation, in the same run.

For each case (a diagram of this folder, an entry, sizes; forward, or with
--grad the loss and every gradient), llmc's side is step_kernels_bench: the
module planned and emitted for the GPU's arch, replayed as one CUDA graph (as
llmc-train runs it), every launch timed beside the cost model's prediction.
PyTorch's side is the same computation written with torch ops, bf16 inputs,
timed as the median of CUDA-event intervals: eager, and torch.compile in the
mode a user would pick for small launches (mode="reduce-overhead": CUDA graphs,
the counterpart of llmc's graph replay; "default" where that fails); each
timing the median over repetitions of 10 calls issued back to back.

PyTorch's work is also captured whole in one CUDA graph and replayed (eager's
kernels, and torch.compile's in its default mode): the GPU's time alone, as
llmc's is measured.

Prints one row per case: llmc's graph time, the sum of its predictions, how
many of its kernels lie within 2x of their prediction, PyTorch's four times,
and the ratio of the best of them to llmc's (> 1: llmc faster). With
--out FILE the same table and every launch go to FILE.

usage: run_diagram_benchmark.py [--bench build/bin/step_kernels_bench] [--only NAME]... [--out FILE] [--reps N]
                                [--compile-limit SECONDS]
"""
import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # said in main(), after the arguments are checked
    torch = F = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results_file  # noqa: E402  benchmarks/results_file.py


def silu_gate(a, b):
    return a / (1 + torch.exp(-a)) * b


def gated_mlp(x, w1, w3, w2):
    return silu_gate(x @ w1, x @ w3) @ w2


def mqa(q, k, v):  # q [h t d], k [x d], v [x d]
    s = torch.einsum("htd,xd->htx", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("htx,xd->htd", torch.softmax(s.float(), -1).to(q.dtype), v)


def value_axis_attention(q, k, v):  # q [b h t d], k [b h x d], v [b h x e], causal
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sliding_window(q, k, v, window):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[None, :] + window > i[:, None])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def gqa(q, k, v):  # q [b h t d], k, v [b g x d]
    groups = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1))


def rmsnorm_matmul(x, g, w):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * g.float()).to(x.dtype) @ w


def layernorm_matmul_gelu(x, g, b, w):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), g, b, 1e-5) @ w, approximate="tanh")


def chain(a, b, c, d, e):
    return (((a @ b) @ c) @ d) @ e


def classifier(h, w, target):
    return F.cross_entropy((h @ w.t()).float(), target)



def same_convolution(x, w):  # x [b t c], w [k c o]: a cross-correlation over t, one zero each side
    return F.conv1d(x.transpose(1, 2), w.permute(2, 1, 0), padding=1).transpose(1, 2)


def rotary_attention(q, k, v, cs, sn):  # q, k, v [b h t d]; cs, sn [t d] of which the first d/2 columns
    half = q.shape[-1] // 2
    cs, sn = cs[:, :half], sn[:, :half]

    def rotate(x):  # the pairs (2i, 2i + 1) turned by their position's angle, as merge(stack(..., r), i r -> d)
        pairs = x.unflatten(-1, (half, 2))
        a, c = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * cs - c * sn, a * sn + c * cs), -1).flatten(-2)

    return F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True)


def llama_block(x, n1, wq, wk, wv, wo, n2, wg, wu, wd, cs, sn):  # x [b t c]; wq [h d c], wk, wv [g d c]; cs [t d/2]
    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)

    def rope(x):  # the pairs (2i, 2i + 1) turned by their position's angle
        pairs = x.unflatten(-1, (x.shape[-1] // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * cs - b * sn, a * sn + b * cs), -1).flatten(-2)

    h = rms(x, n1)
    q = rope(torch.einsum("btc,hdc->bhtd", h, wq))
    k = rope(torch.einsum("btc,gdc->bgtd", h, wk))
    v = torch.einsum("btc,gdc->bgtd", h, wv)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    x1 = x + torch.einsum("bhtd,ohd->bto", a, wo)
    h2 = rms(x1, n2)
    return x1 + (F.silu(h2 @ wg.t()) * (h2 @ wu.t())) @ wd.t()


def topk_routing(routes):
    def route(x, wg, experts):  # x [n c], wg [e c], experts [e c o]: each token's `routes` best experts
        scores = x @ wg.t()
        top = scores.topk(routes, -1).indices
        gate = scores.gather(-1, top)
        return (torch.einsum("nc,nkco->nko", x, experts[top]) * gate[..., None]).sum(1)
    return route


def linear_attention(q, k, v):  # q, k [b h t d], v [b h t e]: causal, elu + 1 features, running sums by cumsum
    fq, fk = F.elu(q.float()) + 1, F.elu(k.float()) + 1
    state = torch.cumsum(fk[..., :, None] * v.float()[..., None, :], 2)  # [b h t d e]
    norm = torch.cumsum(fk, 2)
    o = torch.einsum("bhtd,bhtde->bhte", fq, state) / torch.einsum("bhtd,bhtd->bht", fq, norm)[..., None]
    return o.to(q.dtype)


def running_sum(x):  # x [b t c]: the running sum along t
    return torch.cumsum(x, 1)


def running_product(x):  # x [b t c]: the running product along t
    return torch.cumprod(x, 1)


def running_max(x):  # x [b t c]: the running maximum along t
    return torch.cummax(x, 1).values


def running_logsumexp(x):  # x [b t c]: log of the running sum of exp along t
    return torch.logcumsumexp(x, 1)


def gated_recurrence(x, g):  # h = sigmoid(g) * h + x along t, by torch's associative scan
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine(earlier, later):  # the affine maps h -> a*h + b, composed
        (a1, b1), (a2, b2) = earlier, later
        return a2 * a1, a2 * b1 + b2
    # "pointwise" lowers to one Triton scan under torch.compile; eager runs the generic form.
    mode = "pointwise" if torch.compiler.is_compiling() else "generic"
    return associative_scan(combine, (torch.sigmoid(g.float()), x.float()), dim=1, combine_mode=mode)[1]


def batch_norm_linear(x, g, bias, w):  # x [n c]: training-mode statistics over the rows (cuDNN's kernels)
    return F.batch_norm(x, None, None, g, bias, training=True, eps=1e-5) @ w


def batch_norm_2d(x, g, bias):  # x [b c h w]: training-mode statistics over b, h and w (cuDNN's kernels)
    return F.batch_norm(x, None, None, g, bias, training=True, eps=1e-5)


def channel_rms_scale(x, g):  # x [b c h w]: each channel's root mean square over b, h and w, times its gain
    return g * torch.rsqrt((x.float() * x.float()).mean(dim=(0, 2, 3)) + 1e-5).to(g.dtype)


def group_norm_silu(x, w, bias):  # x [b g e s]: each group's statistics over its channels e and positions s
    b, g, e, n = x.shape
    return F.silu(F.group_norm(x.reshape(b, g * e, n), g, w.reshape(-1), bias.reshape(-1), eps=1e-5))


def contrastive(q, k, t):  # q [b d], k [n d], t [b n] soft targets (no gradient): cosine similarities x 10
    def unit(x):
        return x * torch.rsqrt((x.float() * x.float()).sum(1, keepdim=True) + 1e-6).to(x.dtype)
    s = unit(q) @ unit(k).t() * 10.0
    return torch.logsumexp(s.float(), dim=1).sum() - (s.float() * t.float()).sum()


def cross_attention(q, k, v):  # q [b h tq d], k, v [b h tk d]: no mask, the backend PyTorch selects
    return F.scaled_dot_product_attention(q, k, v)


# name, diagram, entry, sizes, grad, torch function, input shapes (by size names), integer inputs
# TinyLLaMA's block (32 query heads over 4 key/value heads of 64 channels), 1000 positions.
LLAMA_SIZES = dict(B=2, T=1000, C=2048, H=32, G=4, D=64, F=5632)
LLAMA_SHAPES = ["B T C", "C", "H D C", "G D C", "G D C", "C H D", "C", "F C", "F C", "C F"] + \
    [f"const T {LLAMA_SIZES['D'] // 2}"] * 2  # the rotations' cosines and sines

CASES = [
    ("gated MLP, odd", "gated_mlp.dg", "gated_mlp", dict(N=1000, C=771, F=2051), False, gated_mlp,
     ["N C", "C F", "C F", "F C"]),
    ("gated MLP, aligned", "gated_mlp.dg", "gated_mlp", dict(N=1000, C=776, F=2056), False, gated_mlp,
     ["N C", "C F", "C F", "F C"]),
    ("gated MLP backward, odd", "gated_mlp.dg", "gated_mlp_loss", dict(N=1000, C=771, F=2051), True, gated_mlp,
     ["N C", "C F", "C F", "F C"]),
    ("gated MLP backward, small", "gated_mlp.dg", "gated_mlp_loss", dict(N=100, C=77, F=205), True, gated_mlp,
     ["N C", "C F", "C F", "F C"]),
    ("multi-query cross-attention", "multi_query_attention.dg", "multi_query_attention",
     dict(H=8, Tq=300, Tk=1000, D=96), False, mqa, ["H Tq D", "Tk D", "Tk D"]),
    ("multi-query cross-attention backward", "multi_query_attention.dg", "multi_query_attention_loss",
     dict(H=8, Tq=300, Tk=1000, D=96), True, mqa, ["H Tq D", "Tk D", "Tk D"]),
    ("attention, values over e", "value_axis_attention.dg", "value_axis_attention",
     dict(B=4, H=8, T=1000, D=64, E=64), False, value_axis_attention, ["B H T D", "B H T D", "B H T E"]),
    ("attention, values over e, backward", "value_axis_attention.dg", "value_axis_attention_loss",
     dict(B=4, H=8, T=1000, D=64, E=64), True, value_axis_attention, ["B H T D", "B H T D", "B H T E"]),
    ("grouped-query attention", "grouped_query_attention.dg", "grouped_query_attention",
     dict(B=2, H=8, G=2, T=1000, X=1000, D=64), False, gqa, ["B H T D", "B G X D", "B G X D"]),
    ("sliding-window attention", "sliding_window_attention.dg", "sliding_window_attention",
     dict(B=2, H=8, T=1000, D=64, W=256), False, None, ["B H T D", "B H T D", "B H T D"]),
    ("RMSNorm, matmul", "rmsnorm_matmul.dg", "rmsnorm_matmul", dict(N=1000, C=771, F=3083), False, rmsnorm_matmul,
     ["N C", "C", "C F"]),
    ("RMSNorm, matmul backward", "rmsnorm_matmul.dg", "rmsnorm_matmul_loss", dict(N=1000, C=771, F=3083), True,
     rmsnorm_matmul, ["N C", "C", "C F"]),
    ("layernorm, matmul, GELU", "layernorm_matmul_gelu.dg", "layernorm_matmul_gelu", dict(N=333, C=771, F=3083),
     False, layernorm_matmul_gelu, ["N C", "C", "C", "C F"]),
    ("layernorm, matmul, GELU backward", "layernorm_matmul_gelu.dg", "layernorm_matmul_gelu_loss",
     dict(N=333, C=771, F=3083), True, layernorm_matmul_gelu, ["N C", "C", "C", "C F"]),
    ("four chained contractions", "contraction_chain.dg", "contraction_chain",
     dict(I=1000, J=96, K=1000, L=40, M=771, P=333), False, chain, ["I J", "J K", "K L", "L M", "M P"]),
    ("four chained contractions backward", "contraction_chain.dg", "contraction_chain_loss",
     dict(I=1000, J=96, K=1000, L=40, M=771, P=333), True, chain, ["I J", "J K", "K L", "L M", "M P"]),
    ("classifier + cross-entropy, with gradients", "classifier.dg", "classifier", dict(N=777, V=50257, C=771), True,
     classifier, ["N C", "V C"]),
    ("window attention with and", "window_attention.dg", "window_attention", dict(B=2, H=8, T=1000, D=64, W=256),
     False, None, ["B H T D", "B H T D", "B H T D"]),
    ("window attention with and, backward", "window_attention.dg", "window_attention_loss",
     dict(B=2, H=8, T=1000, D=64, W=256), True, None, ["B H T D", "B H T D", "B H T D"]),
    ("same convolution", "same_convolution.dg", "same_convolution", dict(B=8, T=1000, C=256, O=256), False,
     same_convolution, ["B T C", "3 C O"]),
    ("same convolution, backward", "same_convolution.dg", "same_convolution_loss", dict(B=8, T=1000, C=256, O=256),
     True, same_convolution, ["B T C", "3 C O"]),
    ("rotary attention", "rotary_attention.dg", "rotary_attention", dict(B=2, H=8, T=1000, D=64), False,
     rotary_attention, ["B H T D", "B H T D", "B H T D", "T D", "T D"]),
    ("rotary attention, backward", "rotary_attention.dg", "rotary_attention_loss", dict(B=2, H=8, T=1000, D=64),
     True, rotary_attention, ["B H T D", "B H T D", "B H T D", "T D", "T D"]),
    ("causal linear attention by scan", "linear_attention.dg", "linear_attention", dict(B=2, H=4, T=256, D=32, E=32),
     False, linear_attention, ["B H T D", "B H T D", "B H T E"]),
    ("causal linear attention by scan, backward", "linear_attention.dg", "linear_attention_loss",
     dict(B=2, H=4, T=256, D=32, E=32), True, linear_attention, ["B H T D", "B H T D", "B H T E"]),
    ("causal linear attention, long (blocked scan)", "linear_attention.dg", "linear_attention",
     dict(B=2, H=4, T=4096, D=32, E=32), False, linear_attention, ["B H T D", "B H T D", "B H T E"]),
    ("causal linear attention, long, backward", "linear_attention.dg", "linear_attention_loss",
     dict(B=2, H=4, T=4096, D=32, E=32), True, linear_attention, ["B H T D", "B H T D", "B H T E"]),
    ("running sum, long axis", "running_sum.dg", "running_sum", dict(B=8, T=4096, C=1024), False, running_sum,
     ["B T C"]),
    ("running sum, long axis, backward", "running_sum.dg", "running_sum_loss", dict(B=8, T=4096, C=1024), True,
     running_sum, ["B T C"]),
    ("running product, long axis", "recurrences.dg", "running_product", dict(B=8, T=4096, C=1024), False,
     running_product, ["B T C"]),
    ("running product, long axis, backward", "recurrences.dg", "running_product_loss", dict(B=8, T=4096, C=1024),
     True, running_product, ["B T C"]),
    ("running maximum, long axis", "recurrences.dg", "running_max", dict(B=8, T=4096, C=1024), False,
     running_max, ["B T C"]),
    ("running maximum, long axis, backward", "recurrences.dg", "running_max_loss", dict(B=8, T=4096, C=1024),
     True, running_max, ["B T C"]),
    ("gated linear recurrence", "recurrences.dg", "gated_recurrence", dict(B=8, T=4096, C=1024), False,
     gated_recurrence, ["B T C", "B T C"]),
    ("gated linear recurrence, backward", "recurrences.dg", "gated_recurrence_loss", dict(B=8, T=4096, C=1024),
     True, gated_recurrence, ["B T C", "B T C"]),
    ("running logsumexp, user operator", "recurrences.dg", "running_logsumexp", dict(B=8, T=4096, C=1024), False,
     running_logsumexp, ["B T C"]),
    ("running logsumexp, user operator, backward", "recurrences.dg", "running_logsumexp_loss",
     dict(B=8, T=4096, C=1024), True, running_logsumexp, ["B T C"]),
    ("batch normalisation, linear", "batch_norm.dg", "batch_norm_linear", dict(N=100000, C=64, O=64), False,
     batch_norm_linear, ["N C", "C", "C", "C O"]),
    ("batch normalisation, linear, backward", "batch_norm.dg", "batch_norm_loss", dict(N=100000, C=64, O=64), True,
     batch_norm_linear, ["N C", "C", "C", "C O"]),
    ("batch normalisation, wide, backward", "batch_norm.dg", "batch_norm_loss", dict(N=16384, C=512, O=512), True,
     batch_norm_linear, ["N C", "C", "C", "C O"]),
    ("batch normalisation over images", "batch_norm.dg", "batch_norm_2d", dict(B=32, C=64, H=56, W=56), False,
     batch_norm_2d, ["B C H W", "C", "C"]),
    ("batch normalisation over images, backward", "batch_norm.dg", "batch_norm_2d_loss",
     dict(B=32, C=64, H=56, W=56), True, batch_norm_2d, ["B C H W", "C", "C"]),
    ("channel RMS scale over images", "batch_norm.dg", "channel_rms_scale", dict(B=32, C=64, H=56, W=56), False,
     channel_rms_scale, ["B C H W", "C"]),
    ("channel RMS scale over images, backward", "batch_norm.dg", "channel_rms_scale_loss",
     dict(B=32, C=64, H=56, W=56), True, channel_rms_scale, ["B C H W", "C"]),
    ("cross-attention, d=128, long keys", "cross_attention.dg", "cross_attention",
     dict(B=4, H=8, Tq=64, Tk=8192, D=128), False, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    ("cross-attention, d=128, long keys, backward", "cross_attention.dg", "cross_attention_loss",
     dict(B=4, H=8, Tq=64, Tk=8192, D=128), True, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    # A head dimension no 16-byte row holds (tiles read from staged copies, tensor_core_stream.h).
    ("cross-attention, d=100", "cross_attention.dg", "cross_attention",
     dict(B=4, H=12, Tq=1000, Tk=1000, D=100), False, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    ("cross-attention, d=100, backward", "cross_attention.dg", "cross_attention_loss",
     dict(B=4, H=12, Tq=1000, Tk=1000, D=100), True, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    # More channels than mma.sync's streams hold (the warpgroup's hold 256).
    ("cross-attention, d=256", "cross_attention.dg", "cross_attention",
     dict(B=4, H=8, Tq=1000, Tk=1000, D=256), False, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    ("cross-attention, d=256, backward", "cross_attention.dg", "cross_attention_loss",
     dict(B=4, H=8, Tq=1000, Tk=1000, D=256), True, cross_attention, ["B H Tq D", "B H Tk D", "B H Tk D"]),
    ("group normalisation, SiLU", "group_norm.dg", "group_norm_silu", dict(B=16, G=32, E=10, S=784), False,
     group_norm_silu, ["B G E S", "G E", "G E"]),
    ("group normalisation, SiLU, backward", "group_norm.dg", "group_norm_loss", dict(B=16, G=32, E=10, S=784), True,
     group_norm_silu, ["B G E S", "G E", "G E"]),
    ("contrastive loss over cosine similarities, backward", "contrastive.dg", "contrastive_loss",
     dict(B=1000, N=5003, D=128), True, contrastive, ["B D", "N D", "const B N"]),
    ("grouped-query attention, backward", "grouped_query_attention.dg", "grouped_query_attention_loss",
     dict(B=2, H=8, G=2, T=1000, X=1000, D=64), True, gqa, ["B H T D", "B G X D", "B G X D"]),
    ("LLaMA block", "llama_block.dg", "llama_block", LLAMA_SIZES, False, llama_block, LLAMA_SHAPES),
    ("LLaMA block, backward", "llama_block.dg", "llama_block_loss", LLAMA_SIZES, True, llama_block, LLAMA_SHAPES),
    ("top-k routing", "topk_routing.dg", "topk_routing", dict(N=2048, C=256, E=8, O=256, R=2), False,
     topk_routing(2), ["N C", "E C", "E C O"]),
    ("top-k routing, backward", "topk_routing.dg", "topk_routing_loss", dict(N=2048, C=256, E=8, O=256, R=2), True,
     topk_routing(2), ["N C", "E C", "E C O"]),
]


def time_cuda(fn, reps, batch=10):
    """Median over `reps` of the time of `batch` calls issued back to back, per
    call: the GPU's time where the host keeps ahead of it, the host's where it
    cannot (what a user of the computation gets either way)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / batch)
    return statistics.median(times)


COMPILE_SECONDS = 300  # a bound on one configuration's compile and first calls (--compile-limit)


class TooLong(Exception):
    pass


def bounded(seconds, f):
    """f() within `seconds` of wall time, or TooLong: torch.compile can spend
    many minutes on one graph (cumprod's backward at T=4096), and one case
    must not take the run's time from the others."""
    def expire(signum, frame):
        raise TooLong(f"gave up after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        return f()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def torch_case(name, sizes, grad, fn, shapes, reps):
    gen = torch.Generator(device="cuda").manual_seed(1)

    def dims(shape):  # size names, or numbers
        return [int(s) if s.isdigit() else sizes[s] for s in shape.split()]
    # "const SHAPE": an input the diagram takes no gradient of (not a param).
    inputs = [(torch.randn(dims(shape.removeprefix("const ")), device="cuda", generator=gen) * 0.3)
              .to(torch.bfloat16).requires_grad_(grad and not shape.startswith("const "))
              for shape in shapes]
    extra = []
    if fn is classifier:
        extra = [torch.randint(0, sizes["V"], (sizes["N"],), device="cuda", generator=gen)]
    if fn is None and "W" in sizes:
        window = sizes["W"]
        fn = lambda q, k, v: sliding_window(q, k, v, window)  # noqa: E731
    out_grad = None

    def make(f):
        if not grad:
            return lambda: f(*inputs, *extra)
        def step():
            nonlocal out_grad
            y = f(*inputs, *extra)
            if out_grad is None or out_grad.shape != y.shape:
                out_grad = torch.randn_like(y)
            torch.autograd.backward(y, out_grad)
        return step

    results = {}
    try:
        results["eager"] = time_cuda(make(fn), reps)
    except Exception as e:  # noqa: BLE001  (a torch op eager cannot run; compiled forms may)
        print(f"  eager failed for {name}: {e}", file=sys.stderr)
    for mode in ("reduce-overhead", "default"):
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fn, mode=mode)
            results["compile"] = bounded(COMPILE_SECONDS, lambda: time_cuda(make(compiled), reps))
            results["compile_mode"] = mode
            break
        except Exception as e:  # noqa: BLE001
            print(f"  torch.compile mode={mode} failed for {name}: {e}", file=sys.stderr)
    # The same work captured whole in one CUDA graph and replayed, as llmc's
    # module is: the GPU's time without the host's, eager's kernels and
    # torch.compile's (default mode, its own graphs off).
    for label, f in (("eager_graph", fn), ("compile_graph", None)):
        try:
            if f is None:
                torch._dynamo.reset()
                f = torch.compile(fn, mode="default")
            step = make(f)
            bounded(COMPILE_SECONDS, lambda: [step() for _ in range(3)])
            torch.cuda.synchronize()
            for x in inputs:
                x.grad = None
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            results[label] = time_cuda(graph.replay, reps)
        except Exception as e:  # noqa: BLE001
            print(f"  {label} failed for {name}: {e}", file=sys.stderr)
    return results


def llmc_case(bench, diagram, entry, sizes, grad, reps):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [bench, "--diagram", os.path.join(HERE, diagram), "--entry", entry, "--set",
           ",".join(f"{k}={v}" for k, v in sizes.items()), "--reps", str(reps), "--json", path, "--top", "100"]
    if not grad:
        cmd.append("--forward")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    total = re.search(r"as llmc-train replays it: ([0-9.]+) ms\), predicted ([0-9.]+) ms; (\d+) kernels within 2x of the "
                      r"prediction, (\d+) slower than 2x, (\d+) faster", out.stdout)
    launches = json.load(open(path))
    os.unlink(path)
    return {"graph_us": float(total.group(1)) * 1e3, "predicted_us": float(total.group(2)) * 1e3,
            "within": int(total.group(3)), "slower": int(total.group(4)), "faster": int(total.group(5)),
            "launches": launches, "text": out.stdout}


def launches_outside_2x(text):
    """The launches of step_kernels_bench's table measured outside 2x of their own prediction: (name, ratio)."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(tile|stage|copy|clear|scatter)\s+(?:yes\s+)?[0-9.]+r?\s+[0-9.]+\s+([0-9.]+)\s", line)
        if m and not 0.5 <= float(m.group(3)) <= 2:
            found.append((m.group(1), float(m.group(3))))
    return found


def selects(name, case_name):
    """--only NAME: the case of that exact name if there is one, else every case whose name contains it."""
    if any(name == c[0] for c in CASES):
        return name == case_name
    return name in case_name


def main():
    global COMPILE_SECONDS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", default="build/bin/step_kernels_bench")
    p.add_argument("--only", action="append", default=[],
                   help="run the cases whose name contains NAME, or only the case named exactly NAME "
                   "(repeatable: the union)")
    p.add_argument("--out", default=None, help="the results file (default results/MACHINE-diagrams.txt beside "
                   "this script, overwritten: earlier runs are in git's history; '-': none)")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--compile-limit", type=int, default=300,
                   help="seconds one PyTorch configuration may take to compile (default %(default)s)")
    a = p.parse_args()
    COMPILE_SECONDS = a.compile_limit
    cases = [c for c in CASES if not a.only or any(selects(name, c[0]) for name in a.only)]
    if not cases:
        sys.exit(f"run_diagram_benchmark.py: no case is named like {' or '.join(repr(n) for n in a.only)} "
                 f"(cases: {', '.join(c[0] for c in CASES)})")
    if not os.access(a.bench, os.X_OK):
        sys.exit(f"run_diagram_benchmark.py: {a.bench} is not an executable (build step_kernels_bench, or give --bench)")
    if torch is None or not torch.cuda.is_available():
        print("run_diagram_benchmark.py: skipped: " + ("PyTorch is not installed" if torch is None else
              "no CUDA GPU is visible to PyTorch"), file=sys.stderr)
        sys.exit(77)
    rows, details, ratios, outside = [], [], [], []
    kernels_within = kernels_all = 0
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    header = (f"{'case':<42} {'llmc us':>9} {'pred us':>9} {'in 2x':>7} {'eager us':>9} {'compile us':>10} "
              f"{'eager gr':>9} {'compile gr':>10} {'best/llmc':>9}")
    print(header, flush=True)
    for name, diagram, entry, sizes, grad, fn, shapes in cases:
        try:
            l = llmc_case(a.bench, diagram, entry, sizes, grad, a.reps)
            t = torch_case(name, sizes, grad, fn, shapes, a.reps)
        except Exception as e:  # noqa: BLE001
            print(f"{name:<42} FAILED: {e}", flush=True)
            rows.append(f"{name}: FAILED {e}")
            continue
        kernels = l["within"] + l["slower"] + l["faster"]
        nan = float("nan")
        if not any(k != "compile_mode" for k in t):
            print(f"{name:<42} FAILED: PyTorch ran in no configuration", flush=True)
            rows.append(f"{name}: FAILED: PyTorch ran in no configuration")
            continue
        best = min(v for k, v in t.items() if k != "compile_mode")
        row = (f"{name:<42} {l['graph_us']:>9.1f} {l['predicted_us']:>9.1f} {l['within']:>3}/{kernels:<3} "
               f"{t.get('eager', nan):>9.1f} {t.get('compile', nan):>10.1f} {t.get('eager_graph', nan):>9.1f} "
               f"{t.get('compile_graph', nan):>10.1f} {best / l['graph_us']:>9.2f}")
        print(row, flush=True)
        rows.append(row)
        ratios.append((best / l["graph_us"], name))
        kernels_within += l["within"]
        kernels_all += kernels
        outside += [f"{launch} ({name}) {ratio:.2f}" for launch, ratio in launches_outside_2x(l["text"])]
        details.append(f"== {name} ({diagram} {entry} {sizes}{' --grad' if grad else ''}; torch.compile mode "
                       f"{t.get('compile_mode', '-')})\n{l['text']}")
    summary = ""
    if ratios:
        mean = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
        low = min(ratios)
        summary = (f"summary: best/llmc geometric mean {mean:.2f} over {len(ratios)} cases, lowest {low[0]:.2f} "
                   f"({low[1]}); {kernels_within} of {kernels_all} kernels within 2x of their prediction "
                   f"(a kernel with its helper launches); launches outside 2x: {', '.join(outside) or 'none'}\n")
        print(summary, end="", flush=True)
    out = a.out if a.out is not None else os.path.join(HERE, "results", f"{results_file.machine_slug()}-diagrams.txt")
    if out != "-":
        results_file.write(out, ["benchmarks/diagrams/run_diagram_benchmark.py"] + sys.argv[1:],
                           f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}\n{header}\n" +
                           "\n".join(rows) + "\n" + summary + "\n" + "\n".join(details))
        print(f"results written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
