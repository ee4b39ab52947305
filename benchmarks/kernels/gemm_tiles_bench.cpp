// Checks and times the tensor-core GEMM tiles of runtime/cuda/device/llmc (gemm_sm80.cuh,
// gemm_sm90.cuh) against a CPU fp32 reference and cuBLAS.
//
// Each kernel is a small CUDA source instantiating one tile configuration, compiled at run time
// with NVRTC (as llmc's generated kernels will be) and launched through the driver API.
//   check: every operand layout, odd shapes, padded leading dimensions, batches with
//          attention-like strides and a fused bias+residual epilogue; fresh random inputs,
//          poisoned outputs, relative Frobenius error <= 1e-2 against a CPU fp32 reference
//          (sampled rows for the large shapes, plus the whole output against cuBLAS).
//   perf:  GPT-2 training GEMMs at 32768 rows, each layout (or the --shape's given), median of 20
//          event-timed runs of 10 back-to-back launches with inputs rotating over buffers larger
//          than L2, beside cublasGemmEx.
//
// usage: gemm_tiles_bench --include DIR [--check] [--perf] [--compile-only] [--path sm80|sm90]
//                         [--shape M,N,K[,AkBk|AkBn|AmBn|AmBk]]... [--config sm90:BM,BN,STAGES[,PINGPONG]]...
//   --shape times those shapes instead of GPT-2's; --config those tile configurations instead of
//   the defaults (sm80 ones as sm80:BM,BN,BK,STAGES,WARPS_M,WARPS_N).
//   DIR holds llmc/*.cuh (runtime/cuda/device in the source tree). --compile-only needs no GPU:
//   it compiles every kernel with NVRTC and checks their PTX for the tensor-core instructions.
#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gemm_tensor_map.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}
void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    fail(std::string(what) + ": " + (s ? s : "?"));
  }
}
void check_cublas(cublasStatus_t r, const char* what) {
  if (r != CUBLAS_STATUS_SUCCESS) fail(std::string(what) + ": cublas status " + std::to_string(r));
}
#define CU(x) check_cu((x), #x)

// ---------------------------------------------------------------------------------------------
// Host mirrors of the kernel parameter structs (gemm_common.cuh); layouts must match.
struct GemmShape {
  int M, N, K, batch_outer, batch_inner;
};
struct BatchStrides {
  int64_t outer, inner;
};
struct GemmOperand {
  CUdeviceptr ptr;
  int64_t ld;
  BatchStrides batch;
};
struct EpilogueStoreBf16 {
  CUdeviceptr out;
  int64_t ld;
  BatchStrides batch;
};
struct EpilogueBiasResidual {
  CUdeviceptr out, bias, residual;
  int64_t ld;
};
struct SplitK {
  int splits;
  CUdeviceptr workspace, counters;
};

enum class Major { K, MN };
enum class Path { sm80, sm90 };
enum class Epi { store, bias_residual };

const char* major_name(Major m) { return m == Major::K ? "K" : "MN"; }
std::string layout_name(Major a, Major b) {
  return std::string("A") + (a == Major::K ? "k" : "m") + "B" + (b == Major::K ? "k" : "n");
}

float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------
// Kernel sources and NVRTC.

// Tile configuration as template arguments: sm80 <BM, BN, BK, stages, warps_m, warps_n>,
// sm90 <BM, BN, stages>.
struct TileConfig {
  Path path;
  std::vector<int> params;
  std::string name() const {
    std::string s = path == Path::sm80 ? "sm80<" : "sm90<";
    for (size_t i = 0; i < params.size(); ++i) s += (i ? "," : "") + std::to_string(params[i]);
    return s + ">";
  }
};

struct KernelKey {
  std::string config;
  Major a, b;
  Epi epi;
  bool operator<(const KernelKey& o) const {
    return std::tie(config, a, b, epi) < std::tie(o.config, o.a, o.b, o.epi);
  }
};

const char* kBiasResidualEpilogue = R"(
// out = C + bias[col] + residual[row, col], one 16-byte store per 8 columns.
struct EpilogueBiasResidual {
  llmc::bf16* out;
  const llmc::bf16* bias;
  const llmc::bf16* residual;
  llmc::index_t ld;
  __device__ void operator()(llmc::BatchIndex, int row, int col, const float (&v)[8], int count) const {
    float w[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i] = i < count ? v[i] + __bfloat162float(bias[col + i]) + __bfloat162float(residual[row * ld + col + i]) : 0.f;
    llmc::store_bf16x8(out + row * ld + col, w, count);
  }
};
)";

std::string kernel_source(const TileConfig& cfg, Major a, Major b, Epi epi) {
  auto major = [](Major m) { return m == Major::K ? "llmc::Major::K" : "llmc::Major::MN"; };
  std::string args;
  // sm90: BM, BN, stages[, 1 = ping-pong consumers], the last after the majors.
  const size_t leading = cfg.path == Path::sm90 ? std::min<size_t>(cfg.params.size(), 3) : cfg.params.size();
  for (size_t i = 0; i < leading; ++i) args += std::to_string(cfg.params[i]) + ", ";
  args += std::string(major(a)) + ", " + major(b);
  if (cfg.path == Path::sm90 && cfg.params.size() > 3 && cfg.params[3]) args += ", true";
  const std::string epilogue = epi == Epi::store ? "llmc::EpilogueStoreBf16" : "EpilogueBiasResidual";
  std::string s;
  if (cfg.path == Path::sm80) {
    s = "#include <llmc/gemm_sm80.cuh>\n";
    if (epi == Epi::bias_residual) s += kBiasResidualEpilogue;
    s += "using Cfg = llmc::sm80::GemmConfig<" + args + ">;\n";
    s += "extern \"C\" __constant__ int gemm_info[4] = {Cfg::kThreads, Cfg::kSmemBytes, 0, 0};\n";
    s += "extern \"C\" __global__ void __launch_bounds__(Cfg::kThreads) gemm(llmc::GemmShape shape, "
         "llmc::GemmOperand a, llmc::GemmOperand b, " +
         epilogue +
         " epilogue) {\n"
         "  llmc::sm80::gemm<Cfg>(shape, a, b, epilogue);\n}\n";
  } else {
    s = "#include <llmc/gemm_sm90.cuh>\n";
    if (epi == Epi::bias_residual) s += kBiasResidualEpilogue;
    s += "using Cfg = llmc::sm90::GemmConfig<" + args + ">;\n";
    s += "extern \"C\" __constant__ int gemm_info[4] = {Cfg::kThreads, Cfg::kSmemBytes, Cfg::kABoxRows, "
         "Cfg::kBBoxRows};\n";
    s += "extern \"C\" __global__ void __launch_bounds__(Cfg::kThreads, 1) gemm("
         "const __grid_constant__ llmc::sm90::TmaDescriptor a, const __grid_constant__ "
         "llmc::sm90::TmaDescriptor b, "
         "llmc::GemmShape shape, " +
         epilogue +
         " epilogue, llmc::sm90::SplitK split) {\n"
         "  llmc::sm90::gemm<Cfg>(a, b, shape, epilogue, split);\n}\n";
  }
  return s;
}

// Support kernels: random fill and the error reduction against another output.
const char* kSupportSource = R"(
#include <cuda_bf16.h>
__device__ unsigned hash(unsigned long long x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return (unsigned)x;
}
// Uniform in [-1, 1).
extern "C" __global__ void fill_random(__nv_bfloat16* p, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16((hash(i * 0x9e3779b97f4a7c15ull + seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
}
// sums[0] += sum (x - y)^2, sums[1] += sum y^2 over rows x cols with leading dimension ld.
extern "C" __global__ void error_sums(const __nv_bfloat16* x, const __nv_bfloat16* y, long long rows, long long cols,
                                      long long ld, double* sums) {
  double d = 0, r = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * cols;
       i += (long long)gridDim.x * blockDim.x) {
    const long long at = (i / cols) * ld + i % cols;
    const double a = __bfloat162float(x[at]), b = __bfloat162float(y[at]);
    d += (a - b) * (a - b);
    r += b * b;
  }
  for (int o = 16; o > 0; o /= 2) {
    d += __shfl_xor_sync(0xffffffff, d, o);
    r += __shfl_xor_sync(0xffffffff, r, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], d);
    atomicAdd(&sums[1], r);
  }
}
)";

struct Compiled {
  std::vector<char> cubin;
  std::string ptx;
  std::string log;
  double seconds = 0;
  bool ok = false;
};

Compiled nvrtc_compile(const std::string& source, const std::string& arch, const std::string& include_dir) {
  Compiled out;
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "gemm.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const std::string inc = "--include-path=" + include_dir;
  const char* opts[] = {arch_opt.c_str(), "-std=c++17", inc.c_str(), "--include-path=/usr/local/cuda/include",
                        "-default-device"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 5, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, out.log.data());
  if (r == NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetCUBINSize(prog, &n);
    out.cubin.resize(n);
    nvrtcGetCUBIN(prog, out.cubin.data());
    nvrtcGetPTXSize(prog, &n);
    out.ptx.resize(n);
    nvrtcGetPTX(prog, out.ptx.data());
    out.ok = true;
  }
  nvrtcDestroyProgram(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

struct Kernel {
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  int threads = 0, smem = 0, a_box_rows = 0, b_box_rows = 0;
};

Kernel load_kernel(const Compiled& c, const char* name) {
  Kernel k;
  CU(cuModuleLoadData(&k.module, c.cubin.data()));
  CU(cuModuleGetFunction(&k.fn, k.module, name));
  CUdeviceptr info;
  size_t bytes;
  if (cuModuleGetGlobal(&info, &bytes, k.module, "gemm_info") == CUDA_SUCCESS) {
    int v[4];
    CU(cuMemcpyDtoH(v, info, sizeof v));
    k.threads = v[0], k.smem = v[1], k.a_box_rows = v[2], k.b_box_rows = v[3];
    CU(cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.smem));
  }
  return k;
}

// ---------------------------------------------------------------------------------------------
// Device arrays.

struct Buffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  Buffer() = default;
  explicit Buffer(size_t n) : bytes(n) { CU(cuMemAlloc(&ptr, std::max<size_t>(n, 16))); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~Buffer() {
    if (ptr) cuMemFree(ptr);
  }
};

struct Support {
  Kernel fill, errors;
  Buffer sums;
  void random(const Buffer& b, uint64_t seed) {
    unsigned long long n = b.bytes / 2;
    void* args[] = {(void*)&b.ptr, &n, &seed};
    CU(cuLaunchKernel(fill.fn, 1024, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  }
  // ||x - y|| / ||y|| over a rows x cols matrix.
  double rel_error(CUdeviceptr x, CUdeviceptr y, long long rows, long long cols, long long ld) {
    CU(cuMemsetD32(sums.ptr, 0, 4));
    void* args[] = {&x, &y, &rows, &cols, &ld, &sums.ptr};
    CU(cuLaunchKernel(errors.fn, 1024, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    double s[2];
    CU(cuMemcpyDtoH(s, sums.ptr, sizeof s));
    return std::sqrt(s[0] / s[1]);
  }
};

// One operand's storage: `batch_outer` x `rows` x `batch_inner` x `ld` elements, so that batch
// (o, i) of row r starts at o * outer_stride + i * ld + r * (batch_inner * ld) -- heads interleaved
// within rows as attention's q/k/v are; with batch_inner = 1 a plain (batched) matrix.
struct MatrixLayout {
  int64_t rows, contiguous, ld, batch_outer, batch_inner;
  int64_t row_stride() const { return batch_inner * ld; }
  int64_t inner_stride() const { return ld; }
  int64_t outer_stride() const { return rows * batch_inner * ld; }
  int64_t elements() const { return batch_outer * outer_stride(); }
  int64_t at(int o, int i, int64_t r, int64_t c) const {
    return o * outer_stride() + i * inner_stride() + r * row_stride() + c;
  }
};

struct Case {
  std::string suite;  // "check" or "perf"
  std::string what;   // GPT-2 name of the GEMM, or the property checked
  Major a, b;
  int M, N, K;
  int pad = 0;  // extra elements of leading dimension beyond the rounded-up extent
  int batch_outer = 1, batch_inner = 1;
  Epi epi = Epi::store;
};

int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

// ---------------------------------------------------------------------------------------------

struct Bench {
  std::string include_dir;
  CUdevice dev;
  CUcontext ctx;
  cublasHandle_t cublas;
  llmc::TensorMapEncodeTiled encode = nullptr;
  int sms = 0;
  Support support;
  std::map<KernelKey, Kernel> kernels;
  std::vector<std::string> table;
  int failures = 0;
  std::mt19937_64 rng{static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};

  void init() {
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    char name[256];
    CU(cuDeviceGetName(name, sizeof name, dev));
    std::printf("device: %s, %d SMs\n", name, sms);
    check_cublas(cublasCreate(&cublas), "cublasCreate");
    encode = &cuTensorMapEncodeTiled;
    const Compiled c = nvrtc_compile(kSupportSource, "sm_90", include_dir);
    if (!c.ok) fail("support kernels: " + c.log);
    support.fill = load_kernel(c, "fill_random");
    support.errors = load_kernel(c, "error_sums");
    support.sums = Buffer(16);
  }

  // Compiles all (config, layout, epilogue) kernels the cases need, in parallel, checks that the
  // PTX holds the instructions the path is about, and loads them unless compile_only.
  void compile(const std::vector<std::pair<KernelKey, TileConfig>>& wanted, bool compile_only) {
    std::vector<Compiled> out(wanted.size());
    std::vector<std::thread> pool;
    const size_t workers = std::max(1u, std::thread::hardware_concurrency());
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        for (size_t i = w; i < wanted.size(); i += workers) {
          const auto& [key, cfg] = wanted[i];
          out[i] = nvrtc_compile(kernel_source(cfg, key.a, key.b, key.epi),
                                 cfg.path == Path::sm90 ? "sm_90a" : "sm_90", include_dir);
        }
      });
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < wanted.size(); ++i) {
      const auto& [key, cfg] = wanted[i];
      if (!out[i].ok)
        fail("NVRTC " + cfg.name() + ":\n" + out[i].log + "\n" + kernel_source(cfg, key.a, key.b, key.epi));
      std::printf("nvrtc %-22s %-5s %s %.2f s%s\n", cfg.name().c_str(), layout_name(key.a, key.b).c_str(),
                  key.epi == Epi::store ? "store" : "bias+res", out[i].seconds,
                  out[i].log.size() > 1 ? " (log below)" : "");
      if (out[i].log.size() > 1) std::printf("%s\n", out[i].log.c_str());
      const std::vector<const char*> expected =
          cfg.path == Path::sm90
              ? std::vector<const char*>{"wgmma.mma_async", "cp.async.bulk.tensor", "setmaxnreg"}
              : std::vector<const char*>{"mma.sync.aligned.m16n8k16", "ldmatrix", "cp.async.cg"};
      for (const char* instr : expected)
        if (out[i].ptx.find(instr) == std::string::npos) {
          std::printf("  PTX lacks %s\n", instr);
          ++failures;
        }
      if (!compile_only) kernels[key] = load_kernel(out[i], "gemm");
    }
  }

  struct Operands {
    MatrixLayout la, lb, lc;
    std::vector<Buffer> a, b;  // rotation sets
    Buffer c, c_ref, bias, residual;
  };

  Operands make_operands(const Case& cs, size_t rotate_bytes) {
    Operands o;
    const int64_t a_cont = cs.a == Major::K ? cs.K : cs.M, a_rows = cs.a == Major::K ? cs.M : cs.K;
    const int64_t b_cont = cs.b == Major::K ? cs.K : cs.N, b_rows = cs.b == Major::K ? cs.N : cs.K;
    o.la = {a_rows, a_cont, round8(a_cont) + cs.pad, cs.batch_outer, cs.batch_inner};
    o.lb = {b_rows, b_cont, round8(b_cont) + cs.pad, cs.batch_outer, cs.batch_inner};
    o.lc = {cs.M, cs.N, round8(cs.N) + cs.pad, cs.batch_outer, cs.batch_inner};
    const size_t a_bytes = o.la.elements() * 2, b_bytes = o.lb.elements() * 2;
    const size_t sets = std::max<size_t>(1, (rotate_bytes + a_bytes + b_bytes - 1) / (a_bytes + b_bytes));
    o.a.emplace_back(a_bytes);
    o.b.emplace_back(b_bytes);
    support.random(o.a[0], rng());
    support.random(o.b[0], rng());
    for (size_t s = 1; s < sets; ++s) {
      o.a.emplace_back(a_bytes);
      o.b.emplace_back(b_bytes);
      CU(cuMemcpyDtoD(o.a[s].ptr, o.a[0].ptr, a_bytes));
      CU(cuMemcpyDtoD(o.b[s].ptr, o.b[0].ptr, b_bytes));
    }
    o.c = Buffer(o.lc.elements() * 2);
    o.c_ref = Buffer(o.lc.elements() * 2);
    if (cs.epi == Epi::bias_residual) {
      o.bias = Buffer(round8(cs.N) * 2);
      o.residual = Buffer(o.lc.elements() * 2);
      support.random(o.bias, rng());
      support.random(o.residual, rng());
    }
    return o;
  }

  // Split-K slice counts to run on the sm90 kernel: check S = 1 and S = 3 (when K has 3 k-steps);
  // for timing, S = 1 on shapes that fill the machine, else a sweep (the cost model's job later:
  // a unit's fix-up is far from free, see benchmarks/kernels/README.md).
  std::vector<int> split_options(int64_t tiles, int K, bool perf) const {
    const int k_steps = (K + 63) / 64;
    std::vector<int> candidates =
        perf ? (tiles < 2 * sms ? std::vector<int>{1, 2, 3, 4, 6, 8} : std::vector<int>{1})
             : std::vector<int>{1, 3};
    std::vector<int> out;
    for (int s : candidates)
      if (s <= k_steps) out.push_back(s);
    return out;
  }

  // Launches the llmc kernel on rotation set `set`.
  void launch(const Kernel& k, Path path, const Case& cs, Operands& o, size_t set, CUtensorMap* maps,
              SplitK split = {1, 0, 0}) {
    GemmShape shape{cs.M, cs.N, cs.K, cs.batch_outer, cs.batch_inner};
    EpilogueStoreBf16 store{o.c.ptr, o.lc.row_stride(), {o.lc.outer_stride(), o.lc.inner_stride()}};
    EpilogueBiasResidual bias{o.c.ptr, o.bias.ptr, o.residual.ptr, o.lc.row_stride()};
    void* epi = cs.epi == Epi::store ? (void*)&store : (void*)&bias;
    const int batches = cs.batch_outer * cs.batch_inner;
    if (path == Path::sm80) {
      GemmOperand a{o.a[set].ptr, o.la.row_stride(), {o.la.outer_stride(), o.la.inner_stride()}};
      GemmOperand b{o.b[set].ptr, o.lb.row_stride(), {o.lb.outer_stride(), o.lb.inner_stride()}};
      void* args[] = {&shape, &a, &b, epi};
      const unsigned tiles = unsigned(tiles_of(k, cs));
      CU(cuLaunchKernel(k.fn, tiles, 1, batches, k.threads, 1, 1, k.smem, nullptr, args, nullptr));
    } else {
      void* args[] = {&maps[2 * set], &maps[2 * set + 1], &shape, epi, &split};
      const unsigned grid = unsigned(std::min<int64_t>(tiles_of(k, cs) * batches * split.splits, sms));
      CU(cuLaunchKernel(k.fn, grid, 1, 1, k.threads, 1, 1, k.smem, nullptr, args, nullptr));
    }
  }

  std::map<const Kernel*, std::pair<int, int>> tile_sizes;  // kernel -> (BM, BN)
  int64_t tiles_of(const Kernel& k, const Case& cs) {
    const auto [bm, bn] = tile_sizes.at(&k);
    return int64_t((cs.M + bm - 1) / bm) * ((cs.N + bn - 1) / bn);
  }

  std::vector<CUtensorMap> tensor_maps(const Kernel& k, const Operands& o) {
    std::vector<CUtensorMap> maps(2 * o.a.size());
    auto mem = [](const MatrixLayout& l, CUdeviceptr p) {
      llmc::GemmOperandMemory m;
      m.base = reinterpret_cast<const void*>(p);
      m.contiguous = l.contiguous, m.rows = l.rows, m.ld = l.row_stride();
      m.batch_inner = l.batch_inner, m.batch_outer = l.batch_outer;
      m.batch_inner_stride = l.inner_stride(), m.batch_outer_stride = l.outer_stride();
      return m;
    };
    for (size_t s = 0; s < o.a.size(); ++s) {
      CU(llmc::encode_gemm_operand_map(encode, &maps[2 * s], mem(o.la, o.a[s].ptr), k.a_box_rows));
      CU(llmc::encode_gemm_operand_map(encode, &maps[2 * s + 1], mem(o.lb, o.b[s].ptr), k.b_box_rows));
    }
    return maps;
  }

  // cuBLAS (column-major) computes C^T[N, M] = op(B) op(A) with our row-major arrays.
  void launch_cublas(const Case& cs, Operands& o, size_t set, CUdeviceptr c) {
    const float one = 1, zero = 0;
    check_cublas(cublasGemmEx(cublas, cs.b == Major::K ? CUBLAS_OP_T : CUBLAS_OP_N,
                              cs.a == Major::K ? CUBLAS_OP_N : CUBLAS_OP_T, cs.N, cs.M, cs.K, &one,
                              (const void*)o.b[set].ptr, CUDA_R_16BF, o.lb.row_stride(),
                              (const void*)o.a[set].ptr, CUDA_R_16BF, o.la.row_stride(), &zero, (void*)c,
                              CUDA_R_16BF, o.lc.row_stride(), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  // CPU fp32 reference on all rows of all batches, or on `sample_rows` random rows (and the last)
  // of batch 0 for the large shapes.
  struct Reference {
    struct Row {
      int outer, inner, m;
    };
    std::vector<Row> rows;
    std::vector<float> values;  // rows.size() x N
  };

  static std::vector<uint16_t> fetch(const Buffer& b) {
    std::vector<uint16_t> h(b.bytes / 2);
    CU(cuMemcpyDtoH(h.data(), b.ptr, b.bytes));
    return h;
  }

  Reference cpu_reference(const Case& cs, const Operands& o, int sample_rows) {
    const auto A = fetch(o.a[0]), B = fetch(o.b[0]);
    std::vector<uint16_t> bias, residual;
    if (cs.epi == Epi::bias_residual) bias = fetch(o.bias), residual = fetch(o.residual);
    Reference ref;
    if (sample_rows > 0) {
      for (int i = 0; i < sample_rows; ++i) ref.rows.push_back({0, 0, int(rng() % cs.M)});
      ref.rows.push_back({0, 0, cs.M - 1});
    } else {
      for (int bo = 0; bo < cs.batch_outer; ++bo)
        for (int bi = 0; bi < cs.batch_inner; ++bi)
          for (int m = 0; m < cs.M; ++m) ref.rows.push_back({bo, bi, m});
    }
    // B of each batch used, as float [n][k].
    std::map<std::pair<int, int>, std::vector<float>> bt;
    for (const auto& r : ref.rows) {
      auto& t = bt[{r.outer, r.inner}];
      if (!t.empty()) continue;
      t.resize(size_t(cs.N) * cs.K);
      for (int n = 0; n < cs.N; ++n)
        for (int k = 0; k < cs.K; ++k)
          t[size_t(n) * cs.K + k] = bf16_to_float(
              B[cs.b == Major::K ? o.lb.at(r.outer, r.inner, n, k) : o.lb.at(r.outer, r.inner, k, n)]);
    }
    ref.values.resize(ref.rows.size() * cs.N);
    parallel_for(ref.rows.size(), [&](size_t ri) {
      const auto& r = ref.rows[ri];
      std::vector<float> a(cs.K);
      for (int k = 0; k < cs.K; ++k)
        a[k] = bf16_to_float(
            A[cs.a == Major::K ? o.la.at(r.outer, r.inner, r.m, k) : o.la.at(r.outer, r.inner, k, r.m)]);
      const auto& t = bt.at({r.outer, r.inner});
      for (int n = 0; n < cs.N; ++n) {
        float s = 0;
        const float* bn = &t[size_t(n) * cs.K];
        for (int k = 0; k < cs.K; ++k) s += a[k] * bn[k];
        if (cs.epi == Epi::bias_residual)
          s += bf16_to_float(bias[n]) + bf16_to_float(residual[o.lc.at(r.outer, r.inner, r.m, n)]);
        ref.values[ri * cs.N + n] = s;
      }
    });
    return ref;
  }

  // Relative Frobenius error of the output against the reference rows; also checks that the
  // padding columns of those rows kept their poison.
  static double compare(const Case& cs, const Operands& o, const Reference& ref, bool* padding_intact) {
    const auto C = fetch(o.c);
    double d = 0, r = 0;
    *padding_intact = true;
    for (size_t ri = 0; ri < ref.rows.size(); ++ri) {
      const auto& row = ref.rows[ri];
      for (int n = 0; n < cs.N; ++n) {
        const double want = ref.values[ri * cs.N + n];
        const double got = bf16_to_float(C[o.lc.at(row.outer, row.inner, row.m, n)]);
        d += (got - want) * (got - want);
        r += want * want;
      }
      for (int64_t n = cs.N; n < o.lc.ld; ++n)
        if (C[o.lc.at(row.outer, row.inner, row.m, n)] != 0xFFFF) *padding_intact = false;
    }
    return std::sqrt(d / r);
  }

  static void parallel_for(size_t n, const std::function<void(size_t)>& body) {
    const size_t workers = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        for (size_t i = w; i < n; i += workers) body(i);
      });
    for (auto& t : pool) t.join();
  }

  // Median over 20 runs of kBackToBack launches between two events (each on the next rotation
  // set), per launch: the launch gaps amortised as in a CUDA graph, the inputs cold in L2.
  double time_ms(const std::function<void(size_t)>& run, size_t sets) {
    constexpr int kWarmup = 3, kRuns = 20, kBackToBack = 10;
    for (int i = 0; i < kWarmup; ++i) run(i % sets);
    CU(cuCtxSynchronize());
    std::vector<CUevent> ev(2 * kRuns);
    for (auto& e : ev) CU(cuEventCreate(&e, CU_EVENT_DEFAULT));
    for (int i = 0; i < kRuns; ++i) {
      CU(cuEventRecord(ev[2 * i], nullptr));
      for (int j = 0; j < kBackToBack; ++j) run((kWarmup + i * kBackToBack + j) % sets);
      CU(cuEventRecord(ev[2 * i + 1], nullptr));
    }
    CU(cuCtxSynchronize());
    std::vector<float> ms(kRuns);
    for (int i = 0; i < kRuns; ++i) CU(cuEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    for (auto& e : ev) cuEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    return ms[kRuns / 2] / kBackToBack;
  }

  void run_case(const Case& cs, const std::vector<TileConfig>& configs) {
    const bool perf = cs.suite == "perf";
    Operands o = make_operands(cs, perf ? (256u << 20) : 0);
    const int batches = cs.batch_outer * cs.batch_inner;
    const bool big = int64_t(cs.M) * cs.N * cs.K > (int64_t(1) << 32);
    const Reference ref = cpu_reference(cs, o, big ? 24 : 0);
    const bool with_cublas = batches == 1 && cs.epi == Epi::store;
    double ms_cublas = NAN;
    if (with_cublas) {
      launch_cublas(cs, o, 0, o.c_ref.ptr);
      CU(cuCtxSynchronize());
      if (perf) ms_cublas = time_ms([&](size_t s) { launch_cublas(cs, o, s, o.c_ref.ptr); }, o.a.size());
    }
    for (const auto& cfg : configs) {
      const Kernel& k = kernels.at({cfg.name(), cs.a, cs.b, cs.epi});
      std::vector<CUtensorMap> maps;
      std::vector<int> splits_to_run = {1};
      if (cfg.path == Path::sm90) {
        maps = tensor_maps(k, o);
        splits_to_run = split_options(tiles_of(k, cs) * batches, cs.K, perf);
      }
      for (int splits : splits_to_run) {
        const int64_t tiles = tiles_of(k, cs) * batches;
        const auto [bm, bn] = tile_sizes.at(&k);
        Buffer workspace(splits > 1 ? size_t(tiles) * splits * bm * bn * 4 : 0), counters(size_t(tiles) * 4);
        CU(cuMemsetD32(counters.ptr, 0, tiles));
        const SplitK split{splits, workspace.ptr, counters.ptr};
        const std::string config = cfg.name() + (splits > 1 ? " S" + std::to_string(splits) : "");
        CU(cuMemsetD16(o.c.ptr, 0xFFFF, o.c.bytes / 2));  // bf16 NaN: unwritten outputs fail the check
        launch(k, cfg.path, cs, o, 0, maps.data(), split);
        CU(cuCtxSynchronize());
        bool padding_intact = true;
        const double err_cpu = compare(cs, o, ref, &padding_intact);
        const double err_cublas =
            with_cublas ? support.rel_error(o.c.ptr, o.c_ref.ptr, cs.M, cs.N, o.lc.row_stride()) : NAN;
        const bool ok = err_cpu <= 1e-2 && padding_intact && !(err_cublas > 1e-2);
        if (!ok) ++failures;
        char line[512];
        if (perf) {
          const double ms =
              time_ms([&](size_t s) { launch(k, cfg.path, cs, o, s, maps.data(), split); }, o.a.size());
          const double flop = 2.0 * cs.M * cs.N * cs.K * batches;
          std::snprintf(line, sizeof line,
                        "%-7s %-14s %-5s %6d %6d %6d  %-22s %8.3f %6.0f %6.0f %5.2f  %.1e %.1e %s",
                        cs.suite.c_str(), cs.what.c_str(), layout_name(cs.a, cs.b).c_str(), cs.M, cs.N, cs.K,
                        config.c_str(), ms, flop / ms / 1e9, flop / ms_cublas / 1e9, ms_cublas / ms, err_cpu,
                        err_cublas, ok ? "ok" : "FAIL");
        } else {
          std::snprintf(line, sizeof line,
                        "%-7s %-14s %-5s %6d %6d %6d  %-22s batch %dx%d pad %d  %.1e %.1e%s %s",
                        cs.suite.c_str(), cs.what.c_str(), layout_name(cs.a, cs.b).c_str(), cs.M, cs.N, cs.K,
                        config.c_str(), cs.batch_outer, cs.batch_inner, cs.pad, err_cpu, err_cublas,
                        padding_intact ? "" : " PADDING-WRITTEN", ok ? "ok" : "FAIL");
        }
        std::printf("%s\n", line);
        std::fflush(stdout);
        table.push_back(line);
      }
    }
  }
};

}  // namespace

static const char* kUsage =
    "usage: gemm_tiles_bench --include DIR [--check] [--perf] [--compile-only] [--path sm80|sm90]\n"
    "                        [--shape M,N,K[,AkBk|AkBn|AmBn|AmBk]]... [--config sm90:BM,BN,STAGES[,PINGPONG]]...";

// "M,N,K[,LAYOUT]" -> a perf case (layout AkBk unless given).
static Case parse_shape(const std::string& text) {
  Case c{"perf", "shape", Major::K, Major::K, 0, 0, 0};
  char layout[8] = "AkBk";
  if (std::sscanf(text.c_str(), "%d,%d,%d,%4s", &c.M, &c.N, &c.K, layout) < 3 || c.M < 1 || c.N < 1 || c.K < 1)
    fail("--shape wants M,N,K[,LAYOUT] with positive sizes, got '" + text + "'");
  const std::string l = layout;
  if (l.size() != 4 || l[0] != 'A' || l[2] != 'B' || (l[1] != 'k' && l[1] != 'm') || (l[3] != 'k' && l[3] != 'n'))
    fail("--shape layout is one of AkBk, AkBn, AmBn, AmBk; got '" + l + "'");
  c.a = l[1] == 'k' ? Major::K : Major::MN;
  c.b = l[3] == 'k' ? Major::K : Major::MN;
  c.what = text;
  return c;
}

// "sm90:BM,BN,STAGES[,PINGPONG]" or "sm80:BM,BN,BK,STAGES,WARPS_M,WARPS_N".
static TileConfig parse_config(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string path = text.substr(0, colon);
  if (colon == std::string::npos || (path != "sm90" && path != "sm80")) fail("--config starts with sm90: or sm80:, got '" + text + "'");
  TileConfig cfg{path == "sm90" ? Path::sm90 : Path::sm80, {}};
  std::string rest = text.substr(colon + 1);
  for (size_t at = 0; at <= rest.size();) {
    const size_t comma = std::min(rest.find(',', at), rest.size());
    cfg.params.push_back(std::atoi(rest.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  for (size_t i = 0; i < cfg.params.size(); ++i)
    if (cfg.params[i] <= 0 && !(cfg.path == Path::sm90 && i == 3))
      fail("--config " + text + ": every size is a positive integer");
  const size_t want = cfg.path == Path::sm90 ? 3 : 6;
  if (cfg.params.size() != want && !(cfg.path == Path::sm90 && cfg.params.size() == 4))
    fail("--config " + text + ": sm90 takes BM,BN,STAGES[,PINGPONG], sm80 BM,BN,BK,STAGES,WARPS_M,WARPS_N");
  return cfg;
}

int main(int argc, char** argv) {
  Bench bench;
  bool check = false, perf = false, compile_only = false;
  std::string only_path;
  std::vector<Case> shapes;
  std::vector<TileConfig> given_configs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--include" && i + 1 < argc)
      bench.include_dir = argv[++i];
    else if (a == "--check")
      check = true;
    else if (a == "--perf")
      perf = true;
    else if (a == "--compile-only")
      compile_only = check = true;
    else if (a == "--path" && i + 1 < argc)
      only_path = argv[++i];
    else if (a == "--shape" && i + 1 < argc)
      shapes.push_back(parse_shape(argv[++i])), perf = true;
    else if (a == "--config" && i + 1 < argc)
      given_configs.push_back(parse_config(argv[++i]));
    else
      fail(kUsage);
  }
  if (bench.include_dir.empty() || (!check && !perf))
    fail(kUsage);
  if (!compile_only) bench.init();

  // Tile configurations under test. sm80: BM, BN, BK, stages, warps_m, warps_n; sm90: BM, BN, stages.
  std::vector<TileConfig> configs = given_configs;
  if (configs.empty() && only_path != "sm90") {
    // 4 warps of 64x64 each: the slower sm80 shape (0.2-0.37x cuBLAS in benchmarks/kernels/README.md), checked only.
    if (check) configs.push_back({Path::sm80, {128, 128, 64, 4, 2, 2}});
    configs.push_back({Path::sm80, {128, 256, 64, 3, 2, 4}});
  }
  if (given_configs.empty() && only_path != "sm80") {
    configs.push_back({Path::sm90, {128, 256, 4}});
    configs.push_back({Path::sm90, {128, 128, 6}});
  }

  const std::pair<Major, Major> layouts[] = {
      {Major::K, Major::K}, {Major::K, Major::MN}, {Major::MN, Major::MN}, {Major::MN, Major::K}};
  std::vector<Case> cases;
  if (check) {
    for (auto [a, b] : layouts) {
      cases.push_back({"check", "odd+pad", a, b, 1000, 80, 771, 8});
      cases.push_back({"check", "exact", a, b, 256, 512, 640, 0});
      cases.push_back({"check", "tiny", a, b, 77, 200, 24, 0});
      cases.push_back({"check", "batched", a, b, 300, 136, 200, 0, 2, 3});
      cases.push_back({"check", "long-K", a, b, 384, 200, 4000, 0});
    }
    cases.push_back(
        {"check", "bias+residual", Major::K, Major::K, 1000, 80, 771, 8, 1, 1, Epi::bias_residual});
  }
  if (!shapes.empty()) {
    cases.insert(cases.end(), shapes.begin(), shapes.end());
  } else if (perf) {
    struct Gpt2 {
      const char* name;
      int n, k;  // forward out features, in features
    } gemms[] = {{"qkv", 2304, 768},
                 {"attproj", 768, 768},
                 {"fc", 3072, 768},
                 {"fcproj", 768, 3072},
                 {"lm_head", 50304, 768}};
    const int rows = 32768;
    for (const auto& g : gemms)
      cases.push_back({"perf", std::string(g.name) + " fwd", Major::K, Major::K, rows, g.n, g.k});
    for (const auto& g : gemms)
      cases.push_back({"perf", std::string(g.name) + " dX", Major::K, Major::MN, rows, g.k, g.n});
    for (const auto& g : gemms)
      cases.push_back({"perf", std::string(g.name) + " dW", Major::MN, Major::MN, g.n, g.k, rows});
  }

  std::vector<std::pair<KernelKey, TileConfig>> wanted;
  for (const auto& cfg : configs)
    for (auto [a, b] : layouts)
      for (Epi e : {Epi::store, Epi::bias_residual})
        if (e == Epi::store || (check && a == Major::K && b == Major::K))
          wanted.push_back({{cfg.name(), a, b, e}, cfg});
  bench.compile(wanted, compile_only);
  if (compile_only) {
    std::printf("%d failure(s)\n", bench.failures);
    return bench.failures ? 1 : 0;
  }
  for (const auto& [key, cfg] : wanted)
    bench.tile_sizes[&bench.kernels.at(key)] = {cfg.params[0], cfg.params[1]};

  for (const Case& cs : cases) bench.run_case(cs, configs);

  std::printf(
      "\nsuite   gemm           lay        M      N      K  config                       ms   TF/s cuBLAS "
      "ratio  err_cpu err_cublas\n");
  for (const auto& l : bench.table) std::printf("%s\n", l.c_str());
  std::printf("%d failure(s)\n", bench.failures);
  return bench.failures ? 1 : 0;
}
