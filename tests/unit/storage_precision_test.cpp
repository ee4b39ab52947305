// What storing values in bf16 between kernels costs in accuracy: GPT-2's
// training step in the interpreter (f64 arithmetic) with every value the
// emitted launches store in bf16 rounded as they store it, against the same
// step with nothing rounded. This bounds what the GPU test of the emitted
// kernels (tests/cuda/emit_cuda_gpu_test.cpp) can ask of bf16 storage.
#include <catch2/catch.hpp>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "interpreter.h"
#include "low_precision.h"
#include "planning/target.h"
#include "report/pseudocode.h"
#include "test_support.h"

using namespace llmc;

TEST_CASE("bf16 storage between kernels keeps GPT-2's gradients within 2e-2", "[precision]") {
  PipelineOptions pipeline;
  pipeline.path = testing::repoPath("diagrams/gpt2/model.dg");
  pipeline.sizes = {{"B", 3}, {"T", 37}, {"maxT", 40}, {"L", 2}, {"C", 40}, {"H", 4}, {"V", 101}, {"Vp", 120}};
  pipeline.grad = true;
  const Graph step = compileToIR(pipeline);
  const Target target = loadTarget("sm_90a");
  CostOptions cost;
  cost.storageBytes = 2;
  const CudaModule module = emitCuda(step, planKernels(step, target, cost), target, {.storage = StorageType::BF16});

  // Weights at the scale of a trained model's (std 0.1). With N(0, 1)
  // weights every softmax saturates and the first layers' gradients become so
  // ill-conditioned that bf16 rounding alone moves them by 40%.
  auto inputs = testing::randomInputs(step, 7, 100);
  for (auto& [name, tensor] : inputs)
    if (isFloat(tensor.type.dtype))
      for (double& v : tensor.data) v = roundToDType(0.1 * v, DType::BF16);

  InterpreterOptions exact;
  exact.precision = Precision::F64;
  InterpreterOptions stored = exact;
  for (const BufferDesc& b : module.buffers)
    if (b.dtype == "bf16" && !b.graphInput) stored.storedAsBf16.insert(b.node);
  REQUIRE(stored.storedAsBf16.size() > 80);  // the step has that many arrays between its kernels

  const auto reference = interpret(step, inputs, exact);
  const auto rounded = interpret(step, inputs, stored);
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    INFO(step.outputs[i].name);
    CHECK(relativeError(rounded[i], reference[i]) < 2e-2);
  }
}
