// llm.c token shards: the exact bytes written, the round trip, and an exact
// error for each way a shard file can be wrong.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data_test_support.h"
#include "shard.h"

namespace fs = std::filesystem;
using llmc::readShard;
using llmc::readShardHeader;
using llmc::writeShard;
using llmc::testing::DataTempDir;
using llmc::testing::readFileBytes;
using llmc::testing::writeFile;

namespace {

int32_t headerWord(const std::string& bytes, int index) {
  int32_t word;
  std::memcpy(&word, bytes.data() + 4 * index, 4);
  return word;
}

void setHeaderWord(std::string& bytes, int index, int32_t word) { std::memcpy(bytes.data() + 4 * index, &word, 4); }

}  // namespace

TEST_CASE("shard: written as llm.c lays it out, and read back", "[shard]") {
  DataTempDir dir("shard_roundtrip");
  const fs::path path = dir.path / "train_000000.bin";
  const std::vector<uint16_t> tokens = {50256, 15496, 995, 0, 65535, 7};
  writeShard(path, tokens);

  const std::string bytes = readFileBytes(path);
  REQUIRE(bytes.size() == 1024 + 2 * tokens.size());
  CHECK(headerWord(bytes, 0) == 20240520);
  CHECK(headerWord(bytes, 1) == 1);
  CHECK(headerWord(bytes, 2) == 6);
  for (int i = 3; i < 256; ++i) CHECK(headerWord(bytes, i) == 0);
  // Little-endian uint16 tokens after the header: 50256 = 0xC450.
  CHECK(static_cast<unsigned char>(bytes[1024]) == 0x50);
  CHECK(static_cast<unsigned char>(bytes[1025]) == 0xC4);

  CHECK(readShardHeader(path).tokenCount == 6);
  CHECK(readShard(path) == tokens);
  // Nothing beside it: no temporary left.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("shard: an empty shard is valid", "[shard]") {
  DataTempDir dir("shard_empty");
  const fs::path path = dir.path / "empty.bin";
  writeShard(path, {});
  CHECK(fs::file_size(path) == 1024);
  CHECK(readShard(path).empty());
}

TEST_CASE("shard: each malformed file gives an exact error", "[shard]") {
  DataTempDir dir("shard_errors");
  const fs::path good = dir.path / "good.bin";
  writeShard(good, std::vector<uint16_t>{1, 2, 3, 4});
  std::string bytes = readFileBytes(good);
  const fs::path bad = dir.path / "train_000.bin";
  const std::string name = bad.string();
  const auto expectError = [&](const std::string& message) {
    writeFile(bad, bytes);
    CHECK_THROWS_WITH(readShardHeader(bad), message);
    CHECK_THROWS_WITH(readShard(bad), message);
  };

  SECTION("missing") {
    CHECK_THROWS_WITH(readShard(dir.path / "nothing.bin"),
                      (dir.path / "nothing.bin").string() + ": cannot open: No such file or directory");
  }
  SECTION("wrong magic") {
    setHeaderWord(bytes, 0, 1234);
    expectError(name + ": wrong magic 1234 in header[0] (expected 20240520)");
  }
  SECTION("a model checkpoint's magic") {
    setHeaderWord(bytes, 0, 20240326);
    expectError(name + ": wrong magic 20240326 in header[0] (expected 20240520)");
  }
  SECTION("wrong version") {
    setHeaderWord(bytes, 1, 2);
    expectError(name + ": unsupported version 2 in header[1] (expected 1)");
  }
  SECTION("negative count") {
    setHeaderWord(bytes, 2, -5);
    expectError(name + ": negative token count -5 in header[2]");
  }
  SECTION("truncated tokens") {
    bytes.resize(bytes.size() - 3);
    expectError(name + ": 1029 bytes, but header[2] = 4 tokens needs 1024 + 2*4 = 1032 bytes");
  }
  SECTION("trailing bytes") {
    bytes += "xy";
    expectError(name + ": 1034 bytes, but header[2] = 4 tokens needs 1024 + 2*4 = 1032 bytes");
  }
  SECTION("count larger than the file") {
    setHeaderWord(bytes, 2, 1000);
    expectError(name + ": 1032 bytes, but header[2] = 1000 tokens needs 1024 + 2*1000 = 3024 bytes");
  }
  SECTION("truncated header") {
    bytes.resize(100);
    expectError(name + ": 100 bytes, too short for the 1024-byte header");
  }
}

TEST_CASE("shard: writing into a missing folder names the file", "[shard]") {
  DataTempDir dir("shard_write_error");
  const fs::path path = dir.path / "no/such/folder/x.bin";
  CHECK_THROWS_WITH(writeShard(path, std::vector<uint16_t>{1}),
                    path.string() + ": cannot create a temporary file beside it: No such file or directory");
}
