#!/bin/sh
# The ctest pytorch_gpt2_train_gpu: llmc's GPT-2 training step on the GPU
# (gpt2-train-dump --device cuda: GpuTrainer, generated kernels) checked against
# PyTorch's fp32 model (compare_gpt2_train.py, with the tolerances of the
# precision the dump records), in bf16 mixed precision and in fp32, for three
# shapes: the default one; one whose sizes are no multiples of the kernels'
# tiles (T=16, C=48, H=2, V=300); and one closer to a real model (T=64, C=128,
# V=1000). Then a negative control for each precision: the largest value of the
# qkvb gradient of the first run moved so that qkvb's gradient is off by twice
# the gradient tolerance must make the check fail.
#
# Exits 77, which ctest reports as skipped, where python3 cannot import torch
# and numpy, or where gpt2-train-dump finds no usable GPU (it exits 77 then).
#
# usage: run_gpt2_train_gpu_comparison.sh GPT2_TRAIN_DUMP COMPARE_GPT2_TRAIN_PY DIAGRAMS_DIR
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 GPT2_TRAIN_DUMP COMPARE_GPT2_TRAIN_PY DIAGRAMS_DIR" >&2
  exit 2
fi
dump=$1
compare=$2
diagrams=$3
if ! python3 -c "import torch, numpy" >/dev/null 2>&1; then
  echo "skipped: python3 cannot import torch and numpy"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

odd=B=3,T=16,maxT=24,L=3,C=48,H=2,V=300,Vp=320
real=B=4,T=64,maxT=64,L=2,C=128,H=4,V=1000,Vp=1024
status=0
first=1
# run NAME PRECISION SEED [SIZES]: one dump on the GPU and its comparison.
# All run even when one fails.
run() {
  name=$1
  precision=$2
  seed=$3
  sizes=${4:-}
  code=0
  if [ -n "$sizes" ]; then
    "$dump" --out "$dir/$name" --seed "$seed" --diagrams "$diagrams" --device cuda --precision "$precision" \
      --sizes "$sizes" || code=$?
  else
    "$dump" --out "$dir/$name" --seed "$seed" --diagrams "$diagrams" --device cuda --precision "$precision" || code=$?
  fi
  if [ $code -eq 77 ] && [ $first -eq 1 ]; then
    exit 77  # no GPU: the dump said why ("skipped: ...")
  fi
  first=0
  if [ $code -ne 0 ]; then
    echo "$name: gpt2-train-dump exited $code"
    status=1
    return 0
  fi
  python3 "$compare" "$dir/$name" || status=1
}

run bf16-default bf16 1
run bf16-odd bf16 2 "$odd"
run bf16-real bf16 3 "$real"
run fp32-default fp32 1
run fp32-odd fp32 2 "$odd"
run fp32-real fp32 3 "$real"

# Negative controls: qkvb's gradient moved by twice the precision's gradient
# tolerance (in relative norm, all of it on its largest value) must fail, exit 1.
for name in bf16-default fp32-default; do
  [ -f "$dir/$name/grads.bin" ] || continue
  cp -r "$dir/$name" "$dir/$name-bad"
  python3 - "$dir/$name-bad" "$compare" <<'EOF'
import json
import os
import sys
from pathlib import Path
import numpy as np
directory = Path(sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))
from compare_gpt2_train import default_tolerances  # noqa: E402
precision = json.loads((directory / "config.json").read_text())["precision"]
tolerance = default_tolerances(precision)["gradient"]
header = np.fromfile(directory / "model.bin", dtype="<i4", count=8)
maxT, V, L, H, C, Vp = (int(v) for v in header[2:8])
grads = np.fromfile(directory / "grads.bin", dtype="<f4")
# qkvb comes after wte, wpe, ln1w, ln1b, qkvw.
start = Vp * C + maxT * C + 2 * L * C + L * 3 * C * C
qkvb = grads[start:start + L * 3 * C]
i = start + int(np.argmax(np.abs(qkvb)))
delta = 2 * tolerance * float(np.linalg.norm(qkvb.astype(np.float64)))
print(f"negative control ({precision}): grads.bin value {i} (qkvb) {grads[i]:.6g} -> {grads[i] + delta:.6g}, "
      f"qkvb's gradient off by {2 * tolerance:.0e} of its norm")
grads[i] += delta
grads.tofile(directory / "grads.bin")
EOF
  if python3 "$compare" "$dir/$name-bad" > "$dir/$name-bad.log" 2>&1; then
    cat "$dir/$name-bad.log"
    echo "negative control ($name): FAIL: a perturbed gradient passed the check"
    status=1
  else
    code=$?
    grep -E 'FAIL|error' "$dir/$name-bad.log" || cat "$dir/$name-bad.log"
    if [ $code -eq 1 ]; then
      echo "negative control ($name): PASS: the perturbed gradient fails the check (exit 1)"
    else
      echo "negative control ($name): FAIL: the check exited $code, not 1"
      status=1
    fi
  fi
done
exit $status
