#include "train_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <utility>

#include "atomic_file.h"
#include "checked_math.h"

namespace llmc {

namespace {

constexpr int32_t kMagic = 20261129;
constexpr int32_t kVersion = 1;
constexpr int kHeaderWords = 256;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path, what));
}

}  // namespace

void writeTrainState(const std::string& path, const TrainState& state) {
  const auto& opt = state.optimizer;
  if (opt.m.size() != opt.v.size()) throw std::invalid_argument("optimizer moments of different sizes");
  if (opt.step < 0 || opt.step > INT32_MAX) bad(path, fmt::format("step {} does not fit header[2] (int32)", opt.step));
  if (state.loaderState.size() > INT32_MAX)
    bad(path, fmt::format("a loader state of {} bytes does not fit header[5] (int32)", state.loaderState.size()));
  std::vector<int32_t> header(kHeaderWords, 0);
  const uint64_t count = opt.m.size();
  header[0] = kMagic;
  header[1] = kVersion;
  header[2] = static_cast<int32_t>(opt.step);
  header[3] = static_cast<int32_t>(count & 0xffffffffu);
  header[4] = static_cast<int32_t>(count >> 32);
  header[5] = static_cast<int32_t>(state.loaderState.size());
  // A fresh temporary, synced and renamed (common/atomic_file.h): a full disk
  // fails here and leaves no temporary behind to keep it full.
  AtomicFile out(path);
  out.write(header.data(), kHeaderWords * 4);
  for (const auto* moments : {&opt.m, &opt.v}) {
    std::vector<float> values(moments->begin(), moments->end());
    out.write(values.data(), values.size() * 4);
  }
  out.write(state.loaderState.data(), state.loaderState.size());
  out.commit();
}

namespace {

// The file's size that the header's counts imply, or an error naming them:
// counts near 2^61 must not wrap the product into a small number that passes.
uint64_t expectedSize(const std::string& path, uint64_t count, int32_t loaderBytes) {
  const auto moments = checkedMul<uint64_t>(count, 8);
  const auto total = moments ? checkedAdd<uint64_t>(*moments, kHeaderWords * 4ull + static_cast<uint64_t>(loaderBytes))
                             : std::nullopt;
  if (!total)
    bad(path, fmt::format("a parameter count of {} in header[3..4] is impossibly large (its moments would need more "
                          "than 2^64 bytes)",
                          count));
  return *total;
}

// Moments as read back: finite, and the second one never negative; else the
// step would turn every weight into NaN.
void checkMoments(const std::string& path, const char* name, const std::vector<float>& values, bool second) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]))
      bad(path, fmt::format("the optimizer's {} holds a non-finite value ({}) at index {}; refusing to resume from it",
                            name, values[i], i));
    if (second && values[i] < 0)
      bad(path, fmt::format("the optimizer's {} holds a negative value ({}) at index {}; refusing to resume from it",
                            name, values[i], i));
  }
}

}  // namespace

TrainState readTrainState(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot open");
  std::vector<int32_t> header(kHeaderWords, 0);
  in.read(reinterpret_cast<char*>(header.data()), kHeaderWords * 4);
  if (in.gcount() != kHeaderWords * 4) bad(path, "too short for its 1024-byte header");
  if (header[0] != kMagic) bad(path, fmt::format("bad magic {} in header[0] (expected {})", header[0], kMagic));
  if (header[1] != kVersion) bad(path, fmt::format("unknown version {} in header[1] (expected {})", header[1], kVersion));
  if (header[2] < 0) bad(path, fmt::format("negative step {} in header[2]", header[2]));
  if (header[5] < 0) bad(path, fmt::format("negative loader state size {} in header[5]", header[5]));
  const uint64_t count = static_cast<uint32_t>(header[3]) | (static_cast<uint64_t>(static_cast<uint32_t>(header[4])) << 32);
  const uint64_t expected = expectedSize(path, count, header[5]);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) bad(path, "cannot read its size: " + ec.message());
  if (size != expected)
    bad(path, fmt::format("is {} bytes, but its header (header[3..5]: {} parameters, {} loader bytes) says {} ({})",
                          size, count, header[5], expected, size < expected ? "truncated" : "trailing bytes"));
  TrainState state;
  state.optimizer.step = header[2];
  const std::pair<std::vector<double>*, const char*> moments[] = {{&state.optimizer.m, "first moment m"},
                                                                  {&state.optimizer.v, "second moment v"}};
  for (const auto& [moment, name] : moments) {
    std::vector<float> values(count);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
    if (!in) bad(path, fmt::format("read failed in the {}", name));
    checkMoments(path, name, values, moment == &state.optimizer.v);
    moment->assign(values.begin(), values.end());
  }
  state.loaderState.resize(static_cast<size_t>(header[5]));
  in.read(reinterpret_cast<char*>(state.loaderState.data()), header[5]);
  if (!in) bad(path, "read failed in the loader state");
  return state;
}

std::string modelCheckpointPath(const std::string& dir, int64_t step) {
  return fmt::format("{}/model_{:08d}.bin", dir, step);
}

std::string stateCheckpointPath(const std::string& dir, int64_t step) {
  return fmt::format("{}/state_{:08d}.bin", dir, step);
}

int64_t newestCheckpointStep(const std::string& dir) {
  int64_t newest = -1;
  std::error_code ec;
  static const std::regex kState(R"(state_(\d{8})\.bin)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch match;
    std::string name = entry.path().filename().string();
    if (!std::regex_match(name, match, kState)) continue;
    int64_t step = std::stoll(match[1]);
    if (step > newest && std::filesystem::exists(modelCheckpointPath(dir, step))) newest = step;
  }
  return newest;
}

std::vector<int64_t> checkpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  static const std::regex kModel(R"(model_(\d{8})\.bin)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, kModel)) steps.push_back(std::stoll(match[1]));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<int64_t> checkpointsToDelete(const std::vector<int64_t>& steps, int64_t written, int64_t keep,
                                         int64_t majorEvery) {
  if (keep <= 0) return {};
  // The checkpoints up to the one just written, newest first: the first
  // `keep` stay, and of the older ones the major ones.
  std::vector<int64_t> upToWritten;
  for (int64_t step : steps)
    if (step <= written) upToWritten.push_back(step);
  std::sort(upToWritten.rbegin(), upToWritten.rend());
  std::vector<int64_t> doomed;
  for (size_t i = static_cast<size_t>(keep); i < upToWritten.size(); ++i)
    if (!(majorEvery > 0 && upToWritten[i] % majorEvery == 0)) doomed.push_back(upToWritten[i]);
  std::sort(doomed.begin(), doomed.end());
  return doomed;
}

void deleteCheckpoint(const std::string& dir, int64_t step) {
  std::filesystem::remove(modelCheckpointPath(dir, step));
  std::filesystem::remove(stateCheckpointPath(dir, step));
}

}  // namespace llmc
