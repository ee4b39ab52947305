// FNV-1a, 64 bits: the kernel and module caches' keys, which name an entry's
// file. Not a cryptographic hash: the entries' integrity is a SHA-256 of their
// contents (common/sha256.h), checked before anything in them is used.
#pragma once

#include <cstdint>
#include <string_view>

namespace llmc::cuda {

class Fnv1a64 {
 public:
  Fnv1a64& add(std::string_view bytes) {
    for (unsigned char c : bytes) {
      state_ ^= c;
      state_ *= kPrime;
    }
    return *this;
  }

  // A field of a composite key: its length goes in first, so that ("ab", "c")
  // and ("a", "bc") hash differently.
  Fnv1a64& addField(std::string_view bytes) {
    const uint64_t size = bytes.size();
    add(std::string_view(reinterpret_cast<const char*>(&size), sizeof size));
    return add(bytes);
  }

  uint64_t value() const { return state_; }

 private:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t state_ = kOffsetBasis;
};

inline uint64_t fnv1a64(std::string_view bytes) { return Fnv1a64().add(bytes).value(); }

}  // namespace llmc::cuda
