// The batch loader over llm.c shards: windows, shard exhaustion and epochs,
// data-parallel slices, deterministic shuffling, bit-exact resume, errors.
// Shards hold consecutive numbers, so a token tells where it was read from.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "data_loader.h"
#include "data_test_support.h"
#include "shard.h"

namespace fs = std::filesystem;
using llmc::DataLoader;
using llmc::DataLoaderOptions;
using llmc::DataLoaderState;
using llmc::TokenBatch;
using llmc::testing::DataTempDir;

namespace {

// A shard of the tokens first, first+1, ..., first+count-1.
void writeCountingShard(const fs::path& path, int first, int count) {
  std::vector<uint16_t> tokens(count);
  for (int i = 0; i < count; ++i) tokens[i] = static_cast<uint16_t>(first + i);
  llmc::writeShard(path, tokens);
}

// Where each of the next n batches starts: its first input token.
std::vector<int32_t> nextStarts(DataLoader& loader, int n) {
  std::vector<int32_t> starts;
  for (int i = 0; i < n; ++i) starts.push_back(loader.next().inputs[0]);
  return starts;
}

std::string pattern(const DataTempDir& dir, const std::string& glob) { return (dir.path / glob).string(); }

}  // namespace

TEST_CASE("data loader: batches are contiguous windows, targets shifted by one", "[data_loader]") {
  DataTempDir dir("loader_windows");
  writeCountingShard(dir.path / "train_000000.bin", 0, 100);
  const int B = 2, T = 4;
  DataLoader loader(pattern(dir, "train_*.bin"), B, T);
  // A batch needs B*T+1 = 9 tokens and the start advances by 8: (100-1)/8 = 12.
  REQUIRE(loader.batchesPerEpoch() == 12);

  for (int k = 0; k < 12; ++k) {
    const TokenBatch& batch = loader.next();
    REQUIRE(batch.inputs.size() == B * T);
    REQUIRE(batch.targets.size() == B * T);
    for (int i = 0; i < B * T; ++i) {
      CHECK(batch.inputs[i] == k * B * T + i);  // row b is tokens [b*T, b*T+T) of the window
      CHECK(batch.targets[i] == batch.inputs[i] + 1);
    }
  }
  // The last batch read token 96 as its final target; 97..99 are never used.
  CHECK(loader.state() == DataLoaderState{1, 0, 0});
  CHECK(loader.next().inputs[0] == 0);  // epoch 1 starts over
}

TEST_CASE("data loader: shards in name order, each exhausted when less than a batch is left", "[data_loader]") {
  DataTempDir dir("loader_shards");
  const int B = 1, T = 10;
  // Written out of order; numbered by content so the order shows in the tokens.
  writeCountingShard(dir.path / "d_002.bin", 2000, 21);  // exactly 2 batches: 2*B*T+1 tokens
  writeCountingShard(dir.path / "d_000.bin", 0, 11);     // exactly 1 batch: B*T+1
  writeCountingShard(dir.path / "d_001.bin", 1000, 20);  // 2*B*T tokens: still 1 batch
  DataLoader loader(pattern(dir, "d_*.bin"), B, T);
  CHECK(loader.shardPaths() ==
        std::vector<fs::path>{dir.path / "d_000.bin", dir.path / "d_001.bin", dir.path / "d_002.bin"});
  CHECK(loader.batchesPerEpoch() == 4);
  CHECK(nextStarts(loader, 9) == std::vector<int32_t>{0, 1000, 2000, 2010, 0, 1000, 2000, 2010, 0});
  CHECK(loader.state() == DataLoaderState{2, 1, 0});
}

TEST_CASE("data loader: processes read disjoint slices of each batch", "[data_loader]") {
  DataTempDir dir("loader_processes");
  writeCountingShard(dir.path / "train.bin", 0, 100);
  const int B = 2, T = 4;
  DataLoader rank0(pattern(dir, "train.bin"), B, T, {.processRank = 0, .numProcesses = 2});
  DataLoader rank1(pattern(dir, "train.bin"), B, T, {.processRank = 1, .numProcesses = 2});
  // A global batch is 2 processes * 8 tokens; (100-1)/16 = 6 per epoch.
  CHECK(rank0.batchesPerEpoch() == 6);
  CHECK(nextStarts(rank0, 7) == std::vector<int32_t>{0, 16, 32, 48, 64, 80, 0});
  CHECK(nextStarts(rank1, 7) == std::vector<int32_t>{8, 24, 40, 56, 72, 88, 8});
  CHECK(rank1.next().targets.back() == 32);  // 24 + 8: the token after its slice
}

TEST_CASE("data loader: shuffling permutes shards and batches per epoch, from the seed alone", "[data_loader]") {
  DataTempDir dir("loader_shuffle");
  const int B = 1, T = 4;
  for (int s = 0; s < 3; ++s) writeCountingShard(dir.path / fmt::format("s_{:03d}.bin", s), 1000 * s, 41);
  const std::string shards = pattern(dir, "s_*.bin");
  DataLoader plain(shards, B, T);
  DataLoader first(shards, B, T, {.shuffle = true, .seed = 7});
  DataLoader second(shards, B, T, {.shuffle = true, .seed = 7});
  DataLoader otherSeed(shards, B, T, {.shuffle = true, .seed = 8});
  const int64_t perEpoch = first.batchesPerEpoch();
  REQUIRE(perEpoch == 30);

  const std::vector<int32_t> unshuffled = nextStarts(plain, static_cast<int>(perEpoch));
  std::set<std::vector<int32_t>> epochOrders;
  std::set<int32_t> firstShards;
  for (int epoch = 0; epoch < 4; ++epoch) {
    const std::vector<int32_t> starts = nextStarts(first, static_cast<int>(perEpoch));
    CHECK(starts == nextStarts(second, static_cast<int>(perEpoch)));
    CHECK(starts != nextStarts(otherSeed, static_cast<int>(perEpoch)));
    // Every batch once per epoch, one shard after another.
    std::vector<int32_t> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == unshuffled);
    for (int s = 0; s < 3; ++s) {
      const int32_t shard = starts[10 * s] / 1000;
      for (int i = 0; i < 10; ++i) CHECK(starts[10 * s + i] / 1000 == shard);
    }
    CHECK(starts != unshuffled);
    epochOrders.insert(starts);
    firstShards.insert(starts[0] / 1000);
  }
  CHECK(epochOrders.size() == 4);  // a fresh order every epoch
  CHECK(firstShards.size() > 1);   // the shard order changes too
}

TEST_CASE("data loader: the shuffled order is fixed by its definition", "[data_loader]") {
  // The orders come from SplitMix64 and Fisher-Yates, not from the standard
  // library, so they are the same with every compiler; a checkpoint's data
  // state must mean the same batches in every build.
  DataTempDir dir("loader_shuffle_fixed");
  writeCountingShard(dir.path / "a.bin", 0, 81);
  writeCountingShard(dir.path / "b.bin", 1000, 41);
  DataLoader loader(pattern(dir, "*.bin"), 1, 8, {.shuffle = true, .seed = 42});
  // Two epochs of 10 + 5 batches, as a Python transcription of the same
  // definition also gives them.
  CHECK(nextStarts(loader, 30) == std::vector<int32_t>{1032, 1000, 1024, 1016, 1008, 32, 48, 72, 24, 8,
                                                       0,    40,   16,   56,   64,   1008, 1024, 1032, 1000, 1016,
                                                       32,   72,   56,   16,   40,   0,    8,    48,   24,   64});
}

TEST_CASE("data loader: state and restore resume with the same batches", "[data_loader]") {
  DataTempDir dir("loader_resume");
  for (int s = 0; s < 3; ++s) writeCountingShard(dir.path / fmt::format("s_{:03d}.bin", s), 1000 * s, 29 + 8 * s);
  const std::string shards = pattern(dir, "s_*.bin");
  const int B = 2, T = 4;
  for (const bool shuffle : {false, true}) {
    const DataLoaderOptions options{.shuffle = shuffle, .seed = 3};
    DataLoader original(shards, B, T, options);
    const int64_t perEpoch = original.batchesPerEpoch();
    // Stop at every point of two epochs: mid-shard, at shard ends, at the epoch end.
    for (int stopAfter = 0; stopAfter < 2 * perEpoch; ++stopAfter) {
      original.reset();
      for (int i = 0; i < stopAfter; ++i) original.next();
      const DataLoaderState saved = original.state();
      std::vector<std::vector<int32_t>> expected;
      for (int i = 0; i < 5; ++i) expected.push_back(original.next().inputs);

      DataLoader resumed(shards, B, T, options);
      resumed.restore(saved);
      CAPTURE(shuffle, stopAfter);
      for (int i = 0; i < 5; ++i) CHECK(resumed.next().inputs == expected[i]);
    }
  }
}

TEST_CASE("data loader: reset goes back to the first batch", "[data_loader]") {
  DataTempDir dir("loader_reset");
  writeCountingShard(dir.path / "train.bin", 0, 50);
  DataLoader loader(pattern(dir, "train.bin"), 1, 4, {.shuffle = true, .seed = 1});
  const std::vector<int32_t> firstPass = nextStarts(loader, 20);
  loader.reset();
  CHECK(loader.state() == DataLoaderState{});
  CHECK(nextStarts(loader, 20) == firstPass);
}

TEST_CASE("data loader: errors", "[data_loader]") {
  DataTempDir dir("loader_errors");
  writeCountingShard(dir.path / "train_000.bin", 0, 5000);
  writeCountingShard(dir.path / "val_000.bin", 0, 1000);

  SECTION("nothing matches") {
    const std::string glob = pattern(dir, "test_*.bin");
    CHECK_THROWS_WITH(DataLoader(glob, 4, 1024), "no shard files match \"" + glob + "\"");
  }
  SECTION("a shard smaller than one batch") {
    CHECK_THROWS_WITH(DataLoader(pattern(dir, "val_*.bin"), 4, 1024),
                      (dir.path / "val_000.bin").string() +
                          " holds 1000 tokens, fewer than one batch of B*T+1 = 4097; lower -b or -t");
    CHECK_NOTHROW(DataLoader(pattern(dir, "val_*.bin"), 3, 333));  // 3*333+1 = 1000 fits exactly
  }
  SECTION("a shard smaller than one batch of all processes") {
    CHECK_THROWS_WITH(DataLoader(pattern(dir, "train_*.bin"), 4, 1024, {.processRank = 1, .numProcesses = 2}),
                      (dir.path / "train_000.bin").string() +
                          " holds 5000 tokens, fewer than one batch of processes*B*T+1 = 8193; lower -b or -t");
  }
  SECTION("a malformed shard is reported up front") {
    llmc::testing::writeFile(dir.path / "train_001.bin", "not a shard");
    CHECK_THROWS_WITH(DataLoader(pattern(dir, "train_*.bin"), 1, 8),
                      (dir.path / "train_001.bin").string() + ": 11 bytes, too short for the 1024-byte header");
  }
  SECTION("bad sizes and ranks") {
    const std::string glob = pattern(dir, "train_*.bin");
    CHECK_THROWS_WITH(DataLoader(glob, 0, 8), "batch size B must be positive, got 0");
    CHECK_THROWS_WITH(DataLoader(glob, 1, -1), "sequence length T must be positive, got -1");
    CHECK_THROWS_WITH(DataLoader(glob, 1, 8, {.numProcesses = 0}), "numProcesses must be positive, got 0");
    CHECK_THROWS_WITH(DataLoader(glob, 1, 8, {.processRank = 2, .numProcesses = 2}),
                      "processRank 2 is outside [0, 2)");
  }
  SECTION("a state from elsewhere") {
    DataLoader loader(pattern(dir, "train_*.bin"), 1, 1000);  // 4 batches in 1 shard
    CHECK_THROWS_WITH(loader.restore({0, 1, 0}), "data loader state (epoch 0, shard cursor 1) is outside 1 shards");
    CHECK_THROWS_WITH(loader.restore({0, 0, 4}),
                      "data loader state: batch cursor 4 is outside the 4 batches of " +
                          (dir.path / "train_000.bin").string());
    CHECK(loader.state() == DataLoaderState{});
  }
}
