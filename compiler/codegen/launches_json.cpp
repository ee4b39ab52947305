#include "codegen/module.h"

namespace llmc {

nlohmann::json launchesToJson(const CudaModule& module) {
  using nlohmann::json;
  auto axesJson = [](const std::vector<Axis>& axes) {
    json out = json::array();
    for (const Axis& a : axes) out.push_back({{"name", a.name}, {"size", a.size}});
    return out;
  };
  json buffers = json::array();
  for (const BufferDesc& b : module.buffers) {
    buffers.push_back({{"name", b.name},
                       {"node", b.node},
                       {"dtype", b.dtype},
                       {"axes", axesJson(b.axes)},
                       {"elements", b.elements},
                       {"bytes", b.bytes},
                       {"graph_input", b.graphInput},
                       {"graph_outputs", b.graphOutputs}});
    if (b.within >= 0) {
      buffers.back()["within"] = {{"buffer", b.within}, {"offset_elements", b.withinOffset}};
      if (!b.withinStrides.empty()) buffers.back()["within"]["strides_elements"] = b.withinStrides;
    }
  }
  json launches = json::array();
  for (const KernelLaunch& l : module.launches) {
    json params = json::array();
    for (const LaunchParam& p : l.params) {
      const BufferDesc& b = module.buffers.at(static_cast<size_t>(p.buffer));
      params.push_back({{"buffer", p.buffer},
                        {"name", b.name},
                        {"access", p.written ? "write" : "read"},
                        {"offset_elements", p.offsetElements},
                        {"dtype", b.dtype},
                        {"axes", axesJson(b.axes)}});
    }
    json gemm = nullptr;
    if (l.gemm)
      gemm = {{"config", l.gemm->configType()},
              {"M", l.gemm->M},
              {"N", l.gemm->N},
              {"K", l.gemm->K},
              {"batch_outer", l.gemm->batchOuter},
              {"batch_inner", l.gemm->batchInner},
              {"a_major", l.gemm->a.kMajor ? "K" : "M"},
              {"b_major", l.gemm->b.kMajor ? "K" : "N"},
              {"a_leading_dimension", l.gemm->a.ld},
              {"b_leading_dimension", l.gemm->b.ld}};
    json maps = json::array();
    for (const TensorMapParam& m : l.tensorMaps)
      maps.push_back({{"operand", m.operand},
                      {"buffer", m.buffer},
                      {"name", module.buffers.at(static_cast<size_t>(m.buffer)).name},
                      {"offset_bytes", m.offsetBytes},
                      {"dtype", "bf16"},
                      {"dims", m.dims},
                      {"strides_bytes", m.stridesBytes},
                      {"box", m.box},
                      {"element_strides", {1, 1, 1, 1}},
                      {"interleave", "none"},
                      {"swizzle", m.swizzle},
                      {"l2_promotion", "256B"},
                      {"oob_fill", "zero"}});
    launches.push_back({{"name", l.name},
                        {"kernel", l.kernel},
                        {"role", l.role},
                        {"grid", l.grid},
                        {"block", {l.block, 1, 1}},
                        {"dynamic_smem_bytes", l.dynamicSmemBytes},
                        {"tensor_maps", maps},
                        {"gemm", gemm},
                        {"params", params},
                        {"in_place", l.inPlace},
                        {"instructions", l.instructions.describe()}});
  }
  return {{"arch", module.arch}, {"buffers", buffers}, {"launches", launches}};
}

}  // namespace llmc
