#!/bin/sh
# llmc-run on the GPU (ctest llmc_run_gpu, label gpu): three diagrams GPT-2
# does not use (benchmarks/diagrams: a gated MLP, multi-query
# cross-attention, rotary attention) at small odd sizes, forward and with
# --grad, each output and gradient checked against the interpreter
# (--check); one with its input from a .npy file; then --bench --out on the
# gated MLP's backward, the file read back by llmc-compile --emit perf
# --measured (which refuses a file measured from another plan).
# Exits 77 (skipped) where llmc-run finds no GPU.
#
# usage: llmc_run_gpu.sh BIN_DIR SOURCE_DIR [OUT_DIR]
set -u
bin=$1
src=$2
out=${3:-$(mktemp -d)}
mkdir -p "$out"
diagrams=$src/benchmarks/diagrams
failed=0

# llmc-run with the arguments; 77 from the first call means no GPU: skipped.
run() {
  echo "+ llmc-run $*"
  "$bin/llmc-run" "$@" > "$out/last.txt" 2>&1
  status=$?
  cat "$out/last.txt"
  if [ $status -eq 77 ]; then
    echo "llmc_run_gpu.sh: skipped: llmc-run found no GPU"
    exit 77
  fi
  if [ $status -ne 0 ]; then
    echo "FAIL (exit status $status): llmc-run $*"
    failed=1
  fi
}

gated="$diagrams/gated_mlp.dg --set N=100,C=77,F=205"
mqa="$diagrams/multi_query_attention.dg --set H=4,Tq=100,Tk=300,D=64"
rotary="$diagrams/rotary_attention.dg --set B=1,H=4,T=200,D=64"

run $gated --entry gated_mlp --check
run $gated --entry gated_mlp --check --storage f32
run $gated --entry gated_mlp_loss --grad --check
run $mqa --entry multi_query_attention --check
run $mqa --entry multi_query_attention_loss --grad --check
run $rotary --entry rotary_attention --check
run $rotary --entry rotary_attention_loss --grad --check

# An input from a .npy file (0.25 everywhere), the rest random.
python3 "$src/tests/lit/run/Inputs/make_npy.py" "$out/x.npy" '<f4' 100,77 --value 0.25
run $gated --entry gated_mlp --input x="$out/x.npy" --check

# Every launch timed; the file set beside the model by llmc-compile.
rm -f "$out/times.json"
run $gated --entry gated_mlp_loss --grad --bench --reps 3 --out "$out/times.json"
arch=$(sed -n 's/.*planned for \(sm_[0-9a-z]*\)).*/\1/p' "$out/last.txt" | head -n 1)
echo "+ llmc-compile ... --arch $arch --emit perf --measured $out/times.json"
if ! "$bin/llmc-compile" $gated --entry gated_mlp_loss --grad --arch "$arch" --storage bf16 --emit perf \
       --measured "$out/times.json" > "$out/perf.txt" 2>&1 || ! grep -q "^measured: " "$out/perf.txt"; then
  cat "$out/perf.txt"
  echo "FAIL: llmc-compile --emit perf --measured did not read llmc-run's times"
  failed=1
else
  grep "^measured: " "$out/perf.txt"
fi

[ $failed -eq 0 ] && echo "llmc_run_gpu.sh: all passed"
exit $failed
