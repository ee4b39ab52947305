// Rounding to the 16-bit float formats, to emulate storing a value as bf16 or
// f16 while computing in f32/f64.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ir/ir.h"

namespace llmc {

// A binary floating-point format narrower than double.
struct FloatFormat {
  int significandBits;  // including the implicit leading bit
  int minExponent;      // exponent of the smallest normal number
  double maxFinite;
};

inline constexpr FloatFormat kBFloat16{8, -126, 0x1.fep127};
inline constexpr FloatFormat kFloat16{11, -14, 65504.0};

// x rounded to the nearest value of the format, ties to even, overflowing to
// infinity; subnormals of the format are honoured. NaN stays NaN.
inline double roundToFormat(double x, const FloatFormat& format) {
  const double magnitude = std::fabs(x);
  if (std::isnan(x) || std::isinf(x) || magnitude == 0) return x;
  if (magnitude < std::ldexp(1.0, format.minExponent)) {
    // Subnormal in the format: a fixed quantum. Scaling by a power of two is
    // exact, so nearbyint (ties to even in the default rounding mode) decides.
    const double quantum = std::ldexp(1.0, format.minExponent - (format.significandBits - 1));
    return std::nearbyint(x / quantum) * quantum;
  }
  // Normal: round the double's significand to the format's width on the bits.
  // A carry out of the significand correctly bumps the exponent.
  constexpr int kDoubleFractionBits = 52;
  const int dropped = kDoubleFractionBits - (format.significandBits - 1);
  const uint64_t lowMask = (uint64_t{1} << dropped) - 1;
  uint64_t bits = std::bit_cast<uint64_t>(x);
  const uint64_t keptLsb = (bits >> dropped) & 1;
  bits = (bits + (lowMask >> 1) + keptLsb) & ~lowMask;
  const double rounded = std::bit_cast<double>(bits);
  if (std::fabs(rounded) > format.maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

inline bool isLowPrecision(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// Rounds to a bf16 or f16 dtype; any other dtype leaves x unchanged.
inline double roundToDType(double x, DType dtype) {
  if (dtype == DType::BF16) return roundToFormat(x, kBFloat16);
  if (dtype == DType::F16) return roundToFormat(x, kFloat16);
  return x;
}

}  // namespace llmc
