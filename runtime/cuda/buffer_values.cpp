#include "buffer_values.h"

#include <cstdint>
#include <cstring>

namespace llmc::cuda {

namespace {

// The upper half of f rounded to nearest, ties to even (NaN stays NaN), as the
// generated code's llmc_f32_to_bf16 rounds.
uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

std::vector<unsigned char> bufferBytes(const BufferDesc& b, const std::vector<double>& values) {
  std::vector<unsigned char> bytes(static_cast<size_t>(b.bytes));
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (b.dtype == "f32") {
      const float f = static_cast<float>(v);
      std::memcpy(&bytes[4 * i], &f, 4);
    } else if (b.dtype == "bf16") {
      const uint16_t h = bf16Bits(static_cast<float>(v));
      std::memcpy(&bytes[2 * i], &h, 2);
    } else if (b.dtype == "f64") {
      std::memcpy(&bytes[8 * i], &v, 8);
    } else if (b.dtype == "i32") {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(&bytes[4 * i], &x, 4);
    } else if (b.dtype == "u16") {
      const uint16_t x = static_cast<uint16_t>(v);
      std::memcpy(&bytes[2 * i], &x, 2);
    } else {
      bytes[i] = v != 0;
    }
  }
  return bytes;
}

std::vector<double> bufferValues(const BufferDesc& b, const std::vector<unsigned char>& bytes) {
  std::vector<double> out(static_cast<size_t>(b.elements));
  for (size_t i = 0; i < out.size(); ++i) {
    if (b.dtype == "f32") {
      float f;
      std::memcpy(&f, &bytes[4 * i], 4);
      out[i] = f;
    } else if (b.dtype == "bf16") {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      const uint32_t u = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &u, 4);
      out[i] = f;
    } else if (b.dtype == "f64") {
      std::memcpy(&out[i], &bytes[8 * i], 8);
    } else if (b.dtype == "i32") {
      int32_t x;
      std::memcpy(&x, &bytes[4 * i], 4);
      out[i] = x;
    } else if (b.dtype == "u16") {
      uint16_t x;
      std::memcpy(&x, &bytes[2 * i], 2);
      out[i] = x;
    } else {
      out[i] = bytes[i];
    }
  }
  return out;
}

}  // namespace llmc::cuda
