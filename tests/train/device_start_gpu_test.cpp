// A fresh model made on the device (runtime/train/device_start.h): the
// GpuTrainer's master weights from a seed against the host's
// randomGpt2Weights of the same seed, every element (a few units in the last
// place apart: logf, sinf and cosf), at sizes no block divides and with the
// weights sharded as ZeRO-1 does (a shard starting inside a parameter); then
// one step's loss from each. Without a GPU it prints "skipped: ..." and
// exits 77.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "cuda_context.h"
#include "cuda_driver.h"
#include "device_buffer.h"
#include "cuda_module.h"
#include "device_start.h"
#include "gpu_trainer.h"
#include "jit.h"
#include "loaded_kernels.h"

using namespace llmc;

namespace {

// The largest difference between two models' parameters, relative to 1e-3
// (weights are 0.02 scaled normals), and the parameter it is in.
std::pair<double, std::string> largestDifference(const Gpt2Weights& a, const Gpt2Weights& b) {
  double worst = 0;
  std::string where = "-";
  for (const Gpt2Parameter& p : gpt2Parameters(a.config)) {
    const std::vector<double>&x = (a.*p.member).data, &y = (b.*p.member).data;
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = std::fabs(x[i] - y[i]) / (1e-3 + std::fabs(y[i]));
      if (d > worst) worst = d, where = fmt::format("{}[{}]: {} against {}", p.name, i, x[i], y[i]);
    }
  }
  return {worst, where};
}

int checkTrainer(const Gpt2Config& config, uint64_t seed) {
  const Gpt2Weights host = randomGpt2Weights(config, seed);
  GpuTrainerOptions fromSeed;
  fromSeed.startSeed = seed;
  GpuTrainer made(LLMC_SOURCE_DIR "/diagrams", config, [&]() -> const Gpt2Weights& { throw std::logic_error("asked for the host's model"); },
                  2, 32, fromSeed);
  const auto [worst, where] = largestDifference(made.weights(), host);
  int failed = worst > 1e-5;
  fmt::print("{} the device's start against the host's: largest relative difference {:.2e} ({})\n",
             failed ? "FAIL" : "ok  ", worst, where);

  GpuTrainer uploaded(LLMC_SOURCE_DIR "/diagrams", host, 2, 32, {});
  std::vector<int32_t> tokens(64), targets(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((7 * i + 3) % config.V), targets[i] = static_cast<int32_t>((5 * i + 1) % config.V);
  const double a = made.forwardBackward(tokens, targets, 1.0), b = uploaded.forwardBackward(tokens, targets, 1.0);
  const bool same = std::fabs(a - b) <= 1e-3 * std::fabs(b);
  failed += !same;
  fmt::print("{} the first step's loss: {:.6f} from the device's start, {:.6f} from the host's\n", same ? "ok  " : "FAIL", a, b);
  return failed;
}

// A shard that starts and ends inside parameters, as ZeRO-1's ranks hold them.
int checkShard(const Gpt2Config& config, uint64_t seed, const std::string& arch) {
  std::vector<PackedStart> starts;
  int64_t packed = 0;
  for (const Gpt2ParameterStart& s : gpt2Start(config, seed)) {
    starts.push_back({s, packed});
    packed += (s.parameter.type.elementCount() + 63) / 64 * 64;
  }
  const int64_t offset = packed / 3 + 5, count = packed / 3 + 7;
  cuda::JitResult jit = cuda::compileKernels({deviceStartSource(arch)}, nullptr, 1, cuda::JitWorkers::Threads);
  cuda::LoadedKernels loaded(jit.kernels);
  cuda::DeviceBuffer shard(static_cast<size_t>(count) * 4);
  fillStart(loaded["llmc_gpt2_start"], shard.address(), offset, count, starts, nullptr);
  cuda::check(cuda::driver().ctxSynchronize(), "cuCtxSynchronize");
  std::vector<float> got(static_cast<size_t>(count));
  shard.copyToHost(got.data(), got.size() * 4);
  int wrong = 0;
  for (const PackedStart& p : starts)
    for (int64_t i = 0; i < p.start.parameter.type.elementCount(); ++i) {
      const int64_t at = p.offset + i - offset;
      if (at < 0 || at >= count) continue;
      const float want = gpt2StartValue(p.start, i);
      wrong += !(std::fabs(got[static_cast<size_t>(at)] - want) <= 1e-5f * std::fabs(want) + 1e-9f);
    }
  checkStart(shard.address(), offset, count, starts);  // throws where it disagrees
  fmt::print("{} a shard of {} elements from element {}: {} values unlike the host's\n", wrong ? "FAIL" : "ok  ", count,
             offset, wrong);
  return wrong > 0;
}

}  // namespace

int main() {
  try {
    std::unique_ptr<cuda::Context> context;
    try {
      context = std::make_unique<cuda::Context>(0);
    } catch (const NoGpuError& e) {
      fmt::print("skipped: {}\n", e.what());
      return 77;
    }
    Gpt2Config config = Gpt2Config::fromName("d2");
    config.C = 72, config.H = 3, config.V = 1001, config.Vp = 1024, config.T = 64;
    int failed = checkShard(config, 11, context->arch()) + checkTrainer(config, 11);
    fmt::print("{}\n", failed ? fmt::format("{} checks FAILED", failed) : "all checks passed");
    return failed ? 1 : 0;
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
}
