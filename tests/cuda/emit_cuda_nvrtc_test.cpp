// Every launch llmc emits compiles with NVRTC, each as its own translation
// unit, for sm_80 and sm_90a: GPT-2's
// forward and training step (small, and d12's channel, head, context and
// vocabulary sizes with two layers), the examples and the pseudocode tests'
// diagrams. With bf16 storage GPT-2's matmuls run on the tensor-core tile
// library and its attention on tensor-core streams: the PTX of every launch
// on the tensor cores holds wgmma and TMA copies for sm_90a, mma.sync for
// sm_80. Needs the CUDA toolkit's NVRTC, not a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <random>

#include "ir/autodiff.h"
#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "emit_cases.h"
#include "jit.h"
#include "lowering/lowering.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace {

using llmc::testing::EmitCase;

// `tensorCores`: with bf16 storage, matmul-like launches must use the tile
// library, and the PTX must show its tensor-core instructions. Returns the
// launches on tensor-core streams (bf16, both archs).
int compilesEverywhere(const EmitCase& c, bool tensorCores = false) {
  int streams = 0;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (auto storage : {llmc::StorageType::F32, llmc::StorageType::BF16}) {
      llmc::Target target = llmc::loadTarget(arch);
      llmc::CostOptions cost;
      cost.storageBytes = storage == llmc::StorageType::BF16 ? 2 : 4;
      cost.rowProducts = c.rowProducts;
      cost.rowProductsWhereCheaper = false;  // the plan the case names: with row products or without
      // With the target, as llmc-compile plans: training steps get the recompute pass.
      llmc::PipelineOptions pipeline = llmc::testing::pipelineOptions(c);
      pipeline.target = &target;
      pipeline.cost = cost;
      llmc::Graph graph = llmc::compileToIR(pipeline);
      llmc::EmitOptions emit{.storage = storage};
      if (c.gradientsInF32) emit.f32Values = llmc::gradientOutputs(graph);
      llmc::CudaModule module = llmc::emitCuda(graph, llmc::lowerKernels(graph, target, cost, emit), target, emit);
      const std::string what = fmt::format("{} for {}, {} storage", c.name, arch,
                                           storage == llmc::StorageType::BF16 ? "bf16" : "f32");
      INFO(what);
      // Each launch is a translation unit of its own, compiled in parallel.
      std::vector<llmc::cuda::KernelSource> sources;
      for (const llmc::KernelLaunch& launch : module.launches) sources.push_back({launch.name, launch.source, arch, {}});
      llmc::cuda::JitResult compiled;
      try {
        compiled = llmc::cuda::compileKernels(sources, nullptr);
      } catch (const llmc::cuda::KernelCompileError& e) {
        FAIL(e.what());
      }
      int onTensorCores = 0;
      for (size_t i = 0; i < module.launches.size(); ++i) {
        const llmc::KernelLaunch& launch = module.launches[i];
        // Launches of one class run one compilation, under its entry point's name.
        const llmc::cuda::CompiledKernel& kernel = *compiled.kernels.at(i).compiled;
        INFO(launch.name << ": " << launch.instructions.tensorCores);
        CHECK(!kernel.cubin.empty());
        CHECK(kernel.ptx.find(fmt::format(".entry {}(", kernel.name)) != std::string::npos);
        if (launch.instructions.tensorCores.empty()) continue;
        ++onTensorCores;
        streams += !launch.gemm.has_value();
        // Each launch on the tensor cores, GEMM or stream (attention), shows its instructions: on sm_90a
        // wgmma and the TMA for all of GPT-2's, and for any other's that says so (a stream whose tiles no
        // tensor map holds keeps mma.sync).
        auto has = [&](const char* instruction) { return kernel.ptx.find(instruction) != std::string::npos; };
        const bool saysWgmma = launch.instructions.tensorCores.find("wgmma") != std::string::npos;
        if (std::string(arch) == "sm_90a" && (tensorCores || saysWgmma)) {
          CHECK(has("wgmma.mma_async"));
          CHECK(has("cp.async.bulk.tensor"));
        } else {
          CHECK(has("mma.sync.aligned.m16n8k16"));
        }
      }
      if (!tensorCores || storage != llmc::StorageType::BF16) continue;
      CHECK(onTensorCores > 0);
    }
  }
  return streams;
}

}  // namespace

TEST_CASE("emitted CUDA of GPT-2 compiles with NVRTC", "[emit_cuda][nvrtc]") {
  for (const EmitCase& c : llmc::testing::gpt2Cases()) compilesEverywhere(c, true);
  EmitCase d12{"gpt2 training step, d12 sizes (2 layers)", "diagrams/gpt2/model.dg", "gpt2",
               {{"B", 4}, {"T", 1024}, {"maxT", 1024}, {"L", 2}, {"C", 768}, {"H", 12}, {"V", 50257}, {"Vp", 50304}},
               true, {}};
  CHECK(compilesEverywhere(d12, true) > 0);  // its attention on tensor-core streams
}

TEST_CASE("emitted CUDA of the examples compiles with NVRTC", "[emit_cuda][nvrtc]") {
  for (const EmitCase& c : llmc::testing::otherCases()) compilesEverywhere(c);
}

// Row products (planning/row_products.h) at sizes drawn at random from a fixed
// seed: the hand-written attention backwards of tests/diagrams/row_products.dg
// with any batch, heads, length and channels (a multiple of 8, or not, where
// the rows are not 16-byte aligned and the plan does without), planned for
// sm_90a with bf16 storage and --row-products; every launch compiles, and
// a third of the plans at least hold a row product (multi-query's too, its
// dK and dV split over the heads; those of unaligned rows do not).
TEST_CASE("row products at random sizes compile with NVRTC", "[emit_cuda][nvrtc][row products]") {
  std::mt19937 rng(20261205);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* entries[] = {"attention_backward", "unmasked_rows", "own_values", "multi_query_backward"};
  const llmc::Target target = llmc::loadTarget("sm_90a");
  int folded = 0, cases = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string entry = entries[pick(0, 3)];
    const int channels = pick(0, 4) == 0 ? pick(3, 130) : 8 * pick(1, 16);
    EmitCase c{fmt::format("row products #{}", i), "tests/diagrams/row_products.dg", entry,
               {{"B", pick(1, 3)}, {"H", pick(1, 4)}, {"T", pick(1, 700)}, {"D", channels}, {"E", 8 * pick(1, 16)}}};
    c.rowProducts = true;
    INFO(c.entry << " B=" << c.sizes.at("B") << " H=" << c.sizes.at("H") << " T=" << c.sizes.at("T") << " D="
                 << c.sizes.at("D") << " E=" << c.sizes.at("E"));
    llmc::CostOptions cost;
    cost.rowProducts = true;
    llmc::PipelineOptions pipeline = llmc::testing::pipelineOptions(c);
    pipeline.target = &target;
    pipeline.cost = cost;
    const llmc::Graph graph = llmc::compileToIR(pipeline);
    const llmc::EmitOptions emit{.storage = llmc::StorageType::BF16};
    const llmc::CudaModule module = llmc::emitCuda(graph, llmc::lowerKernels(graph, target, cost, emit), target, emit);
    std::vector<llmc::cuda::KernelSource> sources;
    bool rows = false;
    for (const llmc::KernelLaunch& launch : module.launches) {
      sources.push_back({launch.name, launch.source, "sm_90a", {}});
      rows = rows || launch.instructions.tensorCores.find("over the rows") != std::string::npos;
    }
    try {
      llmc::cuda::compileKernels(sources, nullptr);
    } catch (const llmc::cuda::KernelCompileError& e) {
      FAIL(e.what());
    }
    folded += rows;
    ++cases;
  }
  INFO(folded << " of " << cases << " planned with a row product");
  CHECK(folded >= cases / 3);
}
