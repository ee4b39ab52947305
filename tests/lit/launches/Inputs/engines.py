#!/usr/bin/env python3
"""Reads `llmc-compile --emit launches` JSON on stdin and prints, one line a
launch, what runs it, for FileCheck (tests/lit/launches/):

  arch sm_90a
  <role> <output>: <engine>
  ...
  summary: <G> GEMMs on tensor cores (<a> wgmma+tma, <b> mma.sync), <S> streams on tensor cores
    (<c> wgmma+tma, <d> mma.sync), <X> GEMM-like contractions on CUDA cores
  contractions on CUDA cores:
  <role> <output>: cuda-core ...   (those of the lines above, sorted)
  end

so that a test can check every launch it names with CHECK-DAG, the counts,
and with CHECK-NOT between "contractions on CUDA cores:" and "end" that none
is GEMM-like.

<output> is the launch's name without its kernel number (k3_grad_w -> grad_w).
<engine>, from the JSON's fields, not from the CUDA source's comments:
  tensor-core gemm wgmma+tma   "gemm" an llmc::sm90 config, two "tensor_maps" (A, B)
  tensor-core gemm mma.sync    "gemm" an llmc::sm80 config, no tensor maps
  tensor-core stream wgmma+tma "instructions" llmc::stream (TMA + wgmma), with tensor maps
  tensor-core stream mma.sync  "instructions" llmc::stream (cp.async + mma.sync)
  cuda-core gemm-like m=.. n=.. k=..: <instructions>
      a contraction that is GEMM-like, on CUDA cores: "instructions" names a
      matmul-like contraction with m and n axes, or the launch's params are
      shaped as one (a written array W and two read arrays A, B with an axis k
      in A and B but not W, an axis m in W and A but not B, an axis n in W and
      B but not A), which is how a contraction fused into a reduction shows
  cuda-core matvec k=..: <instructions>
      a matmul-like contraction without an m or an n axis (a row dot)
  cuda-core scan               a blocked scan (planning/scan_layout.h): "instructions" say so
  cuda-core <kind>             anything else: elementwise, reduction, copy, ...
"""
import json
import re
import sys


def axes(param):
    return {a["name"] for a in param["axes"] if a["size"] > 1}


def gemm_like_params(launch):
    """(m, n, k) where the params are shaped as a GEMM, else None."""
    written = [p for p in launch["params"] if p["access"] != "read"]
    read = [p for p in launch["params"] if p["access"] == "read"]
    for w in written:
        wa = axes(w)
        for i, a in enumerate(read):
            for b in read[i + 1:]:
                if a["buffer"] == b["buffer"]:
                    continue
                aa, ba = axes(a), axes(b)
                k = sorted((aa & ba) - wa)
                m = sorted((wa & aa) - ba)
                n = sorted((wa & ba) - aa)
                if k and m and n:
                    return " ".join(m), " ".join(n), " ".join(k)
    return None


def engine(launch):
    instr = launch["instructions"]
    gemm = launch["gemm"]
    maps = len(launch["tensor_maps"])
    if gemm is not None:
        config = gemm["config"]
        if config.startswith("llmc::sm90::") and maps == 2 and "TMA + wgmma" in instr:
            return "tensor-core gemm wgmma+tma"
        if config.startswith("llmc::sm80::") and maps == 0 and "cp.async + mma.sync" in instr:
            return "tensor-core gemm mma.sync"
        return f"unknown gemm {config} with {maps} tensor maps: {instr}"
    if "llmc::stream (TMA + wgmma)" in instr and maps > 0:
        return "tensor-core stream wgmma+tma"
    if "llmc::stream (cp.async + mma.sync)" in instr and maps == 0:
        return "tensor-core stream mma.sync"
    if "tensor cores" in instr and "CUDA cores" not in instr:
        return f"unknown tensor-core engine: {instr}"
    matmul = re.search(r"matmul-like contraction \(batch: ([^;]*); m: ([^;]*); n: ([^;]*); k: ([^)]*)\)", instr)
    if matmul:
        m, n, k = matmul.group(2), matmul.group(3), matmul.group(4)
        if m != "-" and n != "-":
            return f"cuda-core gemm-like m={m} n={n} k={k}: {instr}"
        return f"cuda-core matvec k={k}: {instr}"
    if "blocked scan" in instr:  # a running aggregate: its params (a value over t read, the sums written) no GEMM
        return "cuda-core scan"
    shape = gemm_like_params(launch) if launch["role"] == "tile" else None
    if shape:
        return "cuda-core gemm-like m={} n={} k={}: {}".format(*shape, instr)
    return "cuda-core " + instr.split(" ")[0].rstrip(",")


def main():
    d = json.load(sys.stdin)
    print("arch", d["arch"])
    counts = {}
    cuda_core_contractions = []
    for launch in d["launches"]:
        e = engine(launch)
        key = "cuda-core gemm-like" if e.startswith("cuda-core gemm-like") else e
        counts[key] = counts.get(key, 0) + 1
        line = f"{launch['role']} {re.sub(r'^k[0-9]+_', '', launch['name'])}: {e}"
        if e.startswith(("cuda-core gemm-like", "cuda-core matvec")):
            cuda_core_contractions.append(line)
        print(line)
    c = lambda k: counts.get(k, 0)
    g90, g80 = c("tensor-core gemm wgmma+tma"), c("tensor-core gemm mma.sync")
    s90, s80 = c("tensor-core stream wgmma+tma"), c("tensor-core stream mma.sync")
    print(f"summary: {g90 + g80} GEMMs on tensor cores ({g90} wgmma+tma, {g80} mma.sync), "
          f"{s90 + s80} streams on tensor cores ({s90} wgmma+tma, {s80} mma.sync), "
          f"{c('cuda-core gemm-like')} GEMM-like contractions on CUDA cores")
    print("contractions on CUDA cores:")
    for line in sorted(cuda_core_contractions):
        print(line)
    print("end")


if __name__ == "__main__":
    main()
