// Times the tensor-core GEMM launches llmc emits for GPT-2's forward pass (with the epilogues the
// compiler fused into them: bias, GELU, residual) against cuBLAS and cuBLASLt on the same shapes,
// beside the cost model's predicted time of each kernel.
//
// The forward graph (diagrams/gpt2/model.dg, gpt2_logits) is compiled at d12 sizes with B x T rows
// (default 32 x 1024 = 32768) and one layer (the layers repeat the same GEMMs), planned, lowered (each
// GEMM's tile the cost model's choice) and emitted for the GPU's arch as llmc-train does (bf16, the
// gradients in f32), and compiled with NVRTC; each launch that runs on the tile library is timed
// as emitted: 3 warm-ups, then the median of 20 event-timed launches, its input buffers rotating
// over copies of at least 256 MB (L2 is 50 MB). Two baselines, timed the same way, bf16 in, out
// as the launch stores it (bf16; f32 for a gradient), with fp32 compute:
//  - cuBLAS (cublasGemmEx): the same GEMM with no epilogue;
//  - cuBLASLt (cublasLtMatmul): the same GEMM doing the work of the emitted epilogue where cuBLASLt
//    has an epilogue for it (bias; bias and GELU, storing the pre-activation too where the launch
//    does; the GELU derivative from a stored pre-activation; a residual added through C), found from
//    what the launch reads and writes (matchEpilogue); "-" where it has none or the match is unclear.
//
// With --grad the training step (gpt2 with its backward pass) instead: the backward's data and
// weight gradients too.
//
// With --energy SECONDS each launch and its cuBLAS GEMM are also run back to back for SECONDS (after a
// warm-up) while the board's energy counter runs (launch_energy.h): the joules of one launch against
// cuBLAS's for the same product. At the H200's power limit (700 W) a GEMM's energy, not its time at
// full clocks, is what it takes of a training step.
//
// usage: generated_gemm_bench [--grad] [--set B=32,T=1024,...] [--only LAUNCH]... [--energy SECONDS]
//        (LLMC_SOURCE_DIR: the source tree)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "cuda_event.h"
#include "cuda_module.h"
#include "device_buffer.h"
#include "driver/pipeline.h"
#include "ir/autodiff.h"
#include "launch_energy.h"
#include "launch_tensor_map.h"
#include "lowering/lowering.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"
#include "report/pseudocode.h"

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

// One launch's energy and its cuBLAS GEMM's (repeats 0 where it has none).
struct EnergyRow {
  std::string launch;
  cuda::EnergyMeasurement llmc, cublas;
};

void printEnergy(const std::vector<EnergyRow>& rows, const cuda::EnergyOptions& options, const cuda::PowerMeter& meter) {
  fmt::print(
      "\nenergy: each launch, then cuBLAS's GEMM of the same product (no epilogue), run back to back for {:.0f} s after "
      "{:.0f} s of warm-up, the board's energy counter (NVML) read around them; power limit {:.0f} W\n",
      options.seconds, options.warmSeconds, meter.powerLimitWatts());
  fmt::print("{:<14} {:>8} {:>6} {:>7} {:>7} {:>8} {:>6} {:>7} {:>7} {:>9}\n", "launch", "ms", "W", "SM MHz", "mJ",
             "cuBLAS ms", "W", "SM MHz", "mJ", "mJ ratio");
  for (const EnergyRow& r : rows) {
    const cuda::EnergyMeasurement &a = r.llmc, &b = r.cublas;
    fmt::print("{:<14} {:>8.3f} {:>6.0f} {:>7} {:>7.1f} ", r.launch, a.msEach(), a.watts(), a.smClockMhz, 1e3 * a.joulesEach());
    if (b.repeats)
      fmt::print("{:>8.3f} {:>6.0f} {:>7} {:>7.1f} {:>9.2f}\n", b.msEach(), b.watts(), b.smClockMhz, 1e3 * b.joulesEach(),
                 b.joulesEach() / a.joulesEach());
    else
      fmt::print("{:>8} {:>6} {:>7} {:>7} {:>9}\n", "-", "-", "-", "-", "-");
  }
  fmt::print("mJ ratio: cuBLAS's joules / llmc's (above 1: llmc's launch spends less energy, its epilogue included)\n");
}

// The cuBLASLt epilogue that does the work of a launch's fused one.
struct LtEpilogue {
  std::string label;  // for the table
  cublasLtEpilogue_t mode = CUBLASLT_EPILOGUE_DEFAULT;
  int bias = -1;           // N bf16, one per column of the M×N output
  int residual = -1;       // M×N bf16 added to the product: C, with beta = 1
  int preActivation = -1;  // M×N bf16 read by DGELU (its aux input)
};

// Which cuBLASLt epilogue does the work of the launch's, from what its epilogue reads and writes (the
// pointer parameters; A and B come through tensor maps): a read of N elements is a bias, a read of M×N
// elements an elementwise input, the M×N outputs are counted, and GELU is the tanh form in the epilogue
// functor. nullopt where that is unclear or cuBLASLt has no such epilogue (the layernorm backward's
// GEMMs read a per-row vector and write two outputs).
std::optional<LtEpilogue> matchEpilogue(const llmc::KernelLaunch& l, const llmc::CudaModule& module) {
  const int64_t M = l.gemm->M, N = l.gemm->N;
  std::vector<int> vectors, matrices;
  int outputs = 0;
  for (const llmc::LaunchParam& p : l.params) {
    const llmc::BufferDesc& desc = module.buffers[size_t(p.buffer)];
    if (p.written) {
      // Any type: the split-K weight gradients add f32 sums atomically; the baselines write bf16.
      if (desc.elements != M * N) return std::nullopt;
      ++outputs;
    } else if (desc.dtype != "bf16") {
      return std::nullopt;  // cuBLASLt reads a bias, C and aux in D's type
    } else if (desc.elements == N && M != N) {  // where M == N a vector could as well be one per row
      vectors.push_back(p.buffer);
    } else if (desc.elements == M * N) {
      matrices.push_back(p.buffer);
    } else {
      return std::nullopt;
    }
  }
  // Only the functor `struct <name>_epilogue { ... };`: the source's prelude defines a tanh of its own.
  const std::string_view source = l.source;
  const size_t begin = source.find("struct " + l.name + "_epilogue {");
  const size_t end = begin == std::string_view::npos ? begin : source.find("\n};", begin);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view functor = source.substr(begin, end - begin);
  const bool hasTanh = functor.find("tanh") != std::string_view::npos;
  // GELU's tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), its constant as written or, with
  // the compiler's terms collected (ir/collect_terms.h), x (sqrt(2/pi) + 0.0356774 x^2).
  const bool gelu = hasTanh && (functor.find("0.044715") != std::string_view::npos ||
                                functor.find("0.0356774") != std::string_view::npos);
  if (hasTanh && !gelu) return std::nullopt;

  const size_t v = vectors.size(), m = matrices.size();
  LtEpilogue e;
  if (!gelu && v <= 1 && m <= 1 && outputs == 1) {
    e.label = v && m ? "bias+residual" : v ? "bias" : m ? "residual" : "plain";
    if (v) {
      e.mode = CUBLASLT_EPILOGUE_BIAS;
      e.bias = vectors[0];
    }
    if (m) e.residual = matrices[0];
    return e;
  }
  if (gelu && v == 1 && m == 0 && (outputs == 1 || outputs == 2)) {
    // Two outputs: the training step's forward keeps GELU's input for the backward, as GELU_AUX_BIAS's aux
    // (llmc stores it before the bias, cuBLASLt after: the same bytes).
    e.label = outputs == 2 ? "bias+gelu+aux" : "bias+gelu";
    e.mode = outputs == 2 ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    e.bias = vectors[0];
    return e;
  }
  if (gelu && v <= 1 && m == 1 && outputs == 1) {
    // GELU that reads an M×N array is its derivative at the stored pre-activation (the forward's GELU reads
    // only its bias). llmc adds the bias to the stored array again; cuBLASLt's aux holds it added.
    e.label = "dgelu";
    e.mode = CUBLASLT_EPILOGUE_DGELU;
    e.preActivation = matrices[0];
    return e;
  }
  return std::nullopt;
}

// The largest power of two up to 256 that divides the address: a pointer's alignment for the heuristic,
// which otherwise assumes 256 bytes (operands at an offset into their buffer may have less).
uint32_t alignment(CUdeviceptr address) { return uint32_t(std::min<CUdeviceptr>(256, address & (~address + 1))); }

template <typename Handle>
using LtObject = std::unique_ptr<std::remove_pointer_t<Handle>, cublasStatus_t (*)(Handle)>;

// Median ms of cublasLtMatmul computing the launch's GEMM with epilogue `e`, its inputs rotating over
// `sets` as the generated kernel's do, into `d` (M×N, bf16 or f32 as `f32Product`); NaN where the heuristic
// finds no algorithm, or where an f32 product has an epilogue input (bf16 here, D's type for cuBLASLt).
// Column-major, as cuBLAS below: Dᵀ[N, M] = op(B)·op(A) from the row-major operands, so D has N rows (ld
// N), a bias has one value per row of D (CUBLASLT_EPILOGUE_BIAS: length = D's rows = N), and the GELU
// aux matrix is laid out as D (AUX_LD = N elements). Bias and aux take D's type, bf16: their
// *_DATA_TYPE attributes stay unset (a type other than D's is for fp8 kernels only).
double cublasLtMs(cublasLtHandle_t lt, const llmc::TensorCoreGemm& g, const LtEpilogue& e,
                  const std::vector<std::map<int, cuda::DeviceBuffer>>& sets, int aBuffer, int bBuffer,
                  const cuda::DeviceBuffer& d, bool f32Product, const cuda::DeviceBuffer& workspace,
                  const cuda::Context& context) {
  if (f32Product && (e.bias >= 0 || e.preActivation >= 0 || e.residual >= 0)) return NAN;
  auto layout = [](uint64_t rows, uint64_t cols, int64_t ld, cudaDataType type = CUDA_R_16BF) {
    cublasLtMatrixLayout_t handle;
    checkCublas(cublasLtMatrixLayoutCreate(&handle, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    return LtObject<cublasLtMatrixLayout_t>(handle, cublasLtMatrixLayoutDestroy);
  };
  const uint64_t M = uint64_t(g.M), N = uint64_t(g.N), K = uint64_t(g.K);
  // cuBLASLt's A is the launch's B operand, its B the launch's A; layouts describe them as stored, before op().
  const cublasOperation_t opA = g.b.kMajor ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.a.kMajor ? CUBLAS_OP_N : CUBLAS_OP_T;
  const auto aLayout = opA == CUBLAS_OP_T ? layout(K, N, g.b.ld) : layout(N, K, g.b.ld);
  const auto bLayout = opB == CUBLAS_OP_N ? layout(K, M, g.a.ld) : layout(M, K, g.a.ld);
  const auto dLayout = layout(N, M, int64_t(N), f32Product ? CUDA_R_32F : CUDA_R_16BF);

  cublasLtMatmulDesc_t descHandle;
  checkCublas(cublasLtMatmulDescCreate(&descHandle, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const LtObject<cublasLtMatmulDesc_t> desc(descHandle, cublasLtMatmulDescDestroy);
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    checkCublas(cublasLtMatmulDescSetAttribute(desc.get(), attribute, &value, sizeof(value)),
                "cublasLtMatmulDescSetAttribute");
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, opA);
  set(CUBLASLT_MATMUL_DESC_TRANSB, opB);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, e.mode);
  if (e.mode == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e.mode == CUBLASLT_EPILOGUE_DGELU)
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(N));
  cuda::DeviceBuffer auxOutput;  // GELU_AUX_BIAS's second output, GELU's input (outputs do not rotate)
  if (e.mode == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
    auxOutput = cuda::DeviceBuffer(M * N * 2);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, reinterpret_cast<void*>(auxOutput.address()));
  }
  // The epilogue's inputs of rotation set s, set in the descriptor before each call. The heuristic reads
  // set 0's (for their alignment; every set's buffers align alike).
  auto point = [&](size_t s) {
    if (e.bias >= 0) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, reinterpret_cast<const void*>(sets[s].at(e.bias).address()));
    if (e.preActivation >= 0)
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, reinterpret_cast<const void*>(sets[s].at(e.preActivation).address()));
  };
  auto a = [&](size_t s) { return sets[s].at(bBuffer).address() + CUdeviceptr(g.b.offset * 2); };
  auto b = [&](size_t s) { return sets[s].at(aBuffer).address() + CUdeviceptr(g.a.offset * 2); };
  auto c = [&](size_t s) { return e.residual >= 0 ? sets[s].at(e.residual).address() : d.address(); };
  point(0);

  cublasLtMatmulPreference_t preferenceHandle;
  checkCublas(cublasLtMatmulPreferenceCreate(&preferenceHandle), "cublasLtMatmulPreferenceCreate");
  const LtObject<cublasLtMatmulPreference_t> preference(preferenceHandle, cublasLtMatmulPreferenceDestroy);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
    checkCublas(cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &value, sizeof(value)),
                "cublasLtMatmulPreferenceSetAttribute");
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(workspace.bytes()));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(a(0)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(b(0)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(c(0)));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(d.address()));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, desc.get(), aLayout.get(), bLayout.get(), dLayout.get(),
                                                               dLayout.get(), preference.get(), 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) checkCublas(status, "cublasLtMatmulAlgoGetHeuristic");
  if (status != CUBLAS_STATUS_SUCCESS || found == 0 || heuristic.state != CUBLAS_STATUS_SUCCESS) return NAN;

  const float one = 1, beta = e.residual >= 0 ? 1.f : 0.f;
  auto run = [&](int i) {
    const size_t s = size_t(i) % sets.size();
    point(s);
    checkCublas(cublasLtMatmul(lt, desc.get(), &one, reinterpret_cast<const void*>(a(s)), aLayout.get(),
                               reinterpret_cast<const void*>(b(s)), bLayout.get(), &beta,
                               reinterpret_cast<const void*>(c(s)), dLayout.get(), reinterpret_cast<void*>(d.address()),
                               dLayout.get(), &heuristic.algo, reinterpret_cast<void*>(workspace.address()),
                               workspace.bytes(), nullptr),
                "cublasLtMatmul");
  };
  return medianMs(run, context);
}

// A time, rate or ratio right-aligned in `width` columns; "-" where there is none (NaN).
std::string column(double value, int width, int precision) {
  return std::isnan(value) ? fmt::format("{:>{}}", "-", width) : fmt::format("{:>{}.{}f}", value, width, precision);
}

}  // namespace

int main(int argc, char** argv) {
  llmc::SizeBindings sizes = {{"B", 32}, {"T", 1024}, {"maxT", 1024}, {"L", 1}, {"C", 768},
                              {"H", 12}, {"V", 50257}, {"Vp", 50304}};
  bool grad = false;
  std::vector<std::string> only;  // --only: the launches named (all when empty)
  double energySeconds = 0;       // --energy: seconds of each launch's energy measurement (none when 0)
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--grad") {
      grad = true;
    } else if (arg == "--only" && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else if (arg == "--energy" && i + 1 < argc) {
      const char* text = argv[++i];
      char* end = nullptr;
      energySeconds = std::strtod(text, &end);
      if (end == text || *end || !(energySeconds > 0 && energySeconds <= 600)) {
        fmt::print(stderr, "generated_gemm_bench: --energy expects seconds in (0, 600], got '{}'\n", text);
        return 2;
      }
    } else if (arg == "--set" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t start = 0; start < list.size();) {
        size_t comma = list.find(',', start), eq = list.find('=', start);
        if (comma == std::string::npos) comma = list.size();
        sizes[list.substr(start, eq - start)] = std::stoll(list.substr(eq + 1, comma - eq - 1));
        start = comma + 1;
      }
    } else {
      fmt::print(stderr, "usage: generated_gemm_bench [--grad] [--set NAME=N,...] [--only LAUNCH]... [--energy SECONDS]\n");
      return 2;
    }
  }
  try {
    cuda::Context context(0);
    const std::string arch = context.arch();
    llmc::Target target = llmc::loadTargetFor(arch == "sm_90a" ? "sm_90a" : "sm_80", context.name());
    llmc::PipelineOptions options;
    const char* source = std::getenv("LLMC_SOURCE_DIR");
    options.path = std::string(source ? source : LLMC_SOURCE_DIR) + "/diagrams/gpt2/model.dg";
    options.entry = grad ? "gpt2" : "gpt2_logits";
    options.grad = grad;
    options.sizes = sizes;
    // Planned, lowered and emitted as llmc-train does (runtime/train/gpu_trainer.cpp): bf16 storage
    // priced as such, the gradients kept in f32, each GEMM's tile the lowering stage's choice.
    llmc::CostOptions cost;
    cost.storageBytes = 2;
    options.target = &target;
    options.cost = cost;
    llmc::Graph graph = llmc::compileToIR(options);
    llmc::EmitOptions emit;
    emit.storage = llmc::StorageType::BF16;
    if (grad) emit.f32Values = llmc::gradientOutputs(graph);
    std::vector<llmc::PlannedKernel> planned = llmc::lowerKernels(graph, target, cost, emit);
    llmc::CudaModule module = llmc::emitCuda(graph, planned, target, emit);
    for (const std::string& name : only)  // before compiling: a misspelt name would time nothing
      if (std::none_of(module.launches.begin(), module.launches.end(),
                       [&](const llmc::KernelLaunch& l) { return l.gemm && l.name == name; })) {
        std::string gemms;
        for (const llmc::KernelLaunch& l : module.launches)
          if (l.gemm) gemms += " " + l.name;
        throw std::invalid_argument(fmt::format("--only {}: no GEMM launch of that name; the GEMMs are{}", name, gemms));
      }
    cuda::CompiledKernel compiled = cuda::compileWithNvrtc({options.entry, module.source, arch, {}});
    cuda::Module loaded(compiled.cubin, options.entry);
    fmt::print("GPU 0: {} ({}), {} launches, {} on tensor cores; sizes", context.name(), arch, module.launches.size(),
               std::count_if(module.launches.begin(), module.launches.end(), [](auto& l) { return l.gemm.has_value(); }));
    for (auto& [k, v] : sizes) fmt::print(" {}={}", k, v);
    fmt::print("\n\n");

    cublasHandle_t cublas;
    checkCublas(cublasCreate(&cublas), "cublasCreate");
    cublasLtHandle_t lt;
    checkCublas(cublasLtCreate(&lt), "cublasLtCreate");
    const cuda::DeviceBuffer ltWorkspace(size_t(32) << 20);

    std::optional<cuda::PowerMeter> meter;
    if (energySeconds > 0) meter.emplace(context.device());
    const cuda::EnergyOptions energyOptions{std::min(1.0, energySeconds), energySeconds};
    std::vector<EnergyRow> energyRows;

    std::map<int, cuda::DeviceBuffer> written;  // outputs: one buffer each, not rotated
    fmt::print("{:<14} {:>6} {:>6} {:>5} {:<5} {:<63} {:>8} {:>6} {:>8} {:>6} {:>6} {:>8} {:>6} {:>6} {:>9}  {}\n",
               "launch", "M", "N", "K", "lay", "config", "ms", "TF/s", "cuBLAS", "TF/s", "ratio", "cuBLASLt", "TF/s",
               "ratio", "model ms", "Lt epilogue");
    for (const llmc::KernelLaunch& l : module.launches) {
      if (!l.gemm || (!only.empty() && std::find(only.begin(), only.end(), l.name) == only.end())) continue;
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
      if (const unsigned resident = kernel.residentClusterBlocks(config); resident < config.grid.x)
        fmt::print("{}: {} blocks in clusters of {} asked for, {} resident at once: launched with {}\n", l.name,
                   config.grid.x, l.gemm->clusterM, resident, resident);
      auto runGenerated = [&](int i) {
        const size_t s = size_t(i) % sets;
        std::vector<void*> args;
        for (CUtensorMap& m : maps[s]) args.push_back(&m);
        for (CUdeviceptr& p : pointers[s]) args.push_back(&p);
        kernel.launch(config, args.data());
      };
      const double ms = medianMs(runGenerated, context);

      // cuBLAS (column-major) computes Cᵀ[N, M] = op(B)·op(A) from the same row-major operands; cuBLASLt
      // the same with the epilogue that does the emitted one's work.
      double msCublas = NAN, msLt = NAN;
      EnergyRow energyRow{l.name, {}, {}};
      int calls = 0;
      if (meter) energyRow.llmc = cuda::measureRepeatedEnergy(*meter, nullptr, [&] { runGenerated(calls++); }, energyOptions);
      std::optional<LtEpilogue> epilogue;
      const int aBuffer = l.tensorMaps.empty() ? -1 : l.tensorMaps[0].buffer;
      const int bBuffer = l.tensorMaps.empty() ? -1 : l.tensorMaps[1].buffer;
      if (g.batchOuter * g.batchInner == 1 && aBuffer >= 0) {
        // cuBLAS stores the product as the launch does: in f32 where llmc keeps it so (a gradient).
        const bool f32Product = std::any_of(l.params.begin(), l.params.end(), [&](const llmc::LaunchParam& p) {
          return p.written && module.buffers[size_t(p.buffer)].dtype == "f32";
        });
        cuda::DeviceBuffer c(size_t(g.M) * size_t(g.N) * (f32Product ? 4 : 2));
        const float one = 1, zero = 0;
        auto runCublas = [&](int i) {
          const size_t s = size_t(i) % sets;
          checkCublas(cublasGemmEx(cublas, g.b.kMajor ? CUBLAS_OP_T : CUBLAS_OP_N, g.a.kMajor ? CUBLAS_OP_N : CUBLAS_OP_T,
                                   int(g.N), int(g.M), int(g.K), &one,
                                   reinterpret_cast<const void*>(copies[s].at(bBuffer).address() + g.b.offset * 2),
                                   CUDA_R_16BF, int(g.b.ld),
                                   reinterpret_cast<const void*>(copies[s].at(aBuffer).address() + g.a.offset * 2),
                                   CUDA_R_16BF, int(g.a.ld), &zero, reinterpret_cast<void*>(c.address()),
                                   f32Product ? CUDA_R_32F : CUDA_R_16BF,
                                   int(g.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
        };
        msCublas = medianMs(runCublas, context);
        if (meter) energyRow.cublas = cuda::measureRepeatedEnergy(*meter, nullptr, [&] { runCublas(calls++); }, energyOptions);
        epilogue = matchEpilogue(l, module);
        if (epilogue) msLt = cublasLtMs(lt, g, *epilogue, copies, aBuffer, bBuffer, c, f32Product, ltWorkspace, context);
      }
      double predicted = NAN;
      for (const llmc::PlannedKernel& k : planned)
        if (k.kernel.id == l.kernel) predicted = k.cost.predicted * 1e3;
      const double flop = 2.0 * double(g.M) * double(g.N) * double(g.K) * g.batchOuter * g.batchInner;
      fmt::print("{:<14} {:>6} {:>6} {:>5} A{}B{} {:<63} {} {} {} {} {} {} {} {} {:>9.3f}  {}\n", l.name, g.M, g.N, g.K,
                 g.a.kMajor ? "k" : "m", g.b.kMajor ? "k" : "n", g.configType().substr(g.configType().find("GemmConfig")),
                 column(ms, 8, 3), column(flop / ms / 1e9, 6, 0), column(msCublas, 8, 3),
                 column(flop / msCublas / 1e9, 6, 0), column(msCublas / ms, 6, 2), column(msLt, 8, 3),
                 column(flop / msLt / 1e9, 6, 0), column(msLt / ms, 6, 2), predicted, epilogue ? epilogue->label : "-");
      std::fflush(stdout);
      if (meter) energyRows.push_back(energyRow);
    }
    if (meter) printEnergy(energyRows, energyOptions, *meter);
    fmt::print(
        "\nms: the launch as emitted, its epilogue fused. Baselines (ratio: baseline ms / llmc ms), bf16 in, out as the launch stores it "
        "(bf16; f32 for a gradient), "
        "fp32 compute:\n"
        "  cuBLAS: cublasGemmEx, the GEMM alone (no epilogue);\n"
        "  cuBLASLt: cublasLtMatmul with the epilogue that does the emitted one's work (Lt epilogue): plain: none; "
        "bias: EPILOGUE_BIAS;\n"
        "    residual: beta = 1, C = the residual; bias+gelu: GELU_BIAS; bias+gelu+aux: GELU_AUX_BIAS (GELU's input "
        "stored too);\n"
        "    dgelu: DGELU (the product times GELU' at the stored input); -: no such epilogue, unclear, or batched; "
        "a named epilogue\n"
        "    without a time: the heuristic found no algorithm for it.\n");
    for (const llmc::KernelLaunch& l : module.launches)
      if (l.instructions.kind == llmc::InstructionChoice::Kind::MatmulLike && !l.gemm)
        fmt::print("on CUDA cores: {}: {}\n", l.name, l.instructions.describe());
    cublasLtDestroy(lt);
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
