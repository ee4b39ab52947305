// Arrays on the host: what the reference interpreter consumes and produces.
//
// Values are held as doubles whatever the dtype (integers and bools exactly),
// row-major in the order of type.axes, the last axis innermost.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// A position along some axes, by axis name.
using AxisIndex = std::map<std::string, int64_t>;

struct HostTensor {
  Type type;
  std::vector<double> data;

  int64_t elementCount() const { return type.elementCount(); }
  // The element at a position given by axis name; every axis must be named.
  double& at(const AxisIndex& index);
  double at(const AxisIndex& index) const;
};

// The row-major offset of a position; throws on a missing axis or an index
// out of range.
int64_t flatIndex(const Type& type, const AxisIndex& index);

HostTensor zeros(const Type& type);

// The same array laid out in target's axis order. target must have the same
// dtype and the same axes (names and sizes) in any order.
HostTensor permuteTo(const HostTensor& tensor, const Type& target);

// ||a - b||_2 / ||b||_2 with elements matched by axis name (the dtypes may
// differ; the axes must be the same set). Equal elements differ by nothing,
// equal infinities too; ||b|| counts b's finite elements. 0 when both are
// zero, infinity when only b is; a NaN difference is infinite.
double relativeError(const HostTensor& a, const HostTensor& b);
// ||a - b|| (b's layout, as relativeError), finite where relativeError is not (b all zeros).
double differenceNorm(const HostTensor& a, const HostTensor& b);

// Seeded (std::mt19937_64) random tensors. Values are not rounded to the
// dtype's precision; the interpreter rounds bf16/f16 inputs itself.
HostTensor randomNormal(const Type& type, uint64_t seed, double mean = 0, double stddev = 1);
// Floats uniform in [lo, hi); integer and bool dtypes get whole numbers in
// [lo, hi) (token ids, gather indices).
HostTensor randomUniform(const Type& type, uint64_t seed, double lo = 0, double hi = 1);

}  // namespace llmc
