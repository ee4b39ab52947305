#include "planning/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>

namespace llmc {

namespace {

struct Lifetime {
  int64_t first = -1, last = -1;  // launch indices, inclusive
  bool overlaps(const Lifetime& o) const { return first <= o.last && o.first <= last; }
};

int64_t roundUp(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

// a + b bytes: arrays of 2^48 elements (resource_limits.h) are 2^51 bytes,
// and thousands of them would pass 64 bits. An error in the sizes, never a
// wrapped (negative) offset or total.
int64_t addBytes(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw CompileError(SourceLoc{}, fmt::format("the sizes are too large: the memory plan's bytes ({} + {}) do not fit in 64 bits", a, b));
  return sum;
}

// Each array of `order` in turn at the lowest offset that no array alive
// with it holds; its in-place partner's very bytes where nothing else holds
// them.
struct Placement {
  std::vector<int64_t> offsets;
  std::vector<std::pair<int, int>> inPlace;
  int64_t arenaBytes = 0;
};

Placement placeInOrder(const CudaModule& module, const std::vector<Lifetime>& lifetimes, const std::vector<int>& partner,
                       const std::vector<size_t>& order, int64_t alignment) {
  auto bytesOf = [&](size_t b) { return roundUp(std::max<int64_t>(module.buffers[b].bytes, 1), alignment); };
  Placement out;
  out.offsets.assign(module.buffers.size(), MemoryPlan::kOutside);
  std::vector<size_t> placed;
  for (size_t b : order) {
    const int64_t bytes = bytesOf(b);
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset + bytes) of the arrays alive with b
    for (size_t p : placed)
      if (lifetimes[p].overlaps(lifetimes[b]) && static_cast<int>(p) != partner[b])
        busy.push_back({out.offsets[p], addBytes(out.offsets[p], bytesOf(p))});
    const int other = partner[b];
    const bool partnerPlaced = other >= 0 && out.offsets[static_cast<size_t>(other)] != MemoryPlan::kOutside;
    int64_t offset = partnerPlaced ? out.offsets[static_cast<size_t>(other)] : 0;
    const bool inPlace = partnerPlaced && std::none_of(busy.begin(), busy.end(), [&](const auto& r) {
                           return offset < r.second && r.first < offset + bytes;
                         });
    if (!inPlace) {
      if (partnerPlaced) busy.push_back({offset, addBytes(offset, bytes)});  // apart, then: not even in part
      std::sort(busy.begin(), busy.end());
      offset = 0;
      for (const auto& [from, to] : busy) {
        if (offset + bytes <= from) break;
        offset = std::max(offset, to);
      }
    }
    out.offsets[b] = offset;
    if (inPlace) out.inPlace.push_back(lifetimes[b].first > lifetimes[static_cast<size_t>(other)].first
                                           ? std::pair<int, int>{static_cast<int>(b), other}
                                           : std::pair<int, int>{other, static_cast<int>(b)});
    out.arenaBytes = std::max(out.arenaBytes, addBytes(offset, bytes));
    placed.push_back(b);
  }
  return out;
}

// Swaps of two arrays' places in the order tried after the sorted orders,
// at most (planMemory).
constexpr size_t kPlacementSwaps = 400;
constexpr size_t kSwappedArrays = 128;

}  // namespace

MemoryPlan planMemory(const CudaModule& module, const std::vector<bool>& placedByCaller, int64_t alignment) {
  const size_t count = module.buffers.size();
  if (placedByCaller.size() != count)
    throw std::invalid_argument("planMemory: one placedByCaller flag per buffer is needed");
  const int64_t end = static_cast<int64_t>(module.launches.size());

  std::vector<Lifetime> lifetimes(count);
  // A part of another buffer (BufferDesc::within) lives as that one's bytes.
  auto holder = [&](int buffer) {
    const int within = module.buffers.at(static_cast<size_t>(buffer)).within;
    return within >= 0 ? within : buffer;
  };
  auto touch = [&](int buffer, int64_t launch) {
    Lifetime& l = lifetimes.at(static_cast<size_t>(holder(buffer)));
    l.first = l.first < 0 ? launch : std::min(l.first, launch);
    l.last = std::max(l.last, launch);
  };
  for (int64_t i = 0; i < end; ++i) {
    for (const LaunchParam& p : module.launches[static_cast<size_t>(i)].params) touch(p.buffer, i);
    for (const TensorMapParam& m : module.launches[static_cast<size_t>(i)].tensorMaps) touch(m.buffer, i);
  }
  for (size_t b = 0; b < count; ++b) {
    // Filled before the first launch; read after the last.
    if (module.buffers[b].graphInput) touch(static_cast<int>(b), -1);
    if (!module.buffers[b].graphOutputs.empty()) touch(static_cast<int>(b), end);
  }

  MemoryPlan plan;
  std::vector<size_t> arena;  // the arrays the plan places
  for (size_t b = 0; b < count; ++b)
    if (!placedByCaller[b] && module.buffers[b].within < 0 && lifetimes[b].first <= lifetimes[b].last) arena.push_back(b);
  auto bytesOf = [&](size_t b) { return roundUp(std::max<int64_t>(module.buffers[b].bytes, 1), alignment); };

  // An output its first launch may write over an input whose last use that launch is
  // (KernelLaunch::inPlace): the two need not be apart at that launch. Both in the arena, the
  // plan may place them so; both the caller's, the caller may.
  std::vector<int> partner(count, -1);
  for (int64_t i = 0; i < end; ++i)
    for (const auto& [output, input] : module.launches[static_cast<size_t>(i)].inPlace) {
      const size_t o = static_cast<size_t>(output), x = static_cast<size_t>(input);
      if (module.buffers[o].within >= 0 || module.buffers[x].within >= 0) continue;  // bytes of another's
      if (lifetimes[o].first != i || lifetimes[x].last != i || module.buffers[o].bytes != module.buffers[x].bytes) continue;
      if (!placedByCaller[o] && !placedByCaller[x] && partner[o] < 0 && partner[x] < 0)  // the first pair each may join
        partner[o] = input, partner[x] = output;
      if (placedByCaller[o] && placedByCaller[x]) plan.callerInPlace.push_back({output, input});
    }

  // Placing is a packing problem; a few orders are tried and the smallest
  // arena kept (the first of equals). Largest first, then by first use: big
  // arrays get the low offsets and the small ones fill the gaps between
  // them. Longest-lived first, or by first use: arrays whose lifetimes chain
  // stack on one another (odd-sized operands staged beside a layer's
  // matmuls, which largest-first leaves gaps between).
  auto span = [&](size_t b) { return lifetimes[b].last - lifetimes[b].first; };
  const std::vector<std::function<bool(size_t, size_t)>> orders = {
      [&](size_t a, size_t b) {
        if (module.buffers[a].bytes != module.buffers[b].bytes) return module.buffers[a].bytes > module.buffers[b].bytes;
        return lifetimes[a].first < lifetimes[b].first;
      },
      [&](size_t a, size_t b) {
        if (span(a) != span(b)) return span(a) > span(b);
        if (module.buffers[a].bytes != module.buffers[b].bytes) return module.buffers[a].bytes > module.buffers[b].bytes;
        return a < b;
      },
      [&](size_t a, size_t b) {
        if (lifetimes[a].first != lifetimes[b].first) return lifetimes[a].first < lifetimes[b].first;
        if (module.buffers[a].bytes != module.buffers[b].bytes) return module.buffers[a].bytes > module.buffers[b].bytes;
        return a < b;
      },
      [&](size_t a, size_t b) {
        const double areaA = static_cast<double>(bytesOf(a)) * static_cast<double>(span(a) + 1),
                     areaB = static_cast<double>(bytesOf(b)) * static_cast<double>(span(b) + 1);
        if (areaA != areaB) return areaA > areaB;
        return a < b;
      },
  };
  std::optional<Placement> best;
  std::vector<size_t> bestOrder;
  for (const auto& before : orders) {
    std::vector<size_t> order = arena;
    std::sort(order.begin(), order.end(), before);
    Placement tried = placeInOrder(module, lifetimes, partner, order, alignment);
    if (!best || tried.arenaBytes < best->arenaBytes) best = std::move(tried), bestOrder = order;
  }
  // Then, in a small module, swaps of two arrays in the best order, each kept
  // where it shrinks the arena: chained lifetimes of several sizes (a gated
  // MLP's staged operands beside the activations they outlive) leave gaps no
  // sorting closes. The swaps are drawn from a fixed sequence (the plan is
  // the same on every run); a module of more arrays than kSwappedArrays
  // (GPT-2's 557 at d12, where a placement takes 2 ms) gets none.
  const size_t n = bestOrder.size();
  const size_t swaps = n < 2 || n > kSwappedArrays ? 0 : kPlacementSwaps;
  std::mt19937_64 draw(kPlacementSwaps);  // its sequence is the standard's: the same plan on every platform
  for (size_t k = 0; k < swaps; ++k) {
    const size_t i = draw() % n, j = draw() % n;
    if (i == j) continue;
    std::swap(bestOrder[i], bestOrder[j]);
    Placement tried = placeInOrder(module, lifetimes, partner, bestOrder, alignment);
    if (tried.arenaBytes < best->arenaBytes) best = std::move(tried);
    else std::swap(bestOrder[i], bestOrder[j]);
  }
  plan.offsets = best ? std::move(best->offsets) : std::vector<int64_t>(count, MemoryPlan::kOutside);
  if (best) plan.inPlace = std::move(best->inPlace), plan.arenaBytes = best->arenaBytes;
  for (size_t b : arena) plan.separateBytes = addBytes(plan.separateBytes, bytesOf(b));
  auto sharing = [&](size_t b) {  // b's in-place partner at b's own offset
    const int p = partner[b];
    return p >= 0 && plan.offsets[b] != MemoryPlan::kOutside && plan.offsets[static_cast<size_t>(p)] == plan.offsets[b];
  };

  for (int64_t i = -1; i <= end; ++i) {
    int64_t live = 0;
    for (size_t b : arena)
      if (lifetimes[b].first <= i && i <= lifetimes[b].last &&
          !(sharing(b) && lifetimes[b].first == i && lifetimes[static_cast<size_t>(partner[b])].last == i))
        live = addBytes(live, bytesOf(b));
    if (live > plan.peakLiveBytes) plan.peakLiveBytes = live, plan.peakLaunch = i;
  }
  for (size_t b = 0; b < count; ++b) {
    const Lifetime& l = lifetimes[static_cast<size_t>(holder(static_cast<int>(b)))];
    plan.lifetimes.push_back({l.first, l.last});
  }
  return plan;
}

std::vector<bool> graphInputsAndOutputs(const CudaModule& module) {
  std::vector<bool> placed(module.buffers.size());
  for (size_t b = 0; b < placed.size(); ++b) placed[b] = module.buffers[b].graphInput || !module.buffers[b].graphOutputs.empty();
  return placed;
}

bool callerMayShare(const CudaModule& module, const MemoryPlan& plan, const std::string& output, const std::string& input) {
  return std::any_of(plan.callerInPlace.begin(), plan.callerInPlace.end(), [&](const std::pair<int, int>& pair) {
    return module.buffers[static_cast<size_t>(pair.first)].name == output &&
           module.buffers[static_cast<size_t>(pair.second)].name == input;
  });
}

std::string describeMemoryPlan(const CudaModule& module, const MemoryPlan& plan, int top) {
  auto size = [](int64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.3f} GiB", b / (1024.0 * 1024.0 * 1024.0));
    if (b >= 1024.0 * 1024.0) return fmt::format("{:.3f} MiB", b / (1024.0 * 1024.0));
    return fmt::format("{:.3f} KiB", b / 1024.0);
  };
  const int64_t end = static_cast<int64_t>(module.launches.size());
  auto launchName = [&](int64_t i) -> std::string {
    if (i < 0) return "(before: an input)";
    if (i >= end) return "(after: an output)";
    return module.launches[static_cast<size_t>(i)].name;
  };
  std::string out = fmt::format(
      "memory plan: {} arrays over {} launches\n"
      "  arena             {:>14}  (offsets by lifetime: arrays share bytes when no launch sees both)\n"
      "  one by one        {:>14}  (each array its own allocation)\n"
      "  peak alive        {:>14}  at {} (the least any placement needs)\n",
      module.buffers.size(), end, size(plan.arenaBytes), size(plan.separateBytes), size(plan.peakLiveBytes),
      launchName(plan.peakLaunch));
  for (const auto& [output, input] : plan.inPlace)
    out += fmt::format("  in place: {} over {} ({}, {})\n", module.buffers[static_cast<size_t>(output)].name,
                       module.buffers[static_cast<size_t>(input)].name, size(module.buffers[static_cast<size_t>(output)].bytes),
                       launchName(plan.lifetimes[static_cast<size_t>(output)].first));
  std::vector<size_t> alive;
  for (size_t b = 0; b < module.buffers.size(); ++b) {
    if (plan.offsets[b] == MemoryPlan::kOutside) continue;
    const auto [first, last] = plan.lifetimes[b];
    if (first <= plan.peakLaunch && plan.peakLaunch <= last) alive.push_back(b);
  }
  std::sort(alive.begin(), alive.end(),
            [&](size_t a, size_t b) { return module.buffers[a].bytes > module.buffers[b].bytes; });
  const size_t shown = std::min(alive.size(), static_cast<size_t>(std::max(top, 0)));
  out += fmt::format("largest arrays alive at the peak ({} of {}):\n", shown, alive.size());
  out += fmt::format("  {:<24} {:>6} {:>14}  {:<30} {}\n", "array", "dtype", "bytes", "first written or read by",
                     "last read by");
  for (size_t k = 0; k < shown; ++k) {
    const BufferDesc& d = module.buffers[alive[k]];
    out += fmt::format("  {:<24} {:>6} {:>14}  {:<30} {}\n", d.name, d.dtype, size(d.bytes),
                       launchName(plan.lifetimes[alive[k]].first), launchName(plan.lifetimes[alive[k]].second));
  }
  return out;
}

}  // namespace llmc
