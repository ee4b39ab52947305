// SHA-256 (FIPS 180-4): the integrity hash of the disk caches' entries. A
// cache entry carries the SHA-256 of its contents and is used only when the
// contents hash to it again, so a torn, truncated or altered entry is never
// loaded. (The key of an entry may stay a fast non-cryptographic hash: it
// only names the file.)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmc {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  Sha256& add(std::string_view bytes);
  // The digest of everything added; the object is spent afterwards.
  Digest finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t blockBytes_ = 0;
  uint64_t totalBytes_ = 0;
};

Sha256::Digest sha256(std::string_view bytes);
// 64 lowercase hex digits.
std::string toHex(const Sha256::Digest& digest);
std::string sha256Hex(std::string_view bytes);

}  // namespace llmc
