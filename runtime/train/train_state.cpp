#include "train_state.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>

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
  std::vector<int32_t> header(kHeaderWords, 0);
  const uint64_t count = opt.m.size();
  header[0] = kMagic;
  header[1] = kVersion;
  header[2] = static_cast<int32_t>(opt.step);
  header[3] = static_cast<int32_t>(count & 0xffffffffu);
  header[4] = static_cast<int32_t>(count >> 32);
  header[5] = static_cast<int32_t>(state.loaderState.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) bad(tmp, "cannot open for writing");
    out.write(reinterpret_cast<const char*>(header.data()), kHeaderWords * 4);
    for (const auto* moments : {&opt.m, &opt.v}) {
      std::vector<float> values(moments->begin(), moments->end());
      out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
    }
    out.write(reinterpret_cast<const char*>(state.loaderState.data()),
              static_cast<std::streamsize>(state.loaderState.size()));
    out.flush();
    if (!out) bad(tmp, "write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) bad(path, "cannot rename " + tmp + ": " + ec.message());
}

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
  const uint64_t expected = kHeaderWords * 4ull + 8ull * count + static_cast<uint64_t>(header[5]);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size != expected)
    bad(path, fmt::format("is {} bytes, but its header (header[3..5]: {} parameters, {} loader bytes) says {}", size,
                          count, header[5], expected));
  TrainState state;
  state.optimizer.step = header[2];
  for (auto* moments : {&state.optimizer.m, &state.optimizer.v}) {
    std::vector<float> values(count);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
    moments->assign(values.begin(), values.end());
  }
  state.loaderState.resize(static_cast<size_t>(header[5]));
  in.read(reinterpret_cast<char*>(state.loaderState.data()), header[5]);
  if (!in) bad(path, "read failed");
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

}  // namespace llmc
