// The GPU memory's latency as the cost model uses it (Little's law): grids of
// few threads, each with K independent 16-byte loads in flight, read 2 GiB
// once; the bytes in flight over the bandwidth they reach is the time a load
// takes. Far from saturation that is the memory's latency; near the
// bandwidth it grows as the loads queue.
//
// Prints a row per grid (blocks x 256 threads x K loads): bytes in flight,
// the bandwidth (median of --reps runs) and the latency it implies; then the
// mean latency of the rows with one load a thread (what the cost model
// assumes of a CUDA-core kernel's thread) under 60% of the largest bandwidth
// measured, beside the target file's `gmem.latency_s`, the figure the cost
// model's latency term divides by (docs/performance.md).
//
// usage: memory_latency_bench [--reps N]
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cuda_context.h"
#include "cuda_driver.h"
#include "cuda_event.h"
#include "cuda_module.h"
#include "device_buffer.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"

namespace {

// One reader per K: the loads of an iteration are issued before any is used.
std::string readerSource(int k) {
  return fmt::format(R"(
extern "C" __global__ void read_k{0}(const uint4* __restrict__ a, unsigned long long n, unsigned* sink) {{
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i + {1} * stride < n;
       i += {0} * stride) {{
    uint4 v[{0}];
#pragma unroll
    for (int k = 0; k < {0}; ++k) v[k] = __ldcg(a + i + k * stride);
#pragma unroll
    for (int k = 0; k < {0}; ++k) {{ acc.x ^= v[k].x; acc.y ^= v[k].y; acc.z ^= v[k].z; acc.w ^= v[k].w; }}
  }}
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) atomicAdd(sink, 1u);  // keeps the loads
}}
)",
                     k, k - 1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  int reps = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--reps" || i + 1 >= argc) throw std::invalid_argument("usage: memory_latency_bench [--reps N]");
    const std::string value = argv[++i];
    if (value.empty() || value.size() > 6 || value.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(value) < 1)
      throw std::invalid_argument("--reps expects a whole number from 1, not '" + value + "'");
    reps = std::stoi(value);
  }
  const std::optional<llmc::cuda::Context> context = llmc::cuda::contextOrSkip();
  if (!context) return 77;
  const std::vector<int> ks = {1, 2, 4, 8};
  std::vector<llmc::cuda::Module> modules;
  for (int k : ks) {
    const std::string name = fmt::format("read_k{}", k);
    const llmc::cuda::CompiledKernel compiled =
        llmc::cuda::compileWithNvrtc({.name = name, .source = readerSource(k), .arch = context->arch()});
    modules.emplace_back(compiled.cubin, name);
  }
  const unsigned long long vectors = 1ull << 27;  // 2 GiB of 16-byte vectors: read once, past any cache
  llmc::cuda::DeviceBuffer data(vectors * 16), sink(4);
  data.fillBytes(0x5a);
  sink.fillBytes(0);
  const unsigned threads = 256;
  fmt::print("{} ({}): blocks x {} threads, K 16-byte loads in flight each, {} GiB read once\n", context->name(),
             context->arch(), threads, vectors * 16 >> 30);
  fmt::print("{:>7} {:>3} {:>13} {:>9} {:>8} {:>11}\n", "blocks", "K", "in flight KB", "us", "TB/s", "latency ns");
  struct Row {
    int loads;
    double bandwidth, latency;
  };
  std::vector<Row> rows;
  for (unsigned blocks : {132u, 264u, 528u, 1056u, 2112u})
    for (size_t i = 0; i < ks.size(); ++i) {
      llmc::cuda::Kernel kernel = modules[i].kernel(fmt::format("read_k{}", ks[i]));
      const llmc::cuda::LaunchConfig config{.grid = {blocks}, .block = {threads}};
      const CUdeviceptr a = data.address(), s = sink.address();
      std::vector<double> seconds;
      llmc::cuda::Event start, end;
      for (int r = -1; r < reps; ++r) {  // the first run warms up
        start.record();
        kernel(config, a, vectors, s);
        end.record();
        const double ms = llmc::cuda::Event::elapsedMilliseconds(start, end);
        if (r >= 0) seconds.push_back(ms * 1e-3);
      }
      const double time = median(seconds);
      const double inFlight = static_cast<double>(blocks) * threads * ks[i] * 16;
      const double bandwidth = static_cast<double>(vectors) * 16 / time;
      rows.push_back({ks[i], bandwidth, inFlight / bandwidth});
      fmt::print("{:>7} {:>3} {:>13.0f} {:>9.1f} {:>8.2f} {:>11.0f}\n", blocks, ks[i], inFlight / 1024, time * 1e6,
                 bandwidth * 1e-12, inFlight / bandwidth * 1e9);
    }
  double best = 0;
  for (const Row& r : rows) best = std::max(best, r.bandwidth);
  double sum = 0;
  int count = 0;
  for (const Row& r : rows)
    if (r.loads == 1 && r.bandwidth < 0.6 * best) sum += r.latency, ++count;
  const llmc::Target target = llmc::loadTargetFor(context->arch(), context->name());
  fmt::print("largest bandwidth {:.2f} TB/s; latency with a load a thread, under 60% of it: {} (mean of {} grids); "
             "{} ({}) gmem.latency_s: {:.0f} ns\n",
             best * 1e-12, count == 0 ? std::string("none") : fmt::format("{:.0f} ns", sum / count * 1e9), count,
             target.arch, target.device, target.level("GMEM").latency * 1e9);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "memory_latency_bench: {}\n", e.what());
  return 1;
}
