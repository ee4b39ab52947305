#include "shard.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "atomic_file.h"

namespace llmc {
namespace {

// The format is little-endian; reading and writing memory as is relies on it.
static_assert(std::endian::native == std::endian::little, "shard I/O assumes a little-endian host");

std::runtime_error shardError(const std::filesystem::path& path, const std::string& what) {
  return std::runtime_error(fmt::format("{}: {}", path.string(), what));
}

std::ifstream openForReading(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw shardError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  return in;
}

// Reads the header from in (at its start) and checks it against the file size.
ShardHeader readAndCheckHeader(std::ifstream& in, const std::filesystem::path& path) {
  std::error_code error;
  const auto fileBytes = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) throw shardError(path, fmt::format("cannot get the file size: {}", error.message()));
  if (fileBytes < kShardHeaderBytes) {
    throw shardError(path, fmt::format("{} bytes, too short for the {}-byte header", fileBytes, kShardHeaderBytes));
  }
  std::array<int32_t, kShardHeaderWords> header{};
  if (!in.read(reinterpret_cast<char*>(header.data()), kShardHeaderBytes)) {
    throw shardError(path, "cannot read the header");
  }
  if (header[0] != kShardMagic) {
    throw shardError(path, fmt::format("wrong magic {} in header[0] (expected {})", header[0], kShardMagic));
  }
  if (header[1] != kShardVersion) {
    throw shardError(path, fmt::format("unsupported version {} in header[1] (expected {})", header[1], kShardVersion));
  }
  const int64_t count = header[2];
  if (count < 0) throw shardError(path, fmt::format("negative token count {} in header[2]", count));
  const int64_t expectedBytes = kShardHeaderBytes + 2 * count;
  if (fileBytes != expectedBytes) {
    throw shardError(path, fmt::format("{} bytes, but header[2] = {} tokens needs {} + 2*{} = {} bytes", fileBytes,
                                       count, kShardHeaderBytes, count, expectedBytes));
  }
  return ShardHeader{count};
}

}  // namespace

void writeShard(const std::filesystem::path& path, std::span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw shardError(path, fmt::format("{} tokens do not fit the int32 count of header[2]", tokens.size()));
  }
  std::array<int32_t, kShardHeaderWords> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  // Whole or not at all, through a fresh temporary (common/atomic_file.h).
  AtomicFile out(path);
  out.write(header.data(), kShardHeaderBytes);
  out.write(tokens.data(), tokens.size_bytes());
  out.commit();
}

ShardHeader readShardHeader(const std::filesystem::path& path) {
  std::ifstream in = openForReading(path);
  return readAndCheckHeader(in, path);
}

std::vector<uint16_t> readShard(const std::filesystem::path& path) {
  std::ifstream in = openForReading(path);
  const ShardHeader header = readAndCheckHeader(in, path);
  std::vector<uint16_t> tokens(static_cast<size_t>(header.tokenCount));
  if (!in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2))) {
    throw shardError(path, "cannot read the tokens");
  }
  return tokens;
}

}  // namespace llmc
