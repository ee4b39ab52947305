// Batches of training windows from llm.c token shards (shard.h), with llm.c's
// semantics: a batch is one contiguous run of B*T+1 tokens; row b of the
// inputs is tokens [b*T, b*T+T) and row b of the targets the same shifted by
// one. Within a shard the start advances by B*T per batch (by
// numProcesses*B*T, each process taking its own B*T+1 slice of it), and a
// shard is done when fewer than that plus one token remain; after the last
// shard the next epoch starts at the first.
//
// With shuffle, each epoch visits the shards in a fresh order and each shard's
// batches in a fresh order, both drawn from (seed, epoch, shard) alone: every
// process computes the same orders, and the position in them is all the state
// there is, so state()/restore() resume bit-exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace llmc {

struct DataLoaderOptions {
  bool shuffle = false;
  uint64_t seed = 0;
  // Data-parallel training: each process gets a disjoint slice of every batch.
  int processRank = 0;
  int numProcesses = 1;
};

// The position of the next batch. Only meaningful for a loader over the same
// shards with the same B, T and options.
struct DataLoaderState {
  int64_t epoch = 0;
  int64_t shardCursor = 0;  // index into this epoch's order of shards
  int64_t batchCursor = 0;  // index into the current shard's order of batches

  bool operator==(const DataLoaderState&) const = default;
};

// Row-major [B, T] token ids.
struct TokenBatch {
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
};

class DataLoader {
 public:
  // Expands globPattern (sorted by name) and checks every shard's header and
  // size up front. Throws std::runtime_error when nothing matches, a shard is
  // malformed, or a shard is smaller than one batch; std::invalid_argument for
  // bad B, T or options.
  DataLoader(const std::string& globPattern, int B, int T, DataLoaderOptions options = {});

  // The next batch; the reference stays valid until the next call.
  const TokenBatch& next();

  // Batches in one pass over all shards (for this process).
  int64_t batchesPerEpoch() const;

  DataLoaderState state() const { return state_; }
  // Continues from a state() of a loader built the same way. Throws
  // std::invalid_argument if the state is outside this loader's shards.
  void restore(const DataLoaderState& state);
  // Back to the first batch of epoch 0.
  void reset() { restore(DataLoaderState{}); }

  const std::vector<std::filesystem::path>& shardPaths() const { return shardPaths_; }

 private:
  // Makes the shard under the cursor the open one, with its batch order.
  void enterCurrentShard();
  std::vector<int64_t> shardOrder(int64_t epoch) const;
  std::vector<int64_t> batchOrder(int64_t epoch, int64_t shard) const;

  int B_;
  int T_;
  DataLoaderOptions options_;
  std::vector<std::filesystem::path> shardPaths_;
  std::vector<int64_t> shardBatchCounts_;

  DataLoaderState state_;
  // Caches derived from state_: the shard order of epoch orderEpoch_, and the
  // open shard (an index into shardPaths_) with its batch order in that epoch.
  int64_t orderEpoch_ = -1;
  std::vector<int64_t> shardOrder_;
  int64_t openShard_ = -1;
  std::vector<int64_t> batchOrder_;
  std::ifstream openFile_;

  std::vector<uint16_t> window_;  // B*T+1 tokens as read
  TokenBatch batch_;
};

}  // namespace llmc
