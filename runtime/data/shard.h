// llm.c's token shard files: a header of 256 little-endian int32 words
// (header[0] = magic 20240520, header[1] = version 1, header[2] = the token
// count, the rest zero), then the tokens as little-endian uint16.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace llmc {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderWords = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderWords * sizeof(int32_t);

struct ShardHeader {
  int64_t tokenCount;
};

// Writes the shard through a fresh temporary renamed into place
// (common/atomic_file.h), so that a reader never sees a partial shard and a
// failure leaves nothing behind. Throws std::runtime_error naming the file.
void writeShard(const std::filesystem::path& path, std::span<const uint16_t> tokens);

// Reads and checks the header: magic, version, and a file size of exactly
// 1024 + 2 * count bytes. Throws std::runtime_error naming the file and the
// field that is wrong.
ShardHeader readShardHeader(const std::filesystem::path& path);

// The tokens of a shard, checked as readShardHeader does.
std::vector<uint16_t> readShard(const std::filesystem::path& path);

}  // namespace llmc
