#!/usr/bin/env python3
"""GPT-2 training in PyTorch: the reference that llmc-train is benchmarked against.

The training step is configured as llm.c's train_gpt2.py configures it: bf16
autocast, torch.compile (or eager with --compile 0), causal attention through
F.scaled_dot_product_attention (the backend PyTorch chooses by default;
--attention flash or cudnn forces one), fused AdamW (betas 0.9/0.95, eps 1e-8,
weight decay on the 2-D parameters only), gradient clipping at 1.0 and TF32
matrix products. The model is llmc's GPT-2: the vocabulary padded to Vp (the
classifier shares wte, [Vp, C]; a bias row of -inf on the padded columns keeps
them out of the loss, which is over the first V columns only), layernorm, tanh
GELU. Data come from llm.c token shards, batched as llm.c's loader does, and
the model starts from an llm.c checkpoint (-e file.bin, version 3 fp32 or 5
bf16) or fresh (-e dN, GPT-2's initialisation).

Each step prints llmc-train's step line; at the end one line
    RESULT {"ms_per_step": ..., "tokens_per_s": ..., "peak_memory_bytes": ..., ...}
gives the median time per step over the steps after --warmup-steps, the
tokens per second it implies, the peak memory (allocated and reserved by
PyTorch's allocator), the time from the process's start to the end of the
first step (imports and compilation included), the final loss, the mode and
the attention backend.

exit status: 0 after a run with a finite final loss; 1 otherwise; 2 for bad
arguments, data or model; 3 when the --attention backend asked for cannot run
this model on this GPU (the runner reports that configuration unavailable).

usage: train_gpt2_torch.py -i 'data/shards/corpus_train_*.bin' -e d12 -b 32 -t 1024 -x 50 [--compile 0]
Without a GPU it runs on the CPU in eager mode (a smoke test: use a small
model, e.g. -e d2 -b 4 -t 64).
"""

import os
import time

# Process start, for time_to_first_step_s. /proc gives the true start (before
# the interpreter and the imports below); elsewhere this line is the best we have.
_SCRIPT_START = time.time()


def _process_start_time():
    try:
        with open("/proc/self/stat") as f:
            # Field 22 (starttime, clock ticks after boot) follows the ')' that ends the command name.
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _SCRIPT_START


PROCESS_START = _process_start_time()

import argparse  # noqa: E402 (after the clock above on purpose)
import contextlib  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

# llm.c's parameter order and shapes, the checkpoint header's constants and
# the copying of parameters into the model come from the PyTorch comparison
# tests, which already read llm.c checkpoints.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "pytorch"))
from compare_gpt2_forward import (  # noqa: E402
    CHECKPOINT_HEADER_WORDS, CHECKPOINT_MAGIC, CHECKPOINT_VERSION_FP32, parameter_shapes)
from compare_gpt2_forward import Gpt2 as ReferenceGpt2  # noqa: E402

CHECKPOINT_VERSION_BF16 = 5
SHARD_MAGIC = 20240520
SHARD_VERSION = 1
SHARD_HEADER_WORDS = 256
GPT2_VOCAB = 50257


# ---------------------------------------------------------------------------
# Model configuration and checkpoints


def padded_vocabulary(V):
    """llmc's and llm.c's Vp: V rounded up to a multiple of 64 (50257 -> 50304)."""
    return (V + 63) // 64 * 64


def padded_column_mask(V, Vp):
    """The classifier's bias row that keeps the padded columns out of the loss: [Vp] float32, 0 for the
    V real columns and -inf for the Vp - V padded ones."""
    mask = torch.zeros(Vp)
    mask[V:] = float("-inf")
    return mask


def config_from_depth(name, T, channels=None, heads=None):
    """A fresh dN model's sizes, as models/gpt2_config.cpp makes them."""
    if len(name) < 2 or name[0] != "d" or not name[1:].isdigit() or int(name[1:]) <= 0:
        raise ValueError(f"-e {name}: expected dN such as d12, or an llm.c checkpoint file")
    L = int(name[1:])
    C, H = {12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}.get(L, (64 * L, L))
    C, H = channels or C, heads or H
    if C % H != 0:
        raise ValueError(f"{C} channels do not split into {H} heads")
    # maxT is GPT-2's 1024 unless the sequences are longer (as llmc-train does).
    return {"maxT": max(1024, T), "V": GPT2_VOCAB, "L": L, "H": H, "C": C, "Vp": padded_vocabulary(GPT2_VOCAB)}


def read_llmc_checkpoint(path):
    """An llm.c model checkpoint (fp32 or bf16): its sizes and its parameters as float32 arrays by name."""
    header = np.fromfile(path, dtype="<i4", count=CHECKPOINT_HEADER_WORDS)
    if header.size != CHECKPOINT_HEADER_WORDS:
        raise ValueError(f"{path}: truncated header")
    if header[0] != CHECKPOINT_MAGIC:
        raise ValueError(f"{path}: bad magic {header[0]} in header[0] (expected {CHECKPOINT_MAGIC})")
    version = int(header[1])
    if version not in (CHECKPOINT_VERSION_FP32, CHECKPOINT_VERSION_BF16):
        raise ValueError(f"{path}: version {version} in header[1] (expected {CHECKPOINT_VERSION_FP32} = fp32 "
                         f"or {CHECKPOINT_VERSION_BF16} = bf16)")
    sizes = dict(zip(["maxT", "V", "L", "H", "C", "Vp"], (int(v) for v in header[2:8])))
    offset_bytes = 4 * CHECKPOINT_HEADER_WORDS
    if version == CHECKPOINT_VERSION_FP32:
        values = np.fromfile(path, dtype="<f4", offset=offset_bytes)
    else:
        # bf16 is the upper half of an fp32: widen by shifting into the high 16 bits.
        raw = np.fromfile(path, dtype="<u2", offset=offset_bytes)
        values = (raw.astype(np.uint32) << 16).view(np.float32)
    params, offset = {}, 0
    for name, shape in parameter_shapes(sizes["maxT"], sizes["L"], sizes["C"], sizes["Vp"]):
        count = math.prod(shape)
        params[name] = values[offset:offset + count].reshape(shape)
        offset += count
    if offset != values.size:
        raise ValueError(f"{path}: {values.size} parameter values, the header implies {offset}")
    return sizes, params


# ---------------------------------------------------------------------------
# The model


def _causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # PyTorch before 2.0 (CPU smoke tests on old installs only): the same, unfused.
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.proj.residual_projection = True  # scaled initialisation, as GPT-2's

    def forward(self, x):
        B, T, C = x.shape
        # The 3C outputs are q, k, v one after the other, each H heads of C/H (llm.c's layout).
        q, k, v = (part.view(B, T, self.H, C // self.H).transpose(1, 2) for part in self.qkv(x).split(C, dim=-1))
        return self.proj(_causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)
        self.proj.residual_projection = True

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
    def __init__(self, sizes, padded_loss=False):
        super().__init__()
        self.V, self.Vp = sizes["V"], sizes["Vp"]
        C = sizes["C"]
        self.wte = nn.Embedding(self.Vp, C)
        self.wpe = nn.Embedding(sizes["maxT"], C)
        self.blocks = nn.ModuleList(Block(C, sizes["H"]) for _ in range(sizes["L"]))
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        # The classifier's bias: 0 on the V real columns, -inf on the Vp - V
        # padded ones (None with --padded-loss: all Vp columns count). A buffer,
        # not a parameter: no gradient, no optimizer state, not in the
        # parameter count; it moves with the model to its device.
        self.register_buffer("logit_mask", None if padded_loss else padded_column_mask(self.V, self.Vp),
                             persistent=False)

    def forward(self, tokens, targets):
        """The mean cross-entropy loss of next-token prediction."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        # The classifier shares wte: logits [B, T, Vp]. The padded columns are
        # computed (the matrix product is faster on a multiple of 64) but are no
        # token, so the loss is over the first V columns, as llmc's. They are
        # kept out by the bias row above, not by slicing: a logit of -inf adds
        # exp(-inf) = 0 to the softmax's sum, so the cross-entropy over Vp
        # columns equals the one over the first V (the targets are all < V),
        # and its gradient there is softmax - onehot = 0, so wte's padded rows
        # get none. The bias is the matrix product's own epilogue in eager
        # (addmm, cuBLASLt) and a broadcast add that torch.compile fuses into
        # the loss's reductions: no pass of its own over the logits. Slicing
        # (logits[..., :V], then F.cross_entropy) makes a [B*T, V] copy of
        # them and, in the backward, a zero-filled [B*T, Vp] gradient to put
        # the slice's into (README.md gives what that cost). A masked_fill
        # with a [Vp] mask is equal too, but in eager it is a pass and a copy
        # of its own.
        logits = F.linear(self.lnf(x), self.wte.weight, self.logit_mask)
        return F.cross_entropy(logits.view(-1, self.Vp), targets.view(-1))

    @torch.no_grad()
    def init_gpt2(self, L, generator):
        """GPT-2's initialisation as llm.c's: N(0, 0.02), the residual projections
        scaled by 1/sqrt(2L), biases zero, layernorms one and zero; the padded
        rows of wte zero (they are never a token)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                std = 0.02 / math.sqrt(2 * L) if getattr(module, "residual_projection", False) else 0.02
                module.weight.normal_(0.0, std, generator=generator)
                module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, 0.02, generator=generator)
        self.wte.weight[self.V:].zero_()

    # llm.c's parameters copied in, as the reference model does it: the
    # modules here carry the same names (wte, wpe, blocks[l].ln1, .attention.qkv, ...).
    load_llmc = ReferenceGpt2.load_llmc


# ---------------------------------------------------------------------------
# Data


class ShardLoader:
    """Batches from llm.c token shards with llm.c's (and llmc's) semantics:
    a batch is one contiguous run of B*T+1 tokens, row b of the inputs tokens
    [b*T, b*T+T) and the targets the same shifted by one; the start advances
    by B*T, a shard is done when fewer than B*T+1 tokens remain, and after the
    last shard the first comes again."""

    def __init__(self, pattern, B, T):
        self.paths = sorted(glob.glob(pattern))
        if not self.paths:
            raise ValueError(f"no shard files match \"{pattern}\"")
        self.B, self.T = B, T
        self.shards = [self._open(path) for path in self.paths]
        self.shard, self.position = 0, 0

    def _open(self, path):
        header = np.fromfile(path, dtype="<i4", count=SHARD_HEADER_WORDS)
        if header.size != SHARD_HEADER_WORDS:
            raise ValueError(f"{path}: truncated header")
        if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
            raise ValueError(f"{path}: magic {header[0]}, version {header[1]} "
                             f"(expected an llm.c token shard: {SHARD_MAGIC}, {SHARD_VERSION})")
        tokens = np.memmap(path, dtype="<u2", mode="r", offset=4 * SHARD_HEADER_WORDS)
        if tokens.size != header[2]:
            raise ValueError(f"{path}: header says {header[2]} tokens, the file holds {tokens.size}")
        if tokens.size < self.B * self.T + 1:
            raise ValueError(f"{path}: {tokens.size} tokens, fewer than one batch of B*T+1 = {self.B * self.T + 1}")
        return tokens

    def next(self):
        span = self.B * self.T
        if self.position + span + 1 > self.shards[self.shard].size:
            self.shard, self.position = (self.shard + 1) % len(self.shards), 0
        window = torch.from_numpy(self.shards[self.shard][self.position:self.position + span + 1].astype(np.int64))
        self.position += span
        return window[:-1].view(self.B, self.T), window[1:].view(self.B, self.T)


# ---------------------------------------------------------------------------
# Training


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-i", "--train-data", required=True, help="glob of llm.c training shards")
    p.add_argument("-e", "--model", default="d12", help="dN for a fresh model, or an llm.c checkpoint file")
    p.add_argument("--channels", type=int, help="width of a fresh dN model (default 64*N; GPT-2's for d12..d48)")
    p.add_argument("--heads", type=int, help="heads of a fresh dN model")
    p.add_argument("-b", "--batch-size", type=int, default=4, help="rows per step (default 4)")
    p.add_argument("-t", "--seq-len", type=int, default=1024, help="tokens per row (default 1024)")
    p.add_argument("-x", "--max-steps", type=int, default=20, help="optimizer steps, warm-up included (default 20)")
    p.add_argument("-l", "--lr", type=float, default=3e-4, help="peak learning rate (default 3e-4, as llmc-train)")
    p.add_argument("-u", "--lr-warmup", type=int, default=0,
                   help="linear learning-rate warmup steps, as llmc-train -u (default 0)")
    p.add_argument("-q", "--final-lr-fraction", type=float, default=1.0,
                   help="cosine decay to LR*F at the last step, as llmc-train -q (default 1.0: constant)")
    p.add_argument("-c", "--weight-decay", type=float, default=0.0, help="AdamW weight decay on 2-D parameters (default 0)")
    p.add_argument("--grad-clip", type=float, default=1.0, help="clip the gradient's global norm (default 1.0)")
    p.add_argument("--compile", type=int, choices=(0, 1), default=1, help="1: torch.compile the model (default); 0: eager")
    p.add_argument("--warmup-steps", type=int, default=5,
                   help="first steps left out of the timing (compilation, allocator and autotuning warm-up; default 5)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="default: cuda when there is one")
    p.add_argument("--autocast", choices=("bf16", "fp32"), default="bf16",
                   help="bf16: autocast to bfloat16 as llm.c (default); fp32: none")
    p.add_argument("--attention", choices=("auto", "flash", "cudnn"), default="auto",
                   help="the SDPA backend on CUDA: auto (PyTorch's own choice; default), flash (FlashAttention-2, "
                        "as llm.c's train_gpt2.py) or cudnn (cuDNN's fused attention)")
    p.add_argument("--padded-loss", action="store_true",
                   help="softmax over all Vp columns, the padding included as if it were tokens: not llmc's loss "
                        "(nor the model's), but faster under torch.compile; only to compare with figures measured so")
    p.add_argument("--seed", type=int, default=1337, help="seed of a fresh model's initialisation (default 1337)")
    args = p.parse_args(argv)
    for name in ("batch_size", "seq_len", "max_steps"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if not 0 <= args.warmup_steps < args.max_steps:
        p.error(f"--warmup-steps {args.warmup_steps} leaves no timed step of -x {args.max_steps}")
    if args.lr_warmup < 0:
        p.error(f"-u must not be negative, got {args.lr_warmup}")
    if not 0 <= args.final_lr_fraction <= 1:
        p.error(f"-q must be between 0 and 1, got {args.final_lr_fraction}")
    return args


EXIT_UNAVAILABLE = 3
SDPA_SWITCHES = {"flash": "enable_flash_sdp", "cudnn": "enable_cudnn_sdp",
                 "efficient": "enable_mem_efficient_sdp", "math": "enable_math_sdp"}


class BackendUnavailable(Exception):
    pass


def choose_attention_backend(choice):
    """Restricts scaled_dot_product_attention to one backend (auto: leaves
    PyTorch's choice alone). Global switches, set before any compilation:
    torch.compile and eager both honour them."""
    if choice == "auto":
        return
    cuda = torch.backends.cuda
    if not hasattr(cuda, SDPA_SWITCHES[choice]):
        raise BackendUnavailable(f"this PyTorch {torch.__version__} has no {choice} attention backend")
    for backend, switch in SDPA_SWITCHES.items():
        if hasattr(cuda, switch):
            getattr(cuda, switch)(backend == choice)


def probe_attention(sizes, B, T, dtype, device):
    """Runs the model's attention once, forward and backward, at its shape and
    dtype under the switches set, and names the backend PyTorch picks for it
    ('flash', 'cudnn', 'efficient', 'math', or None where this PyTorch does
    not say). Raises BackendUnavailable when no enabled backend can run it (a
    forced backend that does not support this head size, dtype or GPU)."""
    H = sizes["H"]
    shape = (B, H, T, sizes["C"] // H)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    picked = None
    try:  # private, but the same choice as SDPA's own (torch 2.2 and later)
        from torch.nn.attention import SDPBackend
        labels = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cudnn", "EFFICIENT_ATTENTION": "efficient",
                  "MATH": "math"}
        by_value = {int(getattr(SDPBackend, name)): label
                    for name, label in labels.items() if hasattr(SDPBackend, name)}
        picked = by_value.get(int(torch._fused_sdp_choice(q, k, v, is_causal=True)))
    except (AttributeError, ImportError, RuntimeError, TypeError, ValueError):
        pass
    try:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        torch.cuda.synchronize(device)
    except RuntimeError as error:
        raise BackendUnavailable(str(error).strip().splitlines()[0] if str(error).strip() else repr(error))
    finally:
        del q, k, v
        torch.cuda.empty_cache()
    return picked


def attention_label(args, device, backend):
    """The attention as the header line names it: 'auto (PyTorch picks flash)', 'cudnn', 'cpu'."""
    if device.type != "cuda":
        return "cpu"
    if args.attention == "auto":
        return f"auto (PyTorch picks {backend or 'an unreported backend'})"
    return args.attention


def build_model(args, device):
    if Path(args.model).is_file():
        if args.channels or args.heads:
            raise ValueError("--channels and --heads apply to a fresh dN model only")
        sizes, params = read_llmc_checkpoint(args.model)
        if args.seq_len > sizes["maxT"]:
            raise ValueError(f"-t {args.seq_len} is longer than the checkpoint's maxT {sizes['maxT']}")
        model = Gpt2(sizes, args.padded_loss)
        model.load_llmc(params)
    else:
        sizes = config_from_depth(args.model, args.seq_len, args.channels, args.heads)
        model = Gpt2(sizes, args.padded_loss)
        model.init_gpt2(sizes["L"], torch.Generator().manual_seed(args.seed))
    return sizes, model.to(device)


def make_optimizer(model, args, device):
    """AdamW as llm.c's configure_optimizers: decay on the matrices and
    embeddings (2-D), none on biases and layernorms; fused on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]  # wte once: it is tied
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **extra)


def learning_rate(step, args):
    """llmc-train's schedule (runtime/train/lr_schedule.cpp) at step (counted from 0): linear warmup over
    -u steps, then a cosine from LR down to LR*F at step -x."""
    if step < args.lr_warmup:
        return args.lr * (step + 1) / args.lr_warmup
    floor = args.lr * args.final_lr_fraction
    progress = min(max((step - args.lr_warmup) / max(1, args.max_steps - args.lr_warmup), 0.0), 1.0)
    return floor + 0.5 * (1.0 + math.cos(math.pi * progress)) * (args.lr - floor)


def main(argv=None):
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("train_gpt2_torch.py: --device cuda, but PyTorch sees no GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    compile_model = bool(args.compile)
    if compile_model and device.type == "cpu":
        print("note: no torch.compile on the CPU (a smoke test): running eager")
        compile_model = False

    # TF32 for the fp32 matrix products that autocast leaves (llm.c's
    # set_float32_matmul_precision('high')).
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        sizes, model = build_model(args, device)
        loader = ShardLoader(args.train_data, args.batch_size, args.seq_len)
    except (ValueError, OSError) as error:
        print(f"train_gpt2_torch.py: {error}", file=sys.stderr)
        return 2
    attention_backend = None
    if device.type == "cuda":
        try:
            choose_attention_backend(args.attention)
            attention_backend = probe_attention(
                sizes, args.batch_size, args.seq_len, torch.bfloat16 if args.autocast == "bf16" else torch.float32,
                device)
        except BackendUnavailable as error:
            print(f"train_gpt2_torch.py: unavailable: --attention {args.attention}: {error}", flush=True)
            return EXIT_UNAVAILABLE
    parameter_count = sum(p.numel() for p in model.parameters())
    optimizer = make_optimizer(model, args, device)
    fused_adamw = bool(optimizer.defaults.get("fused"))
    if device.type == "cuda" and not fused_adamw:
        print("train_gpt2_torch.py: AdamW is not fused on CUDA", file=sys.stderr)
        return 2
    step_fn = torch.compile(model) if compile_model else model
    mode = "compile" if compile_model else "eager"

    def autocast():
        if args.autocast == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    B, T = args.batch_size, args.seq_len

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; "
          f"mode {mode}; autocast {args.autocast}; attention {attention_label(args, device, attention_backend)}; "
          f"AdamW {'fused' if fused_adamw else 'not fused'}; "
          f"loss over {'all Vp columns (--padded-loss)' if args.padded_loss else 'the V real columns (padding -inf)'}")
    print(f"model: L={sizes['L']} C={sizes['C']} H={sizes['H']} maxT={sizes['maxT']} V={sizes['V']} Vp={sizes['Vp']}, "
          f"{parameter_count:,} parameters; from {args.model}")
    print(f"batch: {B}x{T} = {B * T} tokens per step; {args.max_steps} steps, the first {args.warmup_steps} untimed; "
          f"data {len(loader.paths)} shard(s) from {args.train_data}")
    sys.stdout.flush()

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step_ms, first_step_end, loss_value = [], None, float("nan")
    for step in range(1, args.max_steps + 1):
        start = time.perf_counter()
        inputs, targets = loader.next()
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with autocast():
            loss = step_fn(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        lr = learning_rate(step - 1, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        elapsed = time.perf_counter() - start
        if first_step_end is None:
            first_step_end = time.time()
        loss_value = loss.item()
        if step > args.warmup_steps:
            step_ms.append(elapsed * 1e3)
        print(f"step {step:5d}/{args.max_steps} | loss {loss_value:.6f} | norm {norm.item():.4f} | lr {lr:.2e} | "
              f"{elapsed * 1e3:.1f} ms | {B * T / elapsed:.0f} tok/s", flush=True)

    ms_per_step = statistics.median(step_ms)
    result = {
        "implementation": f"pytorch-{mode}",
        "mode": mode,
        "attention": args.attention if device.type == "cuda" else "cpu",
        "attention_backend": attention_backend,
        "fused_adamw": fused_adamw,
        "padded_loss": args.padded_loss,
        "ms_per_step": round(ms_per_step, 3),
        "tokens_per_s": round(B * T / (ms_per_step / 1e3), 1),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "peak_memory_reserved_bytes": torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None,
        "time_to_first_step_s": round(first_step_end - PROCESS_START, 3),
        "final_loss": loss_value,
        "B": B, "T": T, "steps": args.max_steps, "warmup_steps": args.warmup_steps, "timed_steps": len(step_ms),
        "parameters": parameter_count, "device": str(device), "torch": torch.__version__,
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if math.isfinite(loss_value) else 1


if __name__ == "__main__":
    sys.exit(main())
