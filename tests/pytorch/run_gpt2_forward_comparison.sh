#!/bin/sh
# The ctest pytorch_gpt2_forward: writes llmc's GPT-2 forward pass for a small
# random model (gpt2-forward-dump) and checks it against PyTorch
# (compare_gpt2_forward.py). Exits 77, which ctest reports as skipped, where
# python3 cannot import torch and numpy.
#
# usage: run_gpt2_forward_comparison.sh GPT2_FORWARD_DUMP COMPARE_GPT2_FORWARD_PY MODEL_DG
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 GPT2_FORWARD_DUMP COMPARE_GPT2_FORWARD_PY MODEL_DG" >&2
  exit 2
fi
if ! python3 -c "import torch, numpy" >/dev/null 2>&1; then
  echo "skipped: python3 cannot import torch and numpy"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Two shapes: the one the unit tests use, and T < maxT with fewer heads. Both
# run even when the first fails.
status=0
"$1" --out "$dir/a" --seed 1 --model "$3" --sizes B=3,T=16,maxT=32,L=2,C=32,H=4,V=100,Vp=128 &&
  python3 "$2" "$dir/a" || status=1
"$1" --out "$dir/b" --seed 2 --model "$3" --sizes B=2,T=7,maxT=9,L=3,C=48,H=2,V=50,Vp=64 &&
  python3 "$2" "$dir/b" || status=1
exit $status
