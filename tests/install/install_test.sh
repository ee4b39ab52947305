#!/usr/bin/env bash
# The ctest install: `cmake --install` into a fresh prefix gives an llmc that
# runs from anywhere with no environment variable set (issue 24 item 4):
#  - the prefix holds bin/ and share/llmc/{diagrams,targets} (and device/ where
#    the CUDA toolkit was found);
#  - the prefix is moved after installing, so nothing can come from a path
#    compiled in at install time, and the tools are run from another working
#    directory, every LLMC_* variable unset;
#  - the tools say where they read their data, and it must be the moved
#    prefix's share/llmc (not the source tree, which is still on this disk
#    and would otherwise hide a broken lookup): llmc-compile through the
#    target folder it names for an unknown arch, llmc-train through the
#    diagrams it compiles;
#  - llmc-compile compiles an installed diagram for an installed target, to
#    IR and to CUDA; llmc-train --device cpu trains a tiny model two steps on
#    a shard this script writes (no corpus, no tokenizer needed).
# usage: install_test.sh BUILD_DIR
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/installed" > "$work/install.txt" || { cat "$work/install.txt"; fail "cmake --install"; }
mv "$work/installed" "$work/moved"
prefix="$work/moved"
for f in bin/llmc-compile bin/llmc-train bin/llmc-data bin/llmc-sample share/llmc/diagrams/gpt2/model.dg \
         share/llmc/diagrams/lib/softmax.dg share/llmc/targets/sm_80.json share/llmc/targets/sm_90a.json; do
  [[ -f "$prefix/$f" ]] || fail "$f is not installed"
done
# With the toolkit (its GPU runtime's tests built), llmc-run compiles
# kernels and needs the device headers; without it, it is installed too but
# only checks a diagram and says it cannot run.
[[ -x "$prefix/bin/llmc-run" ]] || fail "bin/llmc-run is not installed"
if [[ -x "$build/bin/jit_gpu_test" ]]; then
  [[ -f "$prefix/share/llmc/device/vector_access.h" ]] || fail "llmc-run is installed without the device headers"
  [[ -f "$prefix/share/llmc/device/llmc/gemm_sm90.cuh" ]] || fail "the device headers' llmc/ folder is not installed"
fi
echo "ok: installed and moved to $prefix"

# Another working directory, and no LLMC_* variable.
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
while read -r name; do unset "$name"; done < <(env | sed -n 's/^\(LLMC_[A-Za-z0-9_]*\)=.*/\1/p')
[[ -z "$(env | grep '^LLMC_' || true)" ]] || fail "LLMC_* variables still set"

# The target folder llmc-compile reads is the installed one.
sizes=B=2,T=8,maxT=8,L=1,C=16,H=2,V=60,Vp=64
if "$prefix/bin/llmc-compile" "$prefix/share/llmc/diagrams/gpt2/model.dg" --set "$sizes" --arch sm_99 --emit cuda \
    > out.txt 2>&1; then
  cat out.txt; fail "llmc-compile accepted --arch sm_99"
fi
grep -qF "target files in $prefix/share/llmc/targets" out.txt || { cat out.txt; fail "llmc-compile did not read the installed targets"; }
echo "ok: llmc-compile reads $prefix/share/llmc/targets"

"$prefix/bin/llmc-compile" "$prefix/share/llmc/diagrams/gpt2/model.dg" --set "$sizes" --emit ir > ir.txt \
  || { cat ir.txt; fail "llmc-compile --emit ir"; }
grep -q "^diagram gpt2(" ir.txt || { head -20 ir.txt; fail "no gpt2 diagram in the IR"; }
"$prefix/bin/llmc-compile" "$prefix/share/llmc/diagrams/gpt2/model.dg" --set "$sizes" --grad --arch sm_90a \
  --emit cuda > step.cu || fail "llmc-compile --emit cuda"
grep -q "__global__" step.cu || fail "no kernel in the emitted CUDA"
echo "ok: llmc-compile compiles the installed GPT-2 to IR and to CUDA for sm_90a"

# A shard of 4000 tokens in llm.c's format (docs/formats.md section 1).
python3 - shard_train_000000.bin <<'PY'
import random, struct, sys
random.seed(24)
tokens = [random.randrange(50257) for _ in range(4000)]
header = struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253))
with open(sys.argv[1], "wb") as f:
    f.write(header + struct.pack(f"<{len(tokens)}H", *tokens))
PY
"$prefix/bin/llmc-train" --device cpu -i 'shard_train_*.bin' -e d1 --channels 32 --heads 2 -b 2 -t 16 -x 2 \
  -v 0 -s 0 -o run > train.txt 2>&1 || { cat train.txt; fail "llmc-train --device cpu"; }
grep -qF "compiled the training step from $prefix/share/llmc/diagrams" train.txt \
  || { cat train.txt; fail "llmc-train did not compile the installed diagrams"; }
grep -q "^step     2/2 | loss " train.txt || { cat train.txt; fail "llmc-train did not take two steps"; }
[[ -f run/model_00000002.bin ]] || { ls run; fail "no checkpoint written"; }
echo "ok: llmc-train --device cpu trained two steps from the installed diagrams"

"$prefix/bin/llmc-sample" run/model_00000002.bin --ids -n 4 > sample.txt 2>&1 || { cat sample.txt; fail "llmc-sample"; }
[[ "$(tail -1 sample.txt | wc -w)" -eq 4 ]] || { cat sample.txt; fail "llmc-sample did not print 4 ids"; }
echo "ok: llmc-sample samples from that checkpoint with the installed diagrams"
