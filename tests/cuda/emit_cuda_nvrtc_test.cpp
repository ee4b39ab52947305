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
