// Walking several arrays at once through one index space, each with its own
// strides: the loop every data-movement and elementwise kernel of the
// interpreter is built on.
//
// An index space is a shape (one extent per dimension); each of K arrays gives
// one stride per dimension (in elements). A stride of 0 repeats the array along
// that dimension (broadcasting, or accumulating into one element).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// Row-major strides of a type's layout: the last axis has stride 1.
inline std::vector<int64_t> rowMajorStrides(const Type& type) {
  std::vector<int64_t> strides(type.axes.size());
  int64_t stride = 1;
  for (size_t d = strides.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= type.axes[d].size;
  }
  return strides;
}

// The stride of `axis` in `type`'s row-major layout, or 0 when the type lacks
// the axis (the array is broadcast along it).
inline int64_t strideOf(const Type& type, const std::vector<int64_t>& strides,
                        const std::string& axis) {
  for (size_t d = 0; d < type.axes.size(); ++d)
    if (type.axes[d].name == axis) return strides[d];
  return 0;
}

template <size_t K>
using Offsets = std::array<int64_t, K>;

// Calls rowFn(offsets, length, innerStrides) once per innermost row of the
// index space, in row-major order: offsets[k] is array k's element offset at
// the start of the row, innerStrides[k] its step along the row. Dimensions of
// extent 1 are dropped and neighbouring dimensions that every array walks
// contiguously are merged first, so that rows are as long as possible and the
// caller's inner loop does most of the work.
template <size_t K, class RowFn>
void forEachRow(std::vector<int64_t> shape, std::array<std::vector<int64_t>, K> strides,
                RowFn&& rowFn) {
  for (int64_t extent : shape)
    if (extent == 0) return;

  // Simplify: keep dimensions of extent > 1, merging one into the previous kept
  // dimension when, for every array, stepping the outer one equals running
  // through the whole inner one.
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, K> steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool mergeable = !dims.empty();
    for (size_t k = 0; k < K && mergeable; ++k)
      mergeable = steps[k].back() == strides[k][d] * shape[d];
    if (mergeable) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < K; ++k) steps[k].back() = strides[k][d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < K; ++k) steps[k].push_back(strides[k][d]);
    }
  }

  Offsets<K> offsets{};
  Offsets<K> innerStrides{};
  if (dims.empty()) {  // a single element
    rowFn(offsets, int64_t{1}, innerStrides);
    return;
  }
  const size_t inner = dims.size() - 1;
  for (size_t k = 0; k < K; ++k) innerStrides[k] = steps[k][inner];

  std::vector<int64_t> counter(inner, 0);
  while (true) {
    rowFn(offsets, dims[inner], innerStrides);
    // Advance the odometer over the outer dimensions.
    size_t d = inner;
    while (d-- > 0) {
      for (size_t k = 0; k < K; ++k) offsets[k] += steps[k][d];
      if (++counter[d] < dims[d]) break;
      for (size_t k = 0; k < K; ++k) offsets[k] -= steps[k][d] * dims[d];
      counter[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// dst[i] = src[i] for every index of the space, through the given strides.
template <class T>
void stridedCopy(const std::vector<int64_t>& shape, T* dst, std::vector<int64_t> dstStrides,
                 const T* src, std::vector<int64_t> srcStrides) {
  forEachRow<2>(shape, {std::move(dstStrides), std::move(srcStrides)},
                [&](const Offsets<2>& at, int64_t n, const Offsets<2>& step) {
                  T* d = dst + at[0];
                  const T* s = src + at[1];
                  for (int64_t i = 0; i < n; ++i) d[i * step[0]] = s[i * step[1]];
                });
}

}  // namespace llmc
