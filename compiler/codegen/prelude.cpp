#include "codegen/prelude.h"

#include <fmt/format.h>

namespace llmc {

const char* const kPrelude = R"(// Values are computed in fp32; bf16 arrays are stored as their upper 16 bits.
#define LLMC_INF __int_as_float(0x7f800000)
#define LLMC_NAN __int_as_float(0x7fffffff)
#define LLMC_INT_MIN (-2147483647 - 1)
typedef unsigned short llmc_bf16;

__device__ __forceinline__ float llmc_bf16_to_f32(llmc_bf16 v) { return __uint_as_float(((unsigned)v) << 16); }

// Round to nearest, ties to even, in one instruction (cvt.rn, sm_80 and later); NaN stays NaN (the
// canonical one). The bit-by-bit rounding this replaced took eight integer instructions a value and
// was most of the instructions of epilogues that store two bf16 arrays (H200, 2026-12-03: 33
// instructions an element in an attention probabilities' GEMM epilogue, latency-bound on one warp
// a scheduler).
__device__ __forceinline__ llmc_bf16 llmc_f32_to_bf16(float f) {
  llmc_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// f rounded to bf16's precision, kept as a float: the pair conversion with f in the upper half and
// zero in the lower is exactly that float.
__device__ __forceinline__ float llmc_round_bf16(float f) {
  unsigned u;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(f), "f"(0.0f));
  return __uint_as_float(u);
}
// Two floats as a pair of bf16 values, lo in the lower half: one instruction.
__device__ __forceinline__ unsigned llmc_pack_bf16x2(float lo, float hi) {
  unsigned u;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
  return u;
}

// 16 bytes at a 16-byte aligned address, unconverted; and 8 bf16 values so loaded, as floats.
__device__ __forceinline__ uint4 llmc_load_raw16(const llmc_bf16* p) { return *reinterpret_cast<const uint4*>(p); }
// 16 bytes GMEM -> SMEM without passing through registers (cp.async, sm_80 on), both 16-byte aligned: a thread
// issues all of its copies, then waits once for them all (llmc_copy_async_wait), one memory latency for a row.
__device__ __forceinline__ void llmc_copy16_async(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem)
               : "memory");
}
// 4 bytes the same way (cp.async.ca: the 16-byte form alone may bypass L1), both 4-byte aligned.
__device__ __forceinline__ void llmc_copy4_async(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void llmc_copy_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
__device__ __forceinline__ void llmc_unpack_bf16x8(const uint4& u, float (&v)[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}

// 8 consecutive bf16 values at a 16-byte aligned address, as floats: one 16-byte load.
__device__ __forceinline__ void llmc_load_bf16x8(const llmc_bf16* p, float (&v)[8]) { llmc_unpack_bf16x8(llmc_load_raw16(p), v); }

// 8 floats to consecutive bf16 values at a 16-byte aligned address (rounded as llmc_f32_to_bf16): one 16-byte store.
__device__ __forceinline__ void llmc_store_bf16x8(llmc_bf16* p, const float (&v)[8]) {
  unsigned w[4];
  for (int i = 0; i < 4; ++i) w[i] = llmc_pack_bf16x2(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// 8 consecutive fp32 values at a 32-byte aligned address, loaded and stored as two 16-byte accesses
// (8 scalar accesses a lane, lanes 8 values apart, touched a 32-byte sector each an instruction).
__device__ __forceinline__ void llmc_load_f32x8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void llmc_store_f32x8(float* p, const float (&v)[8]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

// The same where only the first n of the 8 lie inside the array (n < 8 at its very end; flat points,
// planning/flat_points.h): the missing values repeat the last one inside, the missing stores are skipped.
__device__ __forceinline__ void llmc_load_bf16x8_upto(const llmc_bf16* p, int n, float (&v)[8]) {
  if (n >= 8) return llmc_load_bf16x8(p, v);
  for (int i = 0; i < 8; ++i) v[i] = llmc_bf16_to_f32(p[i < n ? i : n - 1]);
}
__device__ __forceinline__ void llmc_store_bf16x8_upto(llmc_bf16* p, int n, const float (&v)[8]) {
  if (n >= 8) return llmc_store_bf16x8(p, v);
  for (int i = 0; i < n; ++i) p[i] = llmc_f32_to_bf16(v[i]);
}
__device__ __forceinline__ void llmc_load_f32x8_upto(const float* p, int n, float (&v)[8]) {
  if (n >= 8) return llmc_load_f32x8(p, v);
  for (int i = 0; i < 8; ++i) v[i] = p[i < n ? i : n - 1];
}
__device__ __forceinline__ void llmc_store_f32x8_upto(float* p, int n, const float (&v)[8]) {
  if (n >= 8) return llmc_store_f32x8(p, v);
  for (int i = 0; i < n; ++i) p[i] = v[i];
}

// 8 floats added atomically to consecutive fp32 values at a 16-byte aligned address: two vector
// reductions (red.global.add.v4.f32) from sm_90 on, eight scalar ones before.
__device__ __forceinline__ void llmc_add_f32x8(float* p, const float (&v)[8]) {
#if __CUDA_ARCH__ >= 900
  for (int i = 0; i < 8; i += 4)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p + i), "f"(v[i]), "f"(v[i + 1]), "f"(v[i + 2]),
                 "f"(v[i + 3])
                 : "memory");
#else
  for (int i = 0; i < 8; ++i) atomicAdd(p + i, v[i]);
#endif
}

// The hardware's tanh (codegen/cuda_writer.h, approximate_: bf16 storage): one MUFU instruction, relative
// error under 2^-10.9 (PTX ISA, tanh.approx.f32), below bf16's 2^-8. It replaced 1 - 2 / (exp(2x) + 1), six
// instructions on the critical path of a GELU epilogue.
__device__ __forceinline__ float llmc_fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A stream's pivot (analysis/streamability.h): a non-finite one (a masked-out
// -inf) would make every difference taken about it NaN; any finite one will do.
__device__ __forceinline__ float llmc_pivot(float p) { return isfinite(p) ? p : 0.0f; }

// exp(s - m) against a running max m: 0 for s = -inf, also while m is still -inf.
__device__ __forceinline__ float llmc_exp_shifted(float s, float m) { return s == -LLMC_INF ? 0.0f : expf(s - m); }

// exp(m_old - m_new), the online-softmax rescaling: 1 while the max has not moved.
__device__ __forceinline__ float llmc_rescale(float m_old, float m_new) { return m_old == m_new ? 1.0f : expf(m_old - m_new); }

// exp by the hardware's 2^x with results under 2^-126 flushed to zero (codegen/cuda_writer.h, approximate_:
// bf16 storage, whose smallest normal is the same): x log2(e), then one MUFU instruction (ex2.approx.ftz.f32,
// relative error 2^-22 plus the rounding of x log2(e)). __expf's ex2.approx.f32 keeps denormal results, for a
// compare and two more multiplies an exp (ptxas, sm_90a): per score element of attention's streams.
__device__ __forceinline__ float llmc_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// a / b and 1 / sqrt(x) by the hardware's approximations with subnormal inputs and results flushed to zero
// (2 ulp for |b| in [2^-126, 2^126]): __fdividef's and rsqrtf's forms keep subnormals, for a compare and two
// multiplies more each (ptxas, sm_90a): per score element of attention's backward streams.
__device__ __forceinline__ float llmc_fast_divide(float a, float b) {
  float y;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
// 1 / b as div.approx.ftz takes it: a / b there is a times this (a division by a value computed once,
// as CudaWriter::reciprocal emits it, is then one multiply per quotient).
__device__ __forceinline__ float llmc_fast_reciprocal(float b) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(b));
  return y;
}
__device__ __forceinline__ float llmc_fast_rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define LLMC_LOG2E 1.4426950408889634f
__device__ __forceinline__ float llmc_fast_exp(float x) { return llmc_ex2(x * LLMC_LOG2E); }

// exp(a - b) as one fused multiply-add and ex2: b log2(e) is the same for all the a it is taken from (a row's
// statistic, computed once).
__device__ __forceinline__ float llmc_fast_exp_difference(float a, float b) { return llmc_ex2(fmaf(a, LLMC_LOG2E, -b * LLMC_LOG2E)); }

// exp(s - m) against a running max m >= s, for streams: 0 for s = -inf (2^-inf); while m is still -inf (and
// so is s), the offset is 0 instead of +inf. The test is on m, once a row, not on each element.
__device__ __forceinline__ float llmc_fast_exp_shifted(float s, float m) {
  return llmc_ex2(fmaf(s, LLMC_LOG2E, m == -LLMC_INF ? 0.0f : -m * LLMC_LOG2E));
}
__device__ __forceinline__ float llmc_fast_rescale(float m_old, float m_new) {
  return m_old == m_new ? 1.0f : llmc_ex2(fmaf(m_old, LLMC_LOG2E, -m_new * LLMC_LOG2E));
}
)";

std::string translationUnit(const char* tileLibrary, const std::string& function) {
  return fmt::format("{}{}{}", tileLibrary ? fmt::format("#include <{}>\n\n", tileLibrary) : "", kPrelude, function);
}

}  // namespace llmc
