// Times the tensor-core GEMM launches llmc emits for GPT-2's forward pass (with the epilogues the
// compiler fused into them: bias, GELU, residual) against cuBLAS on the same shapes, beside the
// cost model's predicted time of each kernel.
//
// The forward graph (diagrams/gpt2/model.dg, gpt2_logits) is compiled at d12 sizes with B x T rows
// (default 32 x 1024 = 32768) and one layer (the layers repeat the same GEMMs), the module emitted
// for the GPU's arch and compiled with NVRTC; each launch that runs on the tile library is timed
// as emitted: 3 warm-ups, then the median of 20 event-timed launches, its input buffers rotating
// over copies of at least 256 MB (L2 is 50 MB). cuBLAS (cublasGemmEx, bf16 in and out, fp32
// compute) computes the same GEMM with no epilogue, timed the same way.
//
// With --grad the training step (gpt2 with its backward pass) instead: the backward's data and
// weight gradients too.
//
// usage: generated_gemm_bench [--grad] [--set B=32,T=1024,...]  (LLMC_SOURCE_DIR: the source tree)
#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda_context.h"
#include "cuda_event.h"
#include "cuda_module.h"
#include "device_buffer.h"
#include "emit_cuda.h"
#include "launch_tensor_map.h"
#include "nvrtc_compiler.h"
#include "pipeline.h"
#include "pseudocode.h"
#include "target.h"

namespace cuda = llmc::cuda;

namespace {

constexpr int kWarmup = 3, kRuns = 20;
constexpr size_t kRotationBytes = size_t(256) << 20;

void checkCublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: cuBLAS status {}", what, int(status)));
}

// Small random bf16 values (N(0, 0.02^2), GPT-2's initial weight scale): a pool of 4M values,
// drawn once, read cyclically from a different start for each buffer.
std::vector<uint16_t> randomBf16(size_t count, uint64_t seed) {
  static const std::vector<uint16_t> pool = [] {
    std::mt19937_64 rng(1234);
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<uint16_t> values(size_t(1) << 22);
    for (uint16_t& h : values) {
      float f = normal(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      h = static_cast<uint16_t>(u >> 16);
    }
    return values;
  }();
  std::vector<uint16_t> out(count);
  const size_t start = size_t(seed) * 7919 % pool.size();
  for (size_t i = 0; i < count; ++i) out[i] = pool[(start + i) % pool.size()];
  return out;
}

// Median of kRuns event-timed calls of run(i) after kWarmup, in milliseconds.
double medianMs(const std::function<void(int)>& run, const cuda::Context& context) {
  for (int i = 0; i < kWarmup; ++i) run(i);
  context.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    cuda::Event start, stop;
    start.record();
    run(kWarmup + i);
    stop.record();
    stop.synchronize();
    ms.push_back(cuda::Event::elapsedMilliseconds(start, stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[kRuns / 2];
}

}  // namespace

int main(int argc, char** argv) {
  llmc::SizeBindings sizes = {{"B", 32}, {"T", 1024}, {"maxT", 1024}, {"L", 1}, {"C", 768},
                              {"H", 12}, {"V", 50257}, {"Vp", 50304}};
  bool grad = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--grad") {
      grad = true;
    } else if (arg == "--set" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t start = 0; start < list.size();) {
        size_t comma = list.find(',', start), eq = list.find('=', start);
        if (comma == std::string::npos) comma = list.size();
        sizes[list.substr(start, eq - start)] = std::stoll(list.substr(eq + 1, comma - eq - 1));
        start = comma + 1;
      }
    } else {
      fmt::print(stderr, "usage: generated_gemm_bench [--grad] [--set NAME=N,...]\n");
      return 2;
    }
  }
  try {
    cuda::Context context(0);
    const std::string arch = context.arch();
    llmc::Target target = llmc::loadTarget(arch == "sm_90a" ? "sm_90a" : "sm_80");
    llmc::PipelineOptions options;
    const char* source = std::getenv("LLMC_SOURCE_DIR");
    options.path = std::string(source ? source : LLMC_SOURCE_DIR) + "/diagrams/gpt2/model.dg";
    options.entry = grad ? "gpt2" : "gpt2_logits";
    options.grad = grad;
    options.sizes = sizes;
    llmc::CostOptions cost;
    options.target = &target;
    options.cost = cost;
    llmc::Graph graph = llmc::compileToIR(options);
    std::vector<llmc::PlannedKernel> planned = llmc::planKernels(graph, target, cost);
    llmc::CudaModule module = llmc::emitCuda(graph, planned, target, {.storage = llmc::StorageType::BF16});
    cuda::CompiledKernel compiled = cuda::compileWithNvrtc({options.entry, module.source, arch, {}});
    cuda::Module loaded(compiled.cubin, options.entry);
    fmt::print("GPU 0: {} ({}), {} launches, {} on tensor cores; sizes", context.name(), arch, module.launches.size(),
               std::count_if(module.launches.begin(), module.launches.end(), [](auto& l) { return l.gemm.has_value(); }));
    for (auto& [k, v] : sizes) fmt::print(" {}={}", k, v);
    fmt::print("\n\n");

    cublasHandle_t cublas;
    checkCublas(cublasCreate(&cublas), "cublasCreate");

    std::map<int, cuda::DeviceBuffer> written;  // outputs: one buffer each, not rotated
    fmt::print("{:<14} {:>6} {:>6} {:>5} {:<5} {:<44} {:>8} {:>6} {:>8} {:>6} {:>6} {:>9}\n", "launch", "M", "N", "K",
               "lay", "config", "ms", "TF/s", "cuBLAS", "TF/s", "ratio", "model ms");
    for (const llmc::KernelLaunch& l : module.launches) {
      if (!l.gemm) continue;
      const llmc::TensorCoreGemm& g = *l.gemm;
      // The buffers it reads (operands and the epilogue's inputs), in rotation sets.
      std::vector<int> reads;
      for (const llmc::TensorMapParam& m : l.tensorMaps) reads.push_back(m.buffer);
      for (const llmc::LaunchParam& p : l.params)
        if (!p.written) reads.push_back(p.buffer);
      std::sort(reads.begin(), reads.end());
      reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
      size_t readBytes = 0;
      for (int b : reads) readBytes += size_t(module.buffers[size_t(b)].bytes);
      const size_t sets = std::max<size_t>(2, (kRotationBytes + readBytes - 1) / readBytes);
      std::vector<std::map<int, cuda::DeviceBuffer>> copies(sets);
      for (int b : reads) {
        const llmc::BufferDesc& desc = module.buffers[size_t(b)];
        std::vector<uint16_t> values = randomBf16(size_t(desc.bytes + 1) / 2, uint64_t(b));
        for (auto& set : copies) {
          auto& buffer = set.emplace(b, cuda::DeviceBuffer(size_t(desc.bytes))).first->second;
          buffer.copyFromHost(values.data(), size_t(desc.bytes));
        }
      }
      for (const llmc::LaunchParam& p : l.params)
        if (p.written && !written.count(p.buffer))
          written.emplace(p.buffer, cuda::DeviceBuffer(size_t(module.buffers[size_t(p.buffer)].bytes)));
      // Per set: the tensor maps and pointer arguments.
      std::vector<std::vector<CUtensorMap>> maps(sets);
      std::vector<std::vector<CUdeviceptr>> pointers(sets);
      for (size_t s = 0; s < sets; ++s) {
        for (const llmc::TensorMapParam& m : l.tensorMaps)
          maps[s].push_back(cuda::encodeTensorMap(m, copies[s].at(m.buffer).address()));
        for (const llmc::LaunchParam& p : l.params)
          pointers[s].push_back(p.written ? written.at(p.buffer).address() : copies[s].at(p.buffer).address());
      }
      cuda::Kernel kernel = loaded.kernel(l.name);
      cuda::LaunchConfig config;
      config.grid = {unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2])};
      config.block = {unsigned(l.block), 1, 1};
      config.dynamicSharedMemoryBytes = unsigned(l.dynamicSmemBytes);
      auto runGenerated = [&](int i) {
        const size_t s = size_t(i) % sets;
        std::vector<void*> args;
        for (CUtensorMap& m : maps[s]) args.push_back(&m);
        for (CUdeviceptr& p : pointers[s]) args.push_back(&p);
        kernel.launch(config, args.data());
      };
      const double ms = medianMs(runGenerated, context);

      // cuBLAS (column-major) computes Cᵀ[N, M] = op(B)·op(A) from the same row-major operands.
      double msCublas = NAN;
      const int aBuffer = l.tensorMaps.empty() ? -1 : l.tensorMaps[0].buffer;
      const int bBuffer = l.tensorMaps.empty() ? -1 : l.tensorMaps[1].buffer;
      if (g.batchOuter * g.batchInner == 1 && aBuffer >= 0) {
        cuda::DeviceBuffer c(size_t(g.M) * size_t(g.N) * 2);
        const float one = 1, zero = 0;
        auto runCublas = [&](int i) {
          const size_t s = size_t(i) % sets;
          checkCublas(cublasGemmEx(cublas, g.b.kMajor ? CUBLAS_OP_T : CUBLAS_OP_N, g.a.kMajor ? CUBLAS_OP_N : CUBLAS_OP_T,
                                   int(g.N), int(g.M), int(g.K), &one,
                                   reinterpret_cast<const void*>(copies[s].at(bBuffer).address() + g.b.offset * 2),
                                   CUDA_R_16BF, int(g.b.ld),
                                   reinterpret_cast<const void*>(copies[s].at(aBuffer).address() + g.a.offset * 2),
                                   CUDA_R_16BF, int(g.a.ld), &zero, reinterpret_cast<void*>(c.address()), CUDA_R_16BF,
                                   int(g.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
        };
        msCublas = medianMs(runCublas, context);
      }
      double predicted = NAN;
      for (const llmc::PlannedKernel& k : planned)
        if (k.kernel.id == l.kernel) predicted = k.cost.predicted * 1e3;
      const double flop = 2.0 * double(g.M) * double(g.N) * double(g.K) * g.batchOuter * g.batchInner;
      fmt::print("{:<14} {:>6} {:>6} {:>5} A{}B{} {:<44} {:>8.3f} {:>6.0f} {:>8.3f} {:>6.0f} {:>6.2f} {:>9.3f}\n", l.name,
                 g.M, g.N, g.K, g.a.kMajor ? "k" : "m", g.b.kMajor ? "k" : "n",
                 g.configType().substr(g.configType().find("GemmConfig")), ms, flop / ms / 1e9, msCublas,
                 flop / msCublas / 1e9, msCublas / ms, predicted);
      std::fflush(stdout);
    }
    for (const llmc::KernelLaunch& l : module.launches)
      if (l.instructions.kind == llmc::InstructionChoice::Kind::MatmulLike && !l.gemm)
        fmt::print("on CUDA cores: {}: {}\n", l.name, l.instructions.describe());
    cublasDestroy(cublas);
  } catch (const cuda::NoGpuError& e) {
    fmt::print("skipped: {}\n", e.what());
    return 77;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
