#!/bin/sh
# Builds gemm_tiles_bench (a standalone tool: the project's CMake does not require CUDA).
# usage: build_gemm_tiles_bench.sh OUTPUT   (CUDA at $CUDA_HOME, default /usr/local/cuda)
# The binary links libstdc++ statically and libnvrtc/libcublas from $CUDA_HOME/lib64 (rpath), so
# it runs on the GPU machine, which has the same CUDA 13.0 there.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${1:?usage: build_gemm_tiles_bench.sh OUTPUT}
g++ -std=c++20 -O2 -Wall -Wextra -pthread -I"$cuda/include" -I"$here/../../runtime/cuda" \
  "$here/gemm_tiles_bench.cpp" -o "$out" \
  -L"$cuda/lib64/stubs" -lcuda -L"$cuda/lib64" -lnvrtc -lcublas -Wl,-rpath,"$cuda/lib64" \
  -static-libstdc++ -static-libgcc
