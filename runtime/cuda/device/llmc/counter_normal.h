// Normal numbers by position: the four values of block b of stream `key` are
// a function of (key, b) alone (the Philox4x32-10 counter-based generator of
// Salmon et al., SC 2011, then the Box-Muller transform in float), so that a
// GPU kernel and the host make the same values, in any order, on any number
// of threads. GPT-2's fresh weights are made so on the device
// (runtime/train/device_initialisation.h) and on the host
// (models/gpt2_weights.cpp) alike; the two differ only by the last bits of
// logf, sinf and cosf (a few units in the last place).
//
// Plain C++ for the host and NVRTC's device code alike.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LLMC_HOST_DEVICE __host__ __device__
#else
#include <math.h>
#define LLMC_HOST_DEVICE
#endif

namespace llmc::counter_normal {

struct Four {
  float z[4];
};

LLMC_HOST_DEVICE inline unsigned mul_hi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}

// A uniform in (0, 1) from the top 24 bits, exact in float.
LLMC_HOST_DEVICE inline float uniform(unsigned bits) {
  return (static_cast<float>(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

struct Bits {
  unsigned x[4];
};

// Philox4x32-10 of counter (c0, c1, c2, c3) under key (k0, k1).
LLMC_HOST_DEVICE inline Bits philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;  // the key schedule's Weyl sequence
    const unsigned hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

// Standard normal values 4b .. 4b+3 of stream `key`: the counter is b.
LLMC_HOST_DEVICE inline Four normals(unsigned long long key, unsigned long long block) {
  const Bits bits = philox4x32_10(static_cast<unsigned>(block), static_cast<unsigned>(block >> 32), 0, 0,
                                  static_cast<unsigned>(key), static_cast<unsigned>(key >> 32));
  Four out;
  for (int pair = 0; pair < 2; ++pair) {
    const float radius = sqrtf(-2.0f * logf(uniform(bits.x[2 * pair])));
    const float angle = 6.28318530717958647692f * uniform(bits.x[2 * pair + 1]);
    out.z[2 * pair] = radius * cosf(angle);
    out.z[2 * pair + 1] = radius * sinf(angle);
  }
  return out;
}

// mean + stddev * (standard normal value i of stream `key`), in float.
LLMC_HOST_DEVICE inline float normal_at(unsigned long long key, unsigned long long i, float mean, float stddev) {
  return mean + stddev * normals(key, i / 4).z[i % 4];
}

}  // namespace llmc::counter_normal
