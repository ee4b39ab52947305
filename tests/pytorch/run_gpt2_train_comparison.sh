#!/bin/sh
# The ctest pytorch_gpt2_train: writes llmc's fp32 GPT-2 training step for a
# small random model (gpt2-train-dump: the step-0 gradient and ten AdamW steps)
# and checks it against PyTorch (compare_gpt2_train.py), for two shapes. Then a
# negative control: one gradient value of the first run changed by 0.1% must
# make the check fail. Exits 77, which ctest reports as skipped, where python3
# cannot import torch and numpy.
#
# usage: run_gpt2_train_comparison.sh GPT2_TRAIN_DUMP COMPARE_GPT2_TRAIN_PY DIAGRAMS_DIR
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 GPT2_TRAIN_DUMP COMPARE_GPT2_TRAIN_PY DIAGRAMS_DIR" >&2
  exit 2
fi
if ! python3 -c "import torch, numpy" >/dev/null 2>&1; then
  echo "skipped: python3 cannot import torch and numpy"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Two shapes: the default one (maxT > T, clipping in the first steps and not in
# the last), and more layers, fewer heads and channels. All run even when one fails.
status=0
"$1" --out "$dir/a" --seed 1 --diagrams "$3" &&
  python3 "$2" "$dir/a" || status=1
"$1" --out "$dir/b" --seed 2 --diagrams "$3" --sizes B=3,T=16,maxT=24,L=3,C=48,H=2,V=300,Vp=320 &&
  python3 "$2" "$dir/b" || status=1

# Negative control: the largest value of the qkvb gradient 0.1% off must fail.
if [ -f "$dir/a/grads.bin" ]; then
  cp -r "$dir/a" "$dir/bad"
  python3 - "$dir/bad" <<'EOF'
import sys
from pathlib import Path
import numpy as np
directory = Path(sys.argv[1])
header = np.fromfile(directory / "model.bin", dtype="<i4", count=8)
maxT, V, L, H, C, Vp = (int(v) for v in header[2:8])
grads = np.fromfile(directory / "grads.bin", dtype="<f4")
# qkvb comes after wte, wpe, ln1w, ln1b, qkvw.
start = Vp * C + maxT * C + 2 * L * C + L * 3 * C * C
qkvb = grads[start:start + L * 3 * C]
i = start + int(np.argmax(np.abs(qkvb)))
print(f"negative control: grads.bin value {i} (qkvb) {grads[i]:.6g} -> {grads[i] * 1.001:.6g}")
grads[i] *= 1.001
grads.tofile(directory / "grads.bin")
EOF
  if python3 "$2" "$dir/bad" > "$dir/bad.log" 2>&1; then
    cat "$dir/bad.log"
    echo "negative control: FAIL: a perturbed gradient passed the check"
    status=1
  else
    code=$?
    grep -E 'FAIL|error' "$dir/bad.log" || cat "$dir/bad.log"
    if [ $code -eq 1 ]; then
      echo "negative control: PASS: the perturbed gradient fails the check (exit 1)"
    else
      echo "negative control: FAIL: the check exited $code, not 1"
      status=1
    fi
  fi
fi
exit $status
