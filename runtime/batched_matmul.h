// The interpreter's hot loop: a batch of dense matrix products on the CPU.
#pragma once

#include <cstdint>

namespace llmc {

// c[b, i, j] = sum over p of a[b, i, p] * b[b, p, j], accumulated in T, for
// contiguous row-major a: [batch, m, k], b: [batch, k, n], c: [batch, m, n].
// c is overwritten. Large products are spread over the hardware threads.
template <class T>
void batchedMatmul(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t k, int64_t n);

extern template void batchedMatmul<float>(const float*, const float*, float*, int64_t, int64_t,
                                          int64_t, int64_t);
extern template void batchedMatmul<double>(const double*, const double*, double*, int64_t, int64_t,
                                           int64_t, int64_t);

}  // namespace llmc
