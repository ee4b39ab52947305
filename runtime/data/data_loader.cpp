#include "data_loader.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "shard.h"

namespace llmc {
namespace {

std::vector<std::filesystem::path> expandGlob(const std::string& pattern) {
  glob_t matches{};
  const int status = glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::filesystem::path> paths(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  globfree(&matches);
  if (status == GLOB_NOMATCH || (status == 0 && paths.empty())) {
    throw std::runtime_error(fmt::format("no shard files match \"{}\"", pattern));
  }
  if (status != 0) throw std::runtime_error(fmt::format("cannot expand \"{}\" (glob error {})", pattern, status));
  std::sort(paths.begin(), paths.end());
  return paths;
}

// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose output is fixed
// by its definition, unlike std::shuffle and std distributions, which differ
// between standard libraries. Orders must not change with the compiler.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t rejectFrom = UINT64_MAX - UINT64_MAX % n;
    uint64_t value;
    do value = next();
    while (value >= rejectFrom);
    return value % n;
  }

 private:
  uint64_t state_;
};

// The seed of one order: stream 0 orders an epoch's shards, stream s+1 the
// batches of shard s in that epoch.
uint64_t streamSeed(uint64_t seed, int64_t epoch, int64_t stream) {
  SplitMix64 mix(seed);
  SplitMix64 mixEpoch(mix.next() ^ static_cast<uint64_t>(epoch));
  return mixEpoch.next() ^ static_cast<uint64_t>(stream);
}

std::vector<int64_t> permutation(int64_t n, bool shuffle, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  SplitMix64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

}  // namespace

DataLoader::DataLoader(const std::string& globPattern, int B, int T, DataLoaderOptions options)
    : B_(B), T_(T), options_(options) {
  if (B <= 0) throw std::invalid_argument(fmt::format("batch size B must be positive, got {}", B));
  if (T <= 0) throw std::invalid_argument(fmt::format("sequence length T must be positive, got {}", T));
  if (options.numProcesses <= 0) {
    throw std::invalid_argument(fmt::format("numProcesses must be positive, got {}", options.numProcesses));
  }
  if (options.processRank < 0 || options.processRank >= options.numProcesses) {
    throw std::invalid_argument(
        fmt::format("processRank {} is outside [0, {})", options.processRank, options.numProcesses));
  }

  shardPaths_ = expandGlob(globPattern);
  const int64_t stride = static_cast<int64_t>(options.numProcesses) * B * T;
  for (const std::filesystem::path& path : shardPaths_) {
    const int64_t tokens = readShardHeader(path).tokenCount;
    // The last process's slice of the last batch reads one token past the
    // batch, for the final target.
    const int64_t batchCount = (tokens - 1) / stride;
    if (batchCount == 0) {
      const std::string needed = options.numProcesses == 1
                                     ? fmt::format("B*T+1 = {}", stride + 1)
                                     : fmt::format("processes*B*T+1 = {}", stride + 1);
      throw std::runtime_error(
          fmt::format("{} holds {} tokens, fewer than one batch of {}; lower -b or -t", path.string(), tokens, needed));
    }
    shardBatchCounts_.push_back(batchCount);
  }

  window_.resize(static_cast<size_t>(B) * T + 1);
  batch_.inputs.resize(static_cast<size_t>(B) * T);
  batch_.targets.resize(static_cast<size_t>(B) * T);
}

int64_t DataLoader::batchesPerEpoch() const {
  return std::accumulate(shardBatchCounts_.begin(), shardBatchCounts_.end(), int64_t{0});
}

std::vector<int64_t> DataLoader::shardOrder(int64_t epoch) const {
  return permutation(static_cast<int64_t>(shardPaths_.size()), options_.shuffle,
                     streamSeed(options_.seed, epoch, 0));
}

std::vector<int64_t> DataLoader::batchOrder(int64_t epoch, int64_t shard) const {
  return permutation(shardBatchCounts_[shard], options_.shuffle, streamSeed(options_.seed, epoch, shard + 1));
}

void DataLoader::restore(const DataLoaderState& state) {
  const auto shardCount = static_cast<int64_t>(shardPaths_.size());
  if (state.epoch < 0 || state.shardCursor < 0 || state.shardCursor >= shardCount) {
    throw std::invalid_argument(fmt::format("data loader state (epoch {}, shard cursor {}) is outside {} shards",
                                            state.epoch, state.shardCursor, shardCount));
  }
  const int64_t shard = shardOrder(state.epoch)[state.shardCursor];
  if (state.batchCursor < 0 || state.batchCursor >= shardBatchCounts_[shard]) {
    throw std::invalid_argument(fmt::format("data loader state: batch cursor {} is outside the {} batches of {}",
                                            state.batchCursor, shardBatchCounts_[shard],
                                            shardPaths_[shard].string()));
  }
  state_ = state;
}

void DataLoader::enterCurrentShard() {
  if (orderEpoch_ != state_.epoch) {
    shardOrder_ = shardOrder(state_.epoch);
    orderEpoch_ = state_.epoch;
    openShard_ = -1;  // its batch order belonged to another epoch
  }
  const int64_t shard = shardOrder_[state_.shardCursor];
  if (shard == openShard_) return;
  batchOrder_ = batchOrder(state_.epoch, shard);
  openFile_ = std::ifstream(shardPaths_[shard], std::ios::binary);
  if (!openFile_) throw std::runtime_error(fmt::format("{}: cannot open", shardPaths_[shard].string()));
  openShard_ = shard;
}

const TokenBatch& DataLoader::next() {
  enterCurrentShard();
  const int64_t tokensPerProcess = static_cast<int64_t>(B_) * T_;
  const int64_t batch = batchOrder_[state_.batchCursor];
  const int64_t start = (batch * options_.numProcesses + options_.processRank) * tokensPerProcess;
  openFile_.clear();  // a failed read before must not poison this one
  openFile_.seekg(kShardHeaderBytes + start * static_cast<int64_t>(sizeof(uint16_t)));
  if (!openFile_.read(reinterpret_cast<char*>(window_.data()),
                      static_cast<std::streamsize>(window_.size() * sizeof(uint16_t)))) {
    throw std::runtime_error(fmt::format("{}: cannot read tokens [{}, {}) (did the file change?)",
                                         shardPaths_[openShard_].string(), start,
                                         start + static_cast<int64_t>(window_.size())));
  }
  std::copy(window_.begin(), window_.end() - 1, batch_.inputs.begin());
  std::copy(window_.begin() + 1, window_.end(), batch_.targets.begin());

  if (++state_.batchCursor == shardBatchCounts_[openShard_]) {
    state_.batchCursor = 0;
    if (++state_.shardCursor == static_cast<int64_t>(shardPaths_.size())) {
      state_.shardCursor = 0;
      ++state_.epoch;
    }
  }
  return batch_;
}

}  // namespace llmc
