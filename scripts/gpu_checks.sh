#!/usr/bin/env bash
# Every GPU check and benchmark in one go, for the GPU machine (device time is
# scarce: build on the development machine, carry build/bin and data/shards,
# run this once). Each step's output goes to $OUT/<step>.txt (OUT defaults to
# out/gpu_checks); a table of what passed and the headline figures comes last.
#
#   scripts/gpu_checks.sh [STEP...]   steps: tests sanitizer kernels compile train multigpu run
#                                     (default: all but multigpu, which needs two GPUs,
#                                     and run, the 2000-step d12 run)
#
# The device tool allows 600 s a call: give the steps a few at a time there,
# e.g. `tests`, then `sanitizer kernels compile`, then `train`. The kernel
# cache (~/.cache/llmc) lives as long as the machine, so later calls compile
# less.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LLMC_SOURCE_DIR=$PWD LLMC_TARGETS=$PWD/compiler/targets LLMC_DEVICE_INCLUDE=$PWD/runtime/cuda/device
export LLMC_DIAGRAMS=$PWD/diagrams
bin="${LLMC_BUILD_DIR:-build}/bin"
out="${OUT:-out/gpu_checks}"
mkdir -p "$out"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitizer kernels compile train)
summary=()

run() {  # run NAME TIMEOUT COMMAND...: its output to $out/NAME.txt, its status to the table
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  local status=$?
  summary+=("$(printf '%-28s %-8s %5ss  %s' "$name" "$([ $status -eq 0 ] && echo ok || echo "FAIL($status)")" \
    $((SECONDS - start)) "$(tail -n 1 "$out/$name.txt" | cut -c1-110)")")
}

for step in "${steps[@]}"; do
  case $step in
    tests)
      run jit_gpu_test 120 "$bin/jit_gpu_test"
      run emit_cuda_gpu_test 420 "$bin/emit_cuda_gpu_test"
      run llmc_run_gpu 300 sh tests/cuda/llmc_run_gpu.sh "$bin" "$PWD" "$out/llmc_run"
      run pytorch_gpt2_train_gpu 600 sh tests/pytorch/run_gpt2_train_gpu_comparison.sh "$bin/gpt2-train-dump" \
        tests/pytorch/compare_gpt2_train.py diagrams ;;
    sanitizer)
      run memcheck 300 compute-sanitizer --tool memcheck "$bin/emit_cuda_gpu_test" "matmul M=1000" "causal attention" \
        "training step, small" "ping-pong" "split-K" "column sums" "in place" "added and multiplied"
      run racecheck 300 compute-sanitizer --tool racecheck "$bin/emit_cuda_gpu_test" "matmul M=1000" "causal attention" \
        "ping-pong" "split-K" "column sums" ;;
    kernels)
      run step_kernels_bench 300 "$bin/step_kernels_bench" --reps 5 --top 40 --json "$out/step_kernels.json"
      run generated_gemm_bench 300 "$bin/generated_gemm_bench" --grad
      run attention_bench 300 python3 benchmarks/kernels/attention_bench.py --bench "$bin/step_kernels_bench" ;;
    compile)
      run training_step_compile 300 "$bin/training_step_compile" --slowest 10
      run training_step_compile_threads 300 "$bin/training_step_compile" --in-threads ;;
    train)
      run train_benchmark 900 python3 benchmarks/train/run_train_benchmark.py --llmc-train "$bin/llmc-train" -x 30 --log-dir "$out/train" ;;
    multigpu)
      run train_data_parallel 300 bash tests/train/data_parallel_gpu.sh "$bin" ../shared/data
      run data_parallel_scaling 600 python3 benchmarks/train/data_parallel_scaling.py --llmc-train "$bin/llmc-train" \
        --llmc-compile "$bin/llmc-compile" -x 30 --log-dir "$out/scaling" ;;
    run)
      run d12_run 3600 env LLMC_BUILD_DIR="${LLMC_BUILD_DIR:-build}" ./scripts/run.sh ;;
    *) echo "gpu_checks.sh: unknown step '$step' (tests sanitizer kernels compile train multigpu run)" >&2; exit 2 ;;
  esac
done

echo
printf '%-28s %-8s %6s  %s\n' check status time "last line"
for line in "${summary[@]}"; do echo "$line"; done
