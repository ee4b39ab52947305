// The CUDA writer's entry points (cuda_kernel_writer.h); the writer itself
// is cuda_writer.h and the files it lists.
#include "codegen/cuda_kernel_writer.h"

#include "codegen/cuda_writer.h"
#include "planning/fusion.h"

namespace llmc {

WrittenKernel writeKernel(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                          const std::vector<std::string>& names, DeviceResidency resident) {
  return cuda_writer::CudaWriter(graph, plan, stored, names, nullptr, nullptr, resident).run();
}

bool isGridSum(const Graph& graph, const LaunchPlan& plan) {
  return plan.kind == LaunchPlan::Kind::Tile && isWholeArraySum(graph, plan.outputs, plan.computed);
}

WrittenKernel writeTensorCoreStream(const Graph& graph, const LaunchPlan& plan,
                                    const std::map<NodeId, StoredArray>& stored, const std::vector<std::string>& names,
                                    const TensorCoreStream& stream) {
  return cuda_writer::CudaWriter(graph, plan, stored, names, nullptr, &stream).run();
}

WrittenKernel writeGemmEpilogue(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                                const std::vector<std::string>& names, const GemmEpilogueAxes& axes) {
  return cuda_writer::CudaWriter(graph, plan, stored, names, &axes).run();
}

}  // namespace llmc
