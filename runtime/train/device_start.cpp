#include "device_start.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmc {

namespace {

// Element j of a launch is element first + j of its parameter; each thread
// makes the four of one generator block.
constexpr const char* kSource = R"(#include "llmc/counter_normal.h"
extern "C" __global__ void llmc_gpt2_start(float* __restrict__ out, long long first, long long count, long long drawn,
                                           int kind, float mean, float stddev, unsigned long long key) {
  const long long blocks = (first + count + 3) / 4 - first / 4;
  for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x) {
    const long long block = first / 4 + b;
    llmc::counter_normal::Four z = {{0.0f, 0.0f, 0.0f, 0.0f}};
    if (kind == 0 && 4 * block < drawn) z = llmc::counter_normal::normals(key, (unsigned long long)block);
    for (int e = 0; e < 4; ++e) {
      const long long i = 4 * block + e;
      if (i < first || i >= first + count) continue;
      out[i - first] = i >= drawn ? 0.0f : kind == 1 ? 1.0f : kind == 0 ? mean + stddev * z.z[e] : 0.0f;
    }
  }
}
)";

int kindOf(const Gpt2ParameterStart& s) {
  switch (s.kind) {
    case Gpt2ParameterStart::Kind::Normal: return 0;
    case Gpt2ParameterStart::Kind::One: return 1;
    case Gpt2ParameterStart::Kind::Zero: return 2;
  }
  return 2;
}

// The part of a parameter inside the shard: its first element and how many.
std::pair<int64_t, int64_t> inShard(const PackedStart& p, int64_t shardOffset, int64_t shardCount) {
  const int64_t count = p.start.parameter.type.elementCount();
  const int64_t from = std::max(p.offset, shardOffset), to = std::min(p.offset + count, shardOffset + shardCount);
  return {from - p.offset, std::max<int64_t>(0, to - from)};
}

}  // namespace

cuda::KernelSource deviceStartSource(const std::string& arch) {
  cuda::KernelSource s;
  s.name = "llmc_gpt2_start";
  s.source = kSource;
  s.arch = arch;
  s.launchSignature = "llmc_gpt2_start(float*, long long, long long, long long, int, float, float, unsigned long long)";
  return s;
}

void fillStart(cuda::Kernel& fill, CUdeviceptr shard, int64_t shardOffset, int64_t shardCount,
               const std::vector<PackedStart>& parameters, CUstream stream) {
  cuda::check(cuda::driver().memsetD8Async(shard, 0, static_cast<size_t>(shardCount) * 4, stream), "cuMemsetD8Async");
  for (const PackedStart& p : parameters) {
    const auto [first, count] = inShard(p, shardOffset, shardCount);
    if (count == 0) continue;
    const CUdeviceptr out = shard + static_cast<CUdeviceptr>((p.offset + first - shardOffset) * 4);
    const long long firstArg = first, countArg = count, drawn = p.start.drawn;
    const int kind = kindOf(p.start);
    const float mean = p.start.mean, stddev = p.start.stddev;
    const unsigned long long key = p.start.key;
    const int64_t blocks = (first + count + 3) / 4 - first / 4;
    cuda::LaunchConfig config;
    config.block = {256};
    config.grid = {static_cast<unsigned>(std::clamp<int64_t>((blocks + 255) / 256, 1, 132 * 32))};
    config.stream = stream;
    fill(config, out, firstArg, countArg, drawn, kind, mean, stddev, key);
  }
}

void checkStart(CUdeviceptr shard, int64_t shardOffset, int64_t shardCount, const std::vector<PackedStart>& parameters) {
  constexpr int kSamples = 16;
  for (const PackedStart& p : parameters) {
    const auto [first, count] = inShard(p, shardOffset, shardCount);
    for (int k = 0; k < kSamples && count > 0; ++k) {
      // The first and the last, and evenly between (odd strides: every lane of a block).
      const int64_t i = first + (k == kSamples - 1 ? count - 1 : static_cast<int64_t>(k) * (count / kSamples + 1) % count);
      float device = 0;
      cuda::check(cuda::driver().memcpyDtoH(&device, shard + static_cast<CUdeviceptr>((p.offset + i - shardOffset) * 4), 4),
                  "cuMemcpyDtoH");
      const float host = gpt2StartValue(p.start, i);
      if (!(std::fabs(device - host) <= 1e-5f * std::fabs(host) + 1e-9f))
        throw std::runtime_error(fmt::format("the device made {}[{}] = {} at the start where the host makes {}: the "
                                             "fresh model is not the seed's",
                                             p.start.parameter.name, i, device, host));
    }
  }
}

}  // namespace llmc
