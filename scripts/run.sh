#!/usr/bin/env bash
# The main job on a fresh machine: builds llmc, tokenizes the corpus into
# llm.c shards, and trains GPT-2 with llmc-train.
#
# With a GPU: GPT-2 124M (d12, B=32, T=1024) on the GPU path for 2000 steps,
# into out/gpu_run. Without one: a small GPT-2 (2 layers, 128 channels)
# trained on the CPU path, the diagrams run by the reference interpreter: the
# validation loss falls over a few minutes, a sample is printed, and a
# checkpoint is written to out/cpu_run. Either way the output folder gets the
# log, the loss curve (loss.svg), samples and checkpoints.
#
#   LLMC_BUILD_DIR   build directory (default: build)
#   LLMC_STEPS       optimizer steps (default: 150 on the CPU, 2000 on the GPU)
set -euo pipefail
trap 'echo "run.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${LLMC_BUILD_DIR:-build}"
steps="${LLMC_STEPS:-150}"

./scripts/setup.sh
data_dir="$(./scripts/fetch_data.sh)"
echo "run.sh: data in $data_dir"

shards=data/shards
"$build_dir/bin/llmc-data" --tokenizer "$data_dir/gpt2-bpe" --out "$shards" --name corpus \
  --val-fraction 0.05 "$data_dir/text"

# With a GPU (the driver answers), the real thing: GPT-2 124M (d12) on the
# GPU path, every kernel generated from the diagrams. Without one, a small
# GPT-2 on the CPU path (the reference interpreter runs the same diagrams).
if nvidia-smi -L >/dev/null 2>&1; then
  out=out/gpu_run
  mkdir -p "$out"
  "$build_dir/bin/llmc-train" --device cuda \
    -i "$shards/corpus_train_*.bin" -j "$shards/corpus_val_*.bin" \
    -e d12 -b 32 -t 1024 \
    -x "${LLMC_STEPS:-2000}" -l 6e-4 -u 100 -q 0.1 -c 0.1 \
    -v 100 -m 8 -s 500 -g 64 -n 500 \
    --tokenizer "$data_dir/gpt2-bpe" -o "$out" 2>&1 | tee "$out/run.txt"
else
  out=out/cpu_run
  mkdir -p "$out"
  "$build_dir/bin/llmc-train" --device cpu \
    -i "$shards/corpus_train_*.bin" -j "$shards/corpus_val_*.bin" \
    -e d2 --channels 128 --heads 2 -b 8 -t 64 \
    -x "$steps" -l 2e-3 -u 10 -q 0.1 -c 0.1 \
    -v 25 -m 8 -s 75 -g 48 -n 75 \
    --tokenizer "$data_dir/gpt2-bpe" -o "$out" 2>&1 | tee "$out/run.txt"
fi
echo "run.sh: done; the log, loss curve (loss.svg), samples and checkpoints are in $out"
