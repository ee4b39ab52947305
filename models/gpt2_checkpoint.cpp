#include "gpt2_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "atomic_file.h"
#include "low_precision.h"

namespace llmc {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are little-endian: reading them here needs byte swapping");

namespace {

using Header = std::array<int32_t, kCheckpointHeaderWords>;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The configuration fields of the header, by word.
struct HeaderField {
  int word;
  const char* name;
  int64_t Gpt2Config::*member;
};
constexpr HeaderField kHeaderFields[] = {
    {2, "maxT", &Gpt2Config::T}, {3, "V", &Gpt2Config::V}, {4, "L", &Gpt2Config::L},
    {5, "H", &Gpt2Config::H},    {6, "C", &Gpt2Config::C}, {7, "Vp", &Gpt2Config::Vp},
};

uint16_t toBFloat16Bits(double x) {
  // NaN would lose its payload bits and could turn into infinity: make it quiet.
  if (std::isnan(x)) return 0x7FC0;
  // Rounding from the double itself, not through float, so that ties are
  // decided once, on the exact value; the result is a float, exactly.
  const auto rounded = static_cast<float>(roundToFormat(x, kBFloat16));
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(rounded) >> 16);
}

float fromBFloat16Bits(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

void writeTensor(AtomicFile& file, const HostTensor& t, bool bf16) {
  if (bf16) {
    std::vector<uint16_t> values(t.data.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] = toBFloat16Bits(t.data[i]);
    file.write(values.data(), values.size() * sizeof(uint16_t));
  } else {
    std::vector<float> values(t.data.begin(), t.data.end());
    file.write(values.data(), values.size() * sizeof(float));
  }
}

Header headerFor(const Gpt2Config& config, bool bf16) {
  Header header{};
  header[0] = kCheckpointMagic;
  header[1] = bf16 ? kCheckpointVersionBF16 : kCheckpointVersionF32;
  for (const HeaderField& field : kHeaderFields) {
    const int64_t value = config.*field.member;
    if (value <= 0 || value > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument(
          fmt::format("cannot write a checkpoint with {} = {}: it must be a positive int32", field.name, value));
    header[static_cast<size_t>(field.word)] = static_cast<int32_t>(value);
  }
  return header;
}

void checkTypes(const Gpt2Weights& weights, const std::string& path) {
  for (const Gpt2Parameter& p : gpt2Parameters(weights.config)) {
    const HostTensor& t = weights.*p.member;
    if (t.type != p.type || static_cast<int64_t>(t.data.size()) != p.type.elementCount())
      throw std::invalid_argument(fmt::format("{}: cannot write {} as {} with {} values: the configuration needs {}",
                                              path, p.name, t.type.str(), t.data.size(), p.type.str()));
  }
}

// a * b and a + b, stopping at the largest int64: sizes from a corrupt header
// must give a number too large for the file, not an overflow.
int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

int64_t elementCount(const Type& type) {
  int64_t n = 1;
  for (const Axis& axis : type.axes) n = saturatingMul(n, axis.size);
  return n;
}

Gpt2Config configFromHeader(const Header& header, const std::string& path) {
  if (header[0] != kCheckpointMagic)
    throw std::runtime_error(
        fmt::format("{}: bad magic {} in header[0] (expected {})", path, header[0], kCheckpointMagic));
  if (header[1] != kCheckpointVersionF32 && header[1] != kCheckpointVersionBF16)
    throw std::runtime_error(fmt::format("{}: unknown version {} in header[1] (expected {} = fp32 or {} = bf16)", path,
                                         header[1], kCheckpointVersionF32, kCheckpointVersionBF16));
  Gpt2Config config;
  for (const HeaderField& field : kHeaderFields) {
    const int32_t value = header[static_cast<size_t>(field.word)];
    if (value <= 0)
      throw std::runtime_error(
          fmt::format("{}: bad {} {} in header[{}] (expected > 0)", path, field.name, value, field.word));
    config.*field.member = value;
  }
  if (config.Vp < config.V)
    throw std::runtime_error(fmt::format("{}: bad Vp {} in header[7] (expected >= V = {})", path, config.Vp, config.V));
  if (config.C % config.H != 0)
    throw std::runtime_error(
        fmt::format("{}: bad H {} in header[5] (expected a divisor of C = {})", path, config.H, config.C));
  return config;
}

void readTensor(std::FILE* f, HostTensor& t, bool bf16, const std::string& path, const std::string& name) {
  auto readBytes = [&](void* data, size_t bytes) {
    if (std::fread(data, 1, bytes, f) != bytes)
      throw std::runtime_error(fmt::format("{}: read failed in parameter {}", path, name));
  };
  if (bf16) {
    std::vector<uint16_t> values(t.data.size());
    readBytes(values.data(), values.size() * sizeof(uint16_t));
    for (size_t i = 0; i < values.size(); ++i) t.data[i] = fromBFloat16Bits(values[i]);
  } else {
    std::vector<float> values(t.data.size());
    readBytes(values.data(), values.size() * sizeof(float));
    std::copy(values.begin(), values.end(), t.data.begin());
  }
}

}  // namespace

void writeCheckpoint(const std::string& path, const Gpt2Weights& weights, bool bf16) {
  checkTypes(weights, path);
  const Header header = headerFor(weights.config, bf16);
  // A fresh temporary, synced and renamed (common/atomic_file.h): whole or
  // not at all, and nothing left behind by a failure.
  AtomicFile file(path);
  file.write(header.data(), sizeof header);
  for (const Gpt2Parameter& p : gpt2Parameters(weights.config)) writeTensor(file, weights.*p.member, bf16);
  file.commit();
}

Gpt2Weights readCheckpoint(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::error_code error;
  const auto fileBytes = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) throw std::runtime_error(fmt::format("{}: cannot read its size: {}", path, error.message()));

  Header header;
  if (fileBytes < static_cast<int64_t>(sizeof header) || std::fread(header.data(), sizeof header, 1, file.get()) != 1)
    throw std::runtime_error(
        fmt::format("{}: truncated header: the file has {} bytes, the header is {} ({} int32 words)", path, fileBytes,
                    sizeof header, kCheckpointHeaderWords));
  const Gpt2Config config = configFromHeader(header, path);
  const bool bf16 = header[1] == kCheckpointVersionBF16;
  const int64_t bytesPerValue = bf16 ? 2 : 4;

  // Check the length before reading: name the parameter a short file cuts.
  const std::vector<Gpt2Parameter> parameters = gpt2Parameters(config);
  const int64_t available = fileBytes - static_cast<int64_t>(sizeof header);
  int64_t needed = 0;
  const Gpt2Parameter* cut = nullptr;
  for (const Gpt2Parameter& p : parameters) {
    needed = saturatingAdd(needed, saturatingMul(elementCount(p.type), bytesPerValue));
    if (needed > available && !cut) cut = &p;
  }
  if (cut)
    throw std::runtime_error(
        fmt::format("{}: truncated in parameter {}: the parameters need {} bytes after the header, the file has {}",
                    path, cut->name, needed, available));
  if (available > needed)
    throw std::runtime_error(fmt::format("{}: {} trailing bytes after the last parameter ({})", path,
                                         available - needed, parameters.back().name));

  Gpt2Weights weights = zeroGpt2Weights(config);
  for (const Gpt2Parameter& p : parameters) {
    HostTensor& t = weights.*p.member;
    readTensor(file.get(), t, bf16, path, p.name);
    // A diverged run's weights: training or sampling from them gives NaN only.
    const auto bad = std::find_if(t.data.begin(), t.data.end(), [](double x) { return !std::isfinite(x); });
    if (bad != t.data.end())
      throw std::runtime_error(fmt::format("{}: parameter {} holds a non-finite value ({}) at index {}", path, p.name,
                                           *bad, bad - t.data.begin()));
  }
  return weights;
}

}  // namespace llmc
