#!/usr/bin/env bash
# llmc-train over two GPUs (--gpus 2, NCCL), against one GPU with the same
# total batch: 2 processes of B=4 rows see the same 8 rows per step as one
# process of B=8 (the loader gives rank r rows 4r..4r+3 of each batch).
#  - fp32 (--precision fp32): the 10 losses within 1e-4 of one GPU's;
#  - bf16: within 5e-3 (the two plans differ in B, so their bf16 roundings do);
#  - ZeRO-1 (-z 1) against ZeRO-0: within 1e-5 in fp32, 2e-3 in bf16 (the global
#    norm is summed over shards in another order; the bf16 copy of a weight
#    can round the other way);
#  - ZeRO-0 averaging the gradients beside the backward (the default, per-layer
#    buckets) against after the step (--overlap 0): within 1e-5 in fp32;
#  - the same two processes started by hand (-pn 2 -pr R -pf DIR, as on
#    several nodes) and placed by mpirun's environment (-pi mpi) log the same
#    losses as --gpus 2, within 1e-5 in fp32;
#  - a checkpoint of the 2-GPU ZeRO-1 run at step 3, resumed on one GPU, goes
#    on with the 2-GPU run's losses (bf16 tolerance);
#  - negative control: one GPU with B=4 alone (half of each batch) differs from
#    the 2-GPU run by more than the bf16 tolerance, so the comparison can fail.
# Exits 77 (ctest: skipped) on a machine with fewer than two GPUs.
# usage: data_parallel_gpu.sh BIN_DIR CORPUS_DIR
set -euo pipefail
bin="$1"
corpus="$2"
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
if [[ "${gpus:-0}" -lt 2 ]]; then
  echo "skipped: data-parallel training needs 2 GPUs, this machine has ${gpus:-0}"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/text"
for f in 1790_george_washington_n 1791_george_washington_n 1792_george_washington_n 1793_george_washington_n; do
  cp "$corpus/text/sotu/$f.txt" "$work/text/"
done
"$bin/llmc-data" --tokenizer "$corpus/gpt2-bpe" --out "$work/shards" --name tiny --val-docs 1 "$work/text" >/dev/null

common=(-e d2 --channels 128 --heads 4 -t 64 -l 1e-3 -v 0 -s 0 --seed 11 --device cuda
        -i "$work/shards/tiny_train_*.bin")
# train NAME ARGS...: a run whose log goes to $work/NAME.
train() {
  local name="$1"; shift
  if ! "$bin/llmc-train" "${common[@]}" -o "$work/$name" "$@" > "$work/$name.txt" 2>&1; then
    cat "$work/$name.txt"; fail "llmc-train $name: $*"
  fi
  grep -q "^step" "$work/$name.txt" || { cat "$work/$name.txt"; fail "$name: no steps"; }
}
# compare A B TOLERANCE [STEPS]: the two logs' training losses, step by step.
compare() {
  python3 - "$work/$1/main.log" "$work/$2/main.log" "$3" "${4:-}" <<'PY'
import re, sys
def losses(path):
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^s:(\d+) trl:(\S+)", open(path).read(), re.M)}
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
steps = [int(s) for s in sys.argv[4].split(",")] if sys.argv[4] else sorted(a)
missing = [s for s in steps if s not in a or s not in b]
if missing: sys.exit(f"steps {missing} missing from a log")
worst = max(abs(a[s] - b[s]) for s in steps)
print(f"{sys.argv[1].split('/')[-2]} vs {sys.argv[2].split('/')[-2]}: {len(steps)} steps, largest difference {worst:.2e} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
}

for precision in fp32 bf16; do
  train one_$precision -b 8 -x 10 --precision $precision
  train two_$precision -b 4 -x 10 --precision $precision --gpus 2
  train zero1_$precision -b 4 -x 10 --precision $precision --gpus 2 -z 1
done
train after_fp32 -b 4 -x 10 --precision fp32 --gpus 2 --overlap 0
grep -q "data-parallel: 2 processes.*buckets beside the backward" "$work/two_bf16.txt" || { cat "$work/two_bf16.txt"; fail "no overlapped data-parallel run"; }
compare one_fp32 two_fp32 1e-4 || fail "2 GPUs differ from 1 in fp32"
compare one_bf16 two_bf16 5e-3 || fail "2 GPUs differ from 1 in bf16"
compare two_fp32 zero1_fp32 1e-5 || fail "ZeRO-1 differs from ZeRO-0 in fp32"
compare two_bf16 zero1_bf16 2e-3 || fail "ZeRO-1 differs from ZeRO-0 in bf16"
compare two_fp32 after_fp32 1e-5 || fail "averaging beside the backward differs from averaging after it"

# The same processes started by hand, as on several nodes (-pn, -pr, a folder
# to meet in: -pf), and as mpirun starts them (-pi mpi, the rank in OpenMPI's
# environment variables; -pg 2 puts rank 1 on GPU 1).
mkdir -p "$work/meet"
"$bin/llmc-train" "${common[@]}" -b 4 -x 10 --precision fp32 -pn 2 -pr 1 -pf "$work/meet" > "$work/manual_rank1.txt" 2>&1 &
other=$!
train manual -b 4 -x 10 --precision fp32 -pn 2 -pr 0 -pf "$work/meet"
wait $other || { cat "$work/manual_rank1.txt"; fail "manual: rank 1 failed"; }
compare two_fp32 manual 1e-5 || fail "processes started by hand differ from --gpus 2"
OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "$bin/llmc-train" "${common[@]}" -b 4 -x 10 --precision fp32 -pi mpi -pg 2 \
  -pf "$work/meet" > "$work/mpi_rank1.txt" 2>&1 &
other=$!
export OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2
train mpi -b 4 -x 10 --precision fp32 -pi mpi -pg 2 -pf "$work/meet"
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
wait $other || { cat "$work/mpi_rank1.txt"; fail "mpi: rank 1 failed"; }
compare two_fp32 mpi 1e-5 || fail "processes placed by MPI's environment differ from --gpus 2"

# A checkpoint of two GPUs resumed on one.
train resume -b 4 -x 6 -n 3 --gpus 2 -z 1
rm "$work/resume/model_00000006.bin" "$work/resume/state_00000006.bin"
cp -r "$work/resume" "$work/resume_one"
# (main.log numbers training steps from 0, as llm.c: s:3 trl is the step after
# the step-3 checkpoint.)
grep -vE '^s:[345] trl|^s:6 tel' "$work/resume/main.log" > "$work/resume_one/main.log"
train resume_one -b 8 -x 6 -n 3 -y 1
grep -q "resumed from .*model_00000003.bin (step 3)" "$work/resume_one.txt" || { cat "$work/resume_one.txt"; fail "did not resume from step 3"; }
compare resume resume_one 5e-3 3,4,5 || fail "the 2-GPU checkpoint resumed on 1 GPU left the curve"

# Negative control: half the batch on one GPU is not the 2-GPU run.
train half -b 4 -x 10
if compare two_bf16 half 5e-3; then fail "negative control: half the batch matched the 2-GPU run"; fi
echo "ok: the comparison tells half a batch from the whole"
echo "all data-parallel checks passed"
