// Device code: 16-byte global memory accesses. A warp's 32 of them cover four
// whole 128-byte segments, the unit the memory system moves; the address must
// be 16-byte aligned.
#pragma once

namespace llmc::device {

__device__ __forceinline__ float4 load16(const float* address) { return *reinterpret_cast<const float4*>(address); }

__device__ __forceinline__ void store16(float* address, float4 value) { *reinterpret_cast<float4*>(address) = value; }

}  // namespace llmc::device
