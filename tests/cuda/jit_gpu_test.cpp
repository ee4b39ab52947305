// Kernels compiled by the JIT, loaded and run on the GPU, checked against the
// CPU: a vectorised saxpy over 10M floats (from its CUBIN, and from PTX that
// the driver compiles), and a kernel using more than 48 KiB of dynamic shared
// memory; a persistent kernel compiled for clusters (sm_90 on), launched with
// more blocks than the GPU holds clusters of at once (cuda_module.h);
// DeviceBuffer::fillBytes over a range; and the energy of a kernel
// run again and again, from NVML's counter (launch_energy.h). Output buffers
// are poisoned with NaN first. Exits 77 (ctest: skipped) when there is no
// driver or GPU.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "cuda_context.h"
#include "cuda_event.h"
#include "cuda_test_support.h"
#include "device_buffer.h"
#include "jit.h"
#include "launch_energy.h"
#include "loaded_kernels.h"

namespace cuda = llmc::cuda;

namespace {

// out = a*x + y, four floats per thread with 16-byte accesses, the tail one by one.
const std::string kSaxpy = R"(
#include <vector_access.h>
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, long long n) {
  const long long i = 4 * (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 3 < n) {
    const float4 xv = llmc::device::load16(x + i), yv = llmc::device::load16(y + i);
    llmc::device::store16(out + i, make_float4(a * xv.x + yv.x, a * xv.y + yv.y, a * xv.z + yv.z, a * xv.w + yv.w));
  } else {
    for (long long j = i; j < n; ++j) out[j] = a * x[j] + y[j];
  }
}
)";

// Each block reverses a chunk of `chunk` floats through shared memory.
const std::string kReverseChunks = R"(
extern "C" __global__ void reverse_chunks(const float* in, float* out, int chunk) {
  extern __shared__ float tile[];
  const long long base = static_cast<long long>(blockIdx.x) * chunk;
  for (int j = threadIdx.x; j < chunk; j += blockDim.x) tile[j] = in[base + j];
  __syncthreads();
  for (int j = threadIdx.x; j < chunk; j += blockDim.x) out[base + j] = tile[chunk - 1 - j];
}
)";

// Units walked gridDim apart by clusters of two blocks, as the tile
// library's GEMMs walk their tiles: out[u] = u + the cluster rank's weight,
// whatever grid it runs with.
const std::string kClusterWalk = R"(
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_walk(float* out, int units) {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  for (int u = blockIdx.x / 2; u < units; u += gridDim.x / 2)
    if (threadIdx.x == 0) out[2 * u + rank] = static_cast<float>(u) + 0.5f * rank;
}
)";

struct Checks {
  int failed = 0;
  void expect(bool ok, const std::string& what) {
    fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failed;
  }
};

std::vector<float> randomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

// ‖out − ref‖ / ‖ref‖; infinite when out holds a NaN (the poison left in place).
double relativeError(std::span<const float> out, std::span<const double> ref) {
  double difference = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return INFINITY;
    difference += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(difference / norm);
}

void checkSaxpy(cuda::Kernel& saxpy, const std::string& what, Checks& checks) {
  constexpr long long n = 10'000'003;  // not a multiple of 4: the tail path runs too
  constexpr float a = 1.5f;
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> x = randomFloats(n, rng), y = randomFloats(n, rng);
  std::vector<double> reference(n);
  for (long long i = 0; i < n; ++i) reference[i] = double(a) * x[i] + y[i];

  cuda::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float)), dout(n * sizeof(float));
  dx.upload(std::span<const float>(x));
  dy.upload(std::span<const float>(y));
  dout.fillBytes(0xFF);  // NaN
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + 4 * threads - 1) / (4 * threads));
  cuda::Event start, end;
  start.record();
  saxpy({.grid = {blocks}, .block = {threads}}, a, dx.address(), dy.address(), dout.address(), n);
  end.record();
  const float ms = cuda::Event::elapsedMilliseconds(start, end);
  std::vector<float> out(n);
  dout.download(std::span<float>(out));
  const double error = relativeError(out, reference);
  checks.expect(error < 1e-6, fmt::format("{}: saxpy over {} floats, relative error {:.2e}, {:.3f} ms ({:.0f} GB/s)",
                                          what, n, error, ms, 3.0 * n * sizeof(float) / (ms * 1e6)));
}

void checkReverseChunks(cuda::Kernel& reverse, const cuda::Context& context, Checks& checks) {
  constexpr int chunk = 25'600;  // 100 KiB of floats per block
  constexpr int blocks = 264;
  constexpr unsigned smem = chunk * sizeof(float);
  if (static_cast<int>(smem) > context.maxDynamicSharedMemoryPerBlock()) {
    checks.expect(false, fmt::format("{} offers {} bytes of shared memory per block, less than {}", context.name(),
                                     context.maxDynamicSharedMemoryPerBlock(), smem));
    return;
  }
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> in = randomFloats(size_t(chunk) * blocks, rng);
  cuda::DeviceBuffer din(in.size() * sizeof(float)), dout(in.size() * sizeof(float));
  din.upload(std::span<const float>(in));
  dout.fillBytes(0xFF);
  reverse({.grid = {blocks}, .block = {512}, .dynamicSharedMemoryBytes = smem}, din.address(), dout.address(), chunk);
  context.synchronize();
  std::vector<float> out(in.size());
  dout.download(std::span<float>(out));
  size_t wrong = 0;
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < chunk; ++j) wrong += out[size_t(b) * chunk + j] != in[size_t(b) * chunk + chunk - 1 - j];
  checks.expect(wrong == 0, fmt::format("reverse_chunks with {} KiB of dynamic shared memory per block: {} wrong of {}",
                                        smem / 1024, wrong, out.size()));
}

// A cluster kernel launched with a block a unit: Kernel::launch fits the grid
// to the clusters resident at once (fewer than 20000), and every unit is
// still walked, by both blocks of its cluster.
void checkClusterGrid(cuda::Kernel& walk, const cuda::Context& context, Checks& checks) {
  constexpr int units = 10000;
  cuda::DeviceBuffer out(2 * units * sizeof(float));
  out.fillBytes(0xFF);
  const cuda::LaunchConfig config{.grid = {2 * units}, .block = {128}, .dynamicSharedMemoryBytes = 100 * 1024};
  const unsigned resident = walk.residentClusterBlocks(config);
  walk(config, out.address(), units);
  context.synchronize();
  std::vector<float> host(2 * units);
  out.download(std::span<float>(host));
  int wrong = 0;
  for (int u = 0; u < units; ++u) wrong += host[2 * u] != float(u) || host[2 * u + 1] != float(u) + 0.5f;
  // At most two blocks an SM at 100 KiB each, and no GPU has 256 SMs.
  checks.expect(wrong == 0 && resident % 2 == 0 && resident > 0 && resident <= 512,
                fmt::format("clusters of 2 with 100 KiB each: {} blocks resident of {} asked for; {} of {} units wrong",
                            resident, 2 * units, wrong, units));
}

// DeviceBuffer::fillBytes over a range at an odd byte, the bytes around it
// as filled before (the trainer's decay mask is set so).
void checkFillByteRange(Checks& checks) {
  const size_t n = 1000003, first = 77, count = 500001;
  cuda::DeviceBuffer buffer(n);
  buffer.fillBytes(0);
  buffer.fillBytes(first, count, 1);
  std::vector<unsigned char> host(n, 7);
  buffer.download(std::span<unsigned char>(host));
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += host[i] != (i >= first && i < first + count ? 1 : 0);
  bool refused = false;
  try {
    buffer.fillBytes(n - 1, 2, 0);
  } catch (const std::exception&) {
    refused = true;
  }
  checks.expect(wrong == 0 && refused, fmt::format("fillBytes over a range: {} wrong of {}; a fill past the end {}",
                                                   wrong, n, refused ? "refused" : "NOT refused"));
}

// saxpy over 10M floats queued again and again for half a second: the
// energy counter moves, at a power between an idle board's and its limit,
// and the time a launch agrees with its event-timed time within 2x (the
// measurement counts launches and wall time, not events).
void checkEnergy(cuda::Kernel& saxpy, const cuda::Context& context, Checks& checks) {
  std::optional<cuda::PowerMeter> meter;
  try {
    meter.emplace(context.device());
  } catch (const cuda::NvmlUnavailable& e) {
    // A GPU machine whose driver lacks NVML: said, and counted as a failure,
    // since the benchmarks' --energy would not work there either.
    checks.expect(false, fmt::format("NVML: {}", e.what()));
    return;
  }
  constexpr long long n = 10'000'000;
  cuda::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float)), dout(n * sizeof(float));
  dx.fillBytes(0);
  dy.fillBytes(0);
  const unsigned threads = 256, blocks = static_cast<unsigned>((n + 4 * threads - 1) / (4 * threads));
  auto launch = [&] { saxpy({.grid = {blocks}, .block = {threads}}, 2.0f, dx.address(), dy.address(), dout.address(), n); };
  cuda::Event start, end;
  launch();
  start.record();
  for (int i = 0; i < 20; ++i) launch();
  end.record();
  const double eventMs = cuda::Event::elapsedMilliseconds(start, end) / 20;
  const cuda::EnergyMeasurement e = cuda::measureRepeatedEnergy(*meter, nullptr, launch, {0.2, 0.5});
  const double limit = meter->powerLimitWatts();
  checks.expect(e.repeats > 0 && e.joules > 0 && e.watts() > 10 && e.watts() < 1.2 * limit &&
                    e.msEach() < 2 * eventMs && e.msEach() > 0.5 * eventMs,
                fmt::format("energy of saxpy run {} times in {:.2f} s: {:.1f} mJ each, {:.0f} W (limit {:.0f} W), "
                            "{:.3f} ms each ({:.3f} by events), SM clock {} MHz",
                            e.repeats, e.seconds, 1e3 * e.joulesEach(), e.watts(), limit, e.msEach(), eventMs,
                            e.smClockMhz));
}

}  // namespace

int main() {
  try {
    const std::optional<cuda::Context> context = cuda::contextOrSkip();
    if (!context) return 77;
    fmt::print("GPU 0: {}, compiling for {}\n", context->name(), context->arch());
    Checks checks;

    llmc::testing::CacheTempDir cacheDir("jit_gpu_cache");
    const cuda::KernelCache cache(cacheDir.path);
    const std::vector<cuda::KernelSource> sources = {
        {.name = "saxpy", .source = kSaxpy, .arch = context->arch()},
        {.name = "reverse_chunks", .source = kReverseChunks, .arch = context->arch()},
    };
    const cuda::JitResult compiled = cuda::compileKernels(sources, &cache);
    fmt::print("{}\n", compiled.summary.describe());
    const cuda::JitResult again = cuda::compileKernels(sources, &cache);
    fmt::print("{}\n", again.summary.describe());
    checks.expect(again.summary.fromCache == 2, "the second compile comes from the cache");

    cuda::LoadedKernels kernels(again.kernels);
    checkSaxpy(kernels["saxpy"], fmt::format("CUBIN for {}", context->arch()), checks);
    checkReverseChunks(kernels["reverse_chunks"], *context, checks);
    if (context->computeCapability() >= 90) {
      const auto clustered =
          cuda::compileKernels({{.name = "cluster_walk", .source = kClusterWalk, .arch = context->arch()}}, &cache);
      cuda::LoadedKernels clusterKernels(clustered.kernels);
      checkClusterGrid(clusterKernels["cluster_walk"], *context, checks);
    }
    checkFillByteRange(checks);
    checkEnergy(kernels["saxpy"], *context, checks);

    // A CUBIN for an older architecture does not run here: the loader falls
    // back to its PTX, which the driver compiles for this GPU.
    const std::string older = context->computeCapability() >= 90 ? "sm_80" : "sm_75";
    const auto portable = cuda::compileKernels({{.name = "saxpy", .source = kSaxpy, .arch = older}}, &cache);
    cuda::LoadedKernels fromPtx(portable.kernels);
    checkSaxpy(fromPtx["saxpy"], fmt::format("PTX for {}", older), checks);

    fmt::print("{}\n", checks.failed ? fmt::format("{} checks FAILED", checks.failed) : "all checks passed");
    return checks.failed ? 1 : 0;
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
}
