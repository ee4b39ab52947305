#include "reduction_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace llmc {

ReductionPlan planReduction(const CudaModule& module, const std::set<std::string>& gradientOutputs,
                            int64_t bucketBytes) {
  const size_t launches = module.launches.size();
  if (launches == 0) throw std::invalid_argument("a training step without launches");
  std::vector<std::vector<size_t>> writers(module.buffers.size()), readers(module.buffers.size());
  for (size_t i = 0; i < launches; ++i)
    for (const LaunchParam& p : module.launches[i].params)
      (p.written ? writers : readers)[static_cast<size_t>(p.buffer)].push_back(i);

  auto isGradient = [&](const BufferDesc& b) {
    return std::any_of(b.graphOutputs.begin(), b.graphOutputs.end(),
                       [&](const std::string& name) { return gradientOutputs.count(name) > 0; });
  };
  // The parts that lie in a gradient's array (BufferDesc::within: a stacked
  // parameter's gradient, each layer's written where it lies).
  std::vector<std::vector<int>> within(module.buffers.size());
  for (size_t b = 0; b < module.buffers.size(); ++b)
    if (module.buffers[b].within >= 0) within[static_cast<size_t>(module.buffers[b].within)].push_back(static_cast<int>(b));
  // The arrays to average, each with the launch after which it is final.
  std::vector<std::pair<size_t, int>> ready;  // (last writer, buffer)
  for (size_t g = 0; g < module.buffers.size(); ++g) {
    if (!isGradient(module.buffers[g])) continue;
    if (!within[g].empty()) {
      for (int b : within[g])
        if (!writers[static_cast<size_t>(b)].empty()) ready.push_back({writers[static_cast<size_t>(b)].back(), b});
      continue;
    }
    if (writers[g].empty()) continue;
    std::vector<int> parts;
    if (writers[g].size() == 1 && module.launches[writers[g][0]].role == "copy") {
      for (const LaunchParam& p : module.launches[writers[g][0]].params) {
        if (p.written) continue;
        const size_t b = static_cast<size_t>(p.buffer);
        const BufferDesc& source = module.buffers[b];
        if (readers[b] != std::vector<size_t>{writers[g][0]} || source.graphInput || !source.graphOutputs.empty() ||
            writers[b].empty()) {
          parts.clear();  // a source something else reads (or nothing writes): average the output itself
          break;
        }
        parts.push_back(p.buffer);
      }
    }
    if (parts.empty()) parts.push_back(static_cast<int>(g));
    for (int b : parts) ready.push_back({writers[static_cast<size_t>(b)].back(), b});
  }
  std::sort(ready.begin(), ready.end());

  // Buckets in the order the arrays become final: a new one when the last is
  // full; a bucket starts once the last of its arrays is final.
  ReductionPlan plan;
  std::map<int, int> bucketOf;  // buffer -> bucket
  for (const auto& [after, b] : ready) {
    if (plan.buckets.empty() || plan.buckets.back().bytes >= bucketBytes) plan.buckets.push_back({});
    ReductionPlan::Bucket& bucket = plan.buckets.back();
    bucket.afterLaunch = after;
    bucket.buffers.push_back(b);
    bucket.bytes += module.buffers[static_cast<size_t>(b)].bytes;
    bucketOf[b] = static_cast<int>(plan.buckets.size()) - 1;
  }
  for (const ReductionPlan::Bucket& bucket : plan.buckets) {
    plan.bytes += bucket.bytes;
    if (bucket.afterLaunch < launches - 1) plan.overlappedBytes += bucket.bytes;
  }
  plan.waits.resize(launches);
  for (size_t i = 0; i < launches; ++i) {
    std::set<int> waits;
    for (const LaunchParam& p : module.launches[i].params)
      if (auto it = bucketOf.find(p.buffer);
          it != bucketOf.end() && plan.buckets[static_cast<size_t>(it->second)].afterLaunch < i)
        waits.insert(it->second);
    plan.waits[i].assign(waits.begin(), waits.end());
  }
  return plan;
}

}  // namespace llmc
