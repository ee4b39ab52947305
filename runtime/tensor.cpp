#include "tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "strided_loop.h"

namespace llmc {

int64_t flatIndex(const Type& type, const AxisIndex& index) {
  if (index.size() != type.axes.size())
    throw std::runtime_error(
        fmt::format("an index into {} names {} axes", type.str(), index.size()));
  int64_t offset = 0;
  for (const Axis& axis : type.axes) {
    auto it = index.find(axis.name);
    if (it == index.end())
      throw std::runtime_error(
          fmt::format("an index into {} does not name axis '{}'", type.str(), axis.name));
    if (it->second < 0 || it->second >= axis.size)
      throw std::runtime_error(
          fmt::format("index {} is out of range for axis {}:{}", it->second, axis.name, axis.size));
    offset = offset * axis.size + it->second;
  }
  return offset;
}

double& HostTensor::at(const AxisIndex& index) {
  return data[static_cast<size_t>(flatIndex(type, index))];
}

double HostTensor::at(const AxisIndex& index) const {
  return data[static_cast<size_t>(flatIndex(type, index))];
}

HostTensor zeros(const Type& type) {
  return HostTensor{type, std::vector<double>(static_cast<size_t>(type.elementCount()), 0.0)};
}

HostTensor permuteTo(const HostTensor& tensor, const Type& target) {
  if (!tensor.type.sameAxisSet(target))
    throw std::runtime_error(
        fmt::format("cannot permute {} to {}", tensor.type.str(), target.str()));
  HostTensor out = zeros(target);
  const std::vector<int64_t> srcStrides = rowMajorStrides(tensor.type);
  std::vector<int64_t> shape, readStrides;
  for (const Axis& axis : target.axes) {
    shape.push_back(axis.size);
    readStrides.push_back(strideOf(tensor.type, srcStrides, axis.name));
  }
  stridedCopy(shape, out.data.data(), rowMajorStrides(target), tensor.data.data(), readStrides);
  return out;
}

namespace {

// The squared norm of a - b (b laid out as a) and of b's finite values.
// Equal values differ by nothing, infinities included: a score masked with
// -inf matches where both hold it.
std::pair<double, double> squaredNorms(const HostTensor& a, const HostTensor& b) {
  // Compare layouts only: give a's axes b's dtype so that permuteTo accepts them.
  Type aLayout = a.type;
  aLayout.dtype = b.type.dtype;
  if (!aLayout.sameAxisSet(b.type))
    throw std::runtime_error(
        fmt::format("cannot compare {} with {}: different axes", a.type.str(), b.type.str()));
  const HostTensor bAligned = permuteTo(b, aLayout);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = bAligned.data[i];
    if (x != y) {
      const double d = x - y;
      diff += std::isnan(d) ? std::numeric_limits<double>::infinity() : d * d;
    }
    if (std::isfinite(y)) norm += y * y;
  }
  return {diff, norm};
}

}  // namespace

double differenceNorm(const HostTensor& a, const HostTensor& b) {
  return std::sqrt(squaredNorms(a, b).first);
}

double relativeError(const HostTensor& a, const HostTensor& b) {
  const auto [diff, norm] = squaredNorms(a, b);
  if (norm == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

HostTensor randomNormal(const Type& type, uint64_t seed, double mean, double stddev) {
  HostTensor out = zeros(type);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, stddev);
  for (double& v : out.data) v = normal(rng);
  return out;
}

HostTensor randomUniform(const Type& type, uint64_t seed, double lo, double hi) {
  HostTensor out = zeros(type);
  std::mt19937_64 rng(seed);
  if (isFloat(type.dtype)) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    for (double& v : out.data) v = uniform(rng);
  } else {
    const auto first = static_cast<int64_t>(std::ceil(lo));
    const auto last = static_cast<int64_t>(std::ceil(hi)) - 1;
    if (first > last)
      throw std::runtime_error(
          fmt::format("no whole numbers in [{}, {}) to fill {}", lo, hi, type.str()));
    std::uniform_int_distribution<int64_t> uniform(first, last);
    for (double& v : out.data) v = static_cast<double>(uniform(rng));
  }
  return out;
}

}  // namespace llmc
