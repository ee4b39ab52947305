#include "codegen/emit_cuda.h"

#include "codegen/constant_bases.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "codegen/cuda_kernel_writer.h"
#include "codegen/prelude.h"
#include "planning/cost_model.h"
#include "lowering/gemm_staging.h"
#include "lowering/tensor_core_gemm.h"
#include "lowering/tensor_core_stream.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

// Whether a CUDA-core tile launch can write `output` over `input` (KernelLaunch::inPlace):
// both stored alike with the same axes, and every value the launch makes from the input by
// elementwise operations alone (no view, reduction or gather that reads it elsewhere), the
// output among them, without a stream or split. Other outputs may be made from the input too
// where every output made from it is stored at the tile's points themselves: the writer reads
// the input once per point, before any of them is stored (an output with an axis of its own is
// stored by a loop of its own, which would read the input again over what was written). (The
// kernel's pointers stay __restrict__: per element the one read feeds the writes, in the same
// thread.)
bool elementwiseInPlace(const Graph& g, const LaunchPlan& plan, NodeId output, NodeId input,
                        const std::map<NodeId, StoredArray>& arrays) {
  if (plan.kind != LaunchPlan::Kind::Tile || !plan.streamAxis.empty() || !plan.splitTiles.empty()) return false;
  const Type& to = g.node(output).type;
  const Type& ti = g.node(input).type;
  if (to.axes.size() != ti.axes.size() || arrays.at(output).ctype != arrays.at(input).ctype) return false;
  for (size_t k = 0; k < to.axes.size(); ++k)
    if (to.axes[k].name != ti.axes[k].name || to.axes[k].size != ti.axes[k].size) return false;
  // The launch's values that depend on the input: each an elementwise op over the output's axes.
  std::set<NodeId> dependent = {input};
  // A view (slice, concat, split, rename, ...) of a dependent value reads the input at other
  // positions: a reduction over it, made in this launch, would read what other threads have
  // written over the input by then.
  auto viewOfDependent = [&](NodeId x) {
    std::vector<NodeId> work = {x};
    for (size_t steps = 0; !work.empty() && steps < 4096; ++steps) {
      const Node& v = g.node(work.back());
      work.pop_back();
      if (!isView(v) || plan.computed.count(v.id)) continue;
      for (NodeId o : v.operands) {
        if (dependent.count(o)) return true;
        work.push_back(o);
      }
    }
    return false;
  };
  for (bool grew = true; grew;) {
    grew = false;
    for (NodeId id : plan.computed) {
      const Node& n = g.node(id);
      if (dependent.count(id)) continue;
      if (std::any_of(n.operands.begin(), n.operands.end(), viewOfDependent)) return false;
      if (std::none_of(n.operands.begin(), n.operands.end(), [&](NodeId x) { return dependent.count(x) > 0; }))
        continue;
      const bool elementwise = n.op == Op::Unary || n.op == Op::Binary || n.op == Op::Select || n.op == Op::Compare ||
                               n.op == Op::Cast;
      if (!elementwise || n.type.axes.size() != to.axes.size()) return false;
      dependent.insert(id);
      grew = true;
    }
  }
  auto atTilePoints = [&](NodeId o) {
    const std::vector<Axis>& axes = g.node(o).type.axes;
    return axes.size() == plan.groupAxes.size() &&
           std::all_of(axes.begin(), axes.end(), [&](const Axis& a) {
             return std::any_of(plan.groupAxes.begin(), plan.groupAxes.end(), [&](const Axis& x) { return x.name == a.name; });
           });
  };
  for (NodeId other : plan.outputs)
    if (other != output && dependent.count(other) && !(atTilePoints(other) && atTilePoints(output))) return false;
  return dependent.count(output) > 0;
}

// Whether a CUDA-core tile launch that holds `input`'s rows in shared memory
// (WrittenKernel::stagedRows) can write `output` over it: both stored alike,
// row-major, with the same axes, so that a point's output row is its input
// row; and the launch reads `input` directly alone (no view of it, no gather
// from it), at its points' own rows, all of which it copies before any
// output of the point is stored (the classifier's gradient over its logits).
bool stagedRowInPlace(const Graph& g, const LaunchPlan& plan, NodeId output, NodeId input,
                      const std::map<NodeId, StoredArray>& arrays, const std::set<NodeId>& stagedRows) {
  if (!stagedRows.count(input)) return false;
  const StoredArray &to = arrays.at(output), &from = arrays.at(input);
  if (to.ctype != from.ctype || !to.strides.empty() || !from.strides.empty()) return false;
  if (g.node(output).type.axes != g.node(input).type.axes) return false;
  // Every path from the input into the launch's nodes is a direct operand of a node that is neither a view nor a gather.
  std::set<NodeId> reaching = {input};
  for (const Node& n : g.nodes)
    if (isView(n) && !plan.computed.count(n.id) &&
        std::any_of(n.operands.begin(), n.operands.end(), [&](NodeId x) { return reaching.count(x) > 0; }))
      reaching.insert(n.id);
  for (NodeId id : plan.computed) {
    const Node& n = g.node(id);
    for (NodeId x : n.operands)
      if (reaching.count(x) && (x != input || isView(n) || n.op == Op::Gather || n.op == Op::ScatterAdd)) return false;
  }
  return true;
}

// The tensor map of one operand of a sm90 GEMM, as gemm_sm90.cuh reads it:
// rank 4 (contiguous, rows, batch inner, batch outer), boxes of 64 contiguous
// elements by the tile's rows (K-major) or by 64 k rows (MN-major).
TensorMapParam tensorMapOf(const std::string& operand, int buffer, const GemmOperandPlacement& p,
                           const TensorCoreGemm& gemm, int tileRows) {
  TensorMapParam map;
  map.operand = operand;
  map.buffer = buffer;
  map.offsetBytes = p.offset * 2;
  const uint64_t rowBytes = static_cast<uint64_t>(p.ld) * 2;
  map.dims = {static_cast<uint64_t>(p.contiguous), static_cast<uint64_t>(p.rows), static_cast<uint64_t>(gemm.batchInner),
              static_cast<uint64_t>(gemm.batchOuter)};
  // The strides of batch dimensions of extent 1 are never used but must be valid.
  map.stridesBytes = {rowBytes, gemm.batchInner > 1 ? static_cast<uint64_t>(p.batchInnerStride) * 2 : rowBytes,
                      gemm.batchOuter > 1 ? static_cast<uint64_t>(p.batchOuterStride) * 2 : rowBytes};
  map.box = {64, static_cast<uint32_t>(p.kMajor ? tileRows : gemm.BK), 1, 1};
  return map;
}

// A stream tile's tensor map (tensor_core_stream.h): dims (channels, outer
// positions, its batch axes), boxes of 64 channels x 64 positions, 128B
// swizzle as the tile is laid out.
TensorMapParam streamTensorMap(const StreamTile& tile, const TensorCoreStream& stream, int buffer) {
  TensorMapParam map;
  map.operand = tile.tensorMap;
  map.buffer = buffer;
  map.offsetBytes = tile.layout.offset * 2;
  const int64_t outer = tile.outer == stream.rows.name ? stream.rows.size : stream.stream.size;
  const uint64_t rowBytes = static_cast<uint64_t>(tile.layout.strides.at(tile.outer)) * 2;
  map.dims = {static_cast<uint64_t>(tile.channel.size), static_cast<uint64_t>(outer), 1, 1};
  map.stridesBytes = {rowBytes, rowBytes, rowBytes};  // a batch dimension of extent 1: never used, but valid
  for (size_t k = 0; k < tile.batchDims.size(); ++k) {
    map.dims[k + 2] = static_cast<uint64_t>(tile.batchDims[k].extent);
    map.stridesBytes[k + 1] = static_cast<uint64_t>(tile.batchDims[k].stride) * 2;
  }
  map.box = {64, static_cast<uint32_t>(kStreamPositionsPerStep), 1, 1};
  return map;
}

std::string axisList(const std::vector<Axis>& axes) {
  std::string s;
  for (const Axis& a : axes) s += fmt::format("{}{}:{}", s.empty() ? "" : " ", a.name, a.size);
  return s.empty() ? "-" : s;
}

// Writes the launches of a LaunchList, in order, into one module: each on
// the engine its planners allow (a tensor-core GEMM, a tensor-core stream,
// else the CUDA cores), with the staging copies a GEMM needs before it.
class ModuleWriter {
 public:
  ModuleWriter(const Graph& graph, const LaunchList& list, const Target& target, const EmitOptions& options)
      : graph_(graph), list_(list), target_(target), options_(options) {
    for (const auto& [id, buffer] : list_.bufferOf)
      if (auto it = list_.arrays.find(id); it != list_.arrays.end()) paramNames_[buffer] = it->second.param;
  }

  CudaModule run() {
    const DeviceResidency resident{int64_t{target_.smCount} * target_.maxWarpsPerSM * target_.warpSize,
                                   int64_t{target_.smCount} * target_.maxBlocksPerSM,
                                   target_.level("SMEM").maxPerBlock, target_.hasCpAsync};
    std::vector<WrittenKernel> cudaCores;  // every launch as the CUDA cores run it
    for (const ScheduledLaunch& l : list_.launches)
      cudaCores.push_back(writeKernel(graph_, l.plan, list_.arrays, list_.names, resident));
    module_.arch = target_.arch;
    module_.buffers = list_.buffers;
    for (size_t i = 0; i < list_.launches.size(); ++i) writeLaunch(list_.launches[i], cudaCores[i]);
    std::string includes;
    for (const std::string& header : tileLibraries_) includes += fmt::format("#include <{}>\n", header);
    if (!includes.empty()) includes = "// the tensor-core tiles\n" + includes + "\n";
    module_.source = fmt::format("// Generated by llmc-compile --emit cuda from diagram '{}' for {} ({}); floats stored as {}.\n"
                                 "// One launch per function, in this order; the launch description (--emit launches)\n"
                                 "// gives each one's grid, block and parameters.\n\n{}{}{}",
                                 graph_.name, target_.arch, target_.device,
                                 options_.storage == StorageType::BF16 ? "bf16" : "f32",
                                 includes,
                                 kPrelude, kernelsSource_);
    return std::move(module_);
  }

 private:
  // One launch: on the tile library where planTensorCoreGemm finds a GEMM
  // and its epilogue can be written; else a tensor-core stream, else `pw`
  // (the CUDA cores' code), with the reasons the engines refused.
  void writeLaunch(const ScheduledLaunch& p, const WrittenKernel& pw) {
    const Graph& graph = graph_;
    const Target& target = target_;
    const std::set<NodeId>& stored = list_.stored;
    const std::map<NodeId, StoredArray>& arrays = list_.arrays;
    const std::map<NodeId, int>& bufferOf = list_.bufferOf;
    const std::vector<std::string>& names = list_.names;
    const bool bf16 = options_.storage == StorageType::BF16;
    KernelLaunch launch;
    launch.name = p.plan.name;
    launch.kernel = p.kernel;
    launch.role = p.role;
    launch.grid = {pw.grid, 1, 1};
    launch.block = pw.block;
    launch.dynamicSmemBytes = pw.dynamicSmemBytes;
    launch.instructions = selectInstructions(graph, p.plan.computed, stored, bf16);
    // An output's copy (launch_list.cpp) reads and writes each element once:
    // priced at the GMEM's bandwidth, a helper of the kernel it copies from.
    if (p.plan.kind == LaunchPlan::Kind::Clear)
      launch.predictedSeconds = clearLaunchSeconds(graph.node(p.plan.outputs.at(0)).type, target);
    if (p.role == "copy") {
      const double bytes = 2.0 * static_cast<double>(graph.node(p.plan.outputs.at(0)).type.elementCount()) * (bf16 ? 2 : 4);
      launch.predictedSeconds = bytes / target.level("GMEM").attainableBandwidth + target.graphLaunchOverhead;
    }
    if (p.plan.kind == LaunchPlan::Kind::Tile) {
      TensorCorePlan tc = planTensorCoreGemm(graph, p.plan, launch.instructions, stored, names, target);
      if (tc.gemm) {
        // An operand kept in f32 (what atomics accumulated: a scatter-add, a
        // split sum) reaches the tensor cores through a copy rounded to bf16.
        for (GemmOperandPlacement* operand : {&tc.gemm->a, &tc.gemm->b})
          if (arrays.at(operand->array).ctype == "float") llmc::stageOperand(*operand, *tc.gemm);
        const TensorCoreGemm& gemm = *tc.gemm;
        try {
          WrittenKernel epilogue = writeGemmEpilogue(graph, p.plan, arrays, names, {gemm.contraction, gemm.batch, gemm.m, gemm.n});
          const int stagedA = stageOperand(launch, gemm.a, "a", gemm), stagedB = stageOperand(launch, gemm.b, "b", gemm);
          const std::string function =
              resolveBases(gemmKernelSource(p, gemm, epilogue, stagedA, stagedB, launch), launch);
          kernelsSource_ += function;
          const char* tileLibrary = gemm.library == TensorCoreGemm::Library::Sm90 ? "llmc/gemm_sm90.cuh" : "llmc/gemm_sm80.cuh";
          tileLibraries_.insert(tileLibrary);
          launch.source = translationUnit(tileLibrary, function);
          module_.launches.push_back(std::move(launch));
          return;
        } catch (const EpilogueUnsupported& e) {
          tc.scalarReason = e.what();
        }
      }
      launch.instructions.scalarReason = tc.scalarReason;
    }
    const TensorCoreStreamPlan tcStream =
        bf16 && p.plan.kind == LaunchPlan::Kind::Tile ? planTensorCoreStream(graph, p.plan, stored, arrays, names, target)
                                                      : TensorCoreStreamPlan{};
    const WrittenKernel written =
        tcStream.stream ? writeTensorCoreStream(graph, p.plan, arrays, names, *tcStream.stream) : pw;
    if (tcStream.stream) {
      launch.grid = {written.grid, 1, 1};
      launch.block = written.block;
      launch.dynamicSmemBytes = tcStream.stream->smemBytes;
      launch.instructions.tensorCores = tcStream.stream->describe();
      launch.stream = *tcStream.stream;
    } else if (!tcStream.reason.empty() && launch.instructions.scalarReason.empty()) {
      launch.instructions.scalarReason = tcStream.reason;
    }
    if (!tcStream.stream)
      for (NodeId o : p.plan.outputs)
        for (NodeId r : written.reads)
          if (elementwiseInPlace(graph, p.plan, o, r, arrays) || stagedRowInPlace(graph, p.plan, o, r, arrays, pw.stagedRows))
            launch.inPlace.push_back({bufferOf.at(o), bufferOf.at(r)});
    // The stream's staged tiles: their copies' launches, before the stream's.
    std::vector<std::pair<const StreamTile*, int>> stagedBuffers;
    if (tcStream.stream)
      for (const StreamTile* tile : tcStream.stream->loadedTiles())
        if (tile->staging)
          stagedBuffers.emplace_back(tile, staging_.stage(module_, kernelsSource_, launch, tile->staging->placement,
                                                          bufferOf.at(tile->layout.array), names[static_cast<size_t>(tile->value)],
                                                          1, 1, target, kPrelude));
    auto stagedBuffer = [&](const StreamTile* tile) {
      return std::find_if(stagedBuffers.begin(), stagedBuffers.end(), [&](const auto& s) { return s.first == tile; })->second;
    };
    std::string params;
    if (tcStream.stream && tcStream.stream->issuer == MmaIssuer::Warpgroup)
      for (const StreamTile* tile : tcStream.stream->loadedTiles()) {
        const int buffer = tile->staging ? stagedBuffer(tile) : bufferOf.at(tile->layout.array);
        launch.tensorMaps.push_back(streamTensorMap(*tile, *tcStream.stream, buffer));
        params += fmt::format("{}const __grid_constant__ llmc::sm90::TmaDescriptor {}", params.empty() ? "" : ", ",
                              tile->tensorMap);
      }
    for (NodeId o : p.plan.outputs) {
      launch.params.push_back({bufferOf.at(o), true});
      params += fmt::format("{}{}* __restrict__ {}", params.empty() ? "" : ", ", arrays.at(o).ctype, arrays.at(o).param);
    }
    for (NodeId r : written.reads) {
      launch.params.push_back({bufferOf.at(r), false});
      params += fmt::format("{}const {}* __restrict__ {}", params.empty() ? "" : ", ", arrays.at(r).ctype,
                            arrays.at(r).param);
    }
    // Where the warps load the tiles (cp.async), the staged copies by pointer
    // (a tile the stream reads twice, once).
    std::set<std::string> stagedParams;
    if (tcStream.stream && tcStream.stream->issuer == MmaIssuer::Warp)
      for (const auto& [tile, buffer] : stagedBuffers)
        if (stagedParams.insert(tile->staging->param).second) {
          launch.params.push_back({buffer, false});
          params += fmt::format("{}const llmc_bf16* __restrict__ {}", params.empty() ? "" : ", ", tile->staging->param);
        }
    const std::string about = launchComment(p, pw, written, tcStream.stream ? &*tcStream.stream : nullptr);
    const std::string bounds = tcStream.stream ? fmt::format("{}, {}", launch.block, tcStream.stream->residentBlocks)
                                               : fmt::format("{}", launch.block);
    const std::string function = resolveBases(
        fmt::format("\n// {}: {} blocks x {} threads. Instruction selection: {}.\n{}"
                    "extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}}}\n",
                    launch.name, launch.grid[0], launch.block, launch.instructions.describe(), about, bounds,
                    launch.name, params, written.body),
        launch);
    kernelsSource_ += function;
    const char* streamLibrary = !tcStream.stream                                   ? nullptr
                                : tcStream.stream->issuer == MmaIssuer::Warpgroup ? "llmc/stream_wgmma.cuh"
                                                                                  : "llmc/stream_mma.cuh";
    if (streamLibrary) tileLibraries_.insert(streamLibrary);
    launch.source = translationUnit(streamLibrary, function);
    module_.launches.push_back(std::move(launch));
  }

  // The comment above a launch's function: how its grid covers the work.
  std::string launchComment(const ScheduledLaunch& p, const WrittenKernel& pw, const WrittenKernel& written,
                            const TensorCoreStream* stream) const {
    const Graph& graph = graph_;
    std::string about;
    if (p.plan.kind == LaunchPlan::Kind::Tile && isGridSum(graph, p.plan)) {
      about = "// GRID: " + pw.streamNote + ".\n";
    } else if (stream) {
      about = fmt::format("// GRID: one block per 64 rows of {} and position of the other group axes; 4 warps of 16 rows.\n// {}.\n",
                          stream->rows.name, written.streamNote);
    } else if (p.plan.kind == LaunchPlan::Kind::Tile) {
      std::string axes;
      for (const Axis& a : p.plan.groupAxes)
        axes += fmt::format("{}{}:{}/{}", axes.empty() ? "" : " ", a.name, a.size, p.plan.tiles.at(a.name));
      about = fmt::format("// GRID: one block per tile of [{}] (size/tile); threads over the tile's points.\n",
                          axes.empty() ? "one point" : axes);
      if (!pw.streamNote.empty()) about += "// " + pw.streamNote + ".\n";
    } else if (p.plan.kind == LaunchPlan::Kind::Scan) {
      const ScanLayout& l = p.plan.scan.value();
      about = fmt::format("// GRID: one block per {} lines (positions of the axes but {}), {} threads a line.\n// {}.\n",
                          l.linesPerBlock, l.along, l.slices, written.streamNote);
    } else if (p.plan.kind == LaunchPlan::Kind::Scatter) {
      about = "// A scatter-add: one thread per value, atomic adds into the zeroed f32 array.\n";
    } else {
      about = "// Zeroes an array that atomic adds accumulate into.\n";
    }
    return about;
  }

  // `function` with its constant bases resolved (constant_bases.h), the
  // launch's pointers moved where they may be.
  std::string resolveBases(const std::string& function, KernelLaunch& launch) const {
    return resolveConstantBases(function, launch.params, [this](int buffer) {
      auto it = paramNames_.find(buffer);
      return it == paramNames_.end() ? std::string() : it->second;
    });
  }

  // A staged GEMM operand (gemm_staging.h): a scratch buffer and the launch
  // that fills it, before the GEMM's; the buffer's index (-1: not staged).
  int stageOperand(const KernelLaunch& gemmLaunch, const GemmOperandPlacement& operand, const char* role,
                   const TensorCoreGemm& gemm) {
    if (!operand.staged) return -1;
    return staging_.stage(module_, kernelsSource_, gemmLaunch, operand, list_.bufferOf.at(operand.array), role,
                          gemm.batchOuter, gemm.batchInner, target_, kPrelude);
  }

  // A launch on the tile library: the epilogue functor (the launch's work
  // after the contraction), the config, and the kernel that runs the GEMM.
  // `stagedA`, `stagedB`: the scratch buffers of staged operands (-1: read in place).
  std::string gemmKernelSource(const ScheduledLaunch& planned, const TensorCoreGemm& gemm, const WrittenKernel& epilogue,
                               int stagedA, int stagedB, KernelLaunch& launch) const {
    const auto& arrays = list_.arrays;
    const auto& bufferOf = list_.bufferOf;
    auto name = [&](NodeId id) { return list_.names[static_cast<size_t>(id)]; };
    const bool sm90 = gemm.library == TensorCoreGemm::Library::Sm90;
    const NodeId aArray = gemm.a.array, bArray = gemm.b.array;
    std::string members, init, params;
    auto pointer = [&](NodeId id, bool written) {
      launch.params.push_back({bufferOf.at(id), written});
      const StoredArray& arr = arrays.at(id);
      params += fmt::format("{}{}{}* __restrict__ {}", params.empty() ? "" : ", ", written ? "" : "const ", arr.ctype, arr.param);
    };
    for (NodeId o : planned.plan.outputs) {
      pointer(o, true);
      members += fmt::format("  {}* {};\n", arrays.at(o).ctype, arrays.at(o).param);
      init += (init.empty() ? "" : ", ") + arrays.at(o).param;
    }
    for (NodeId r : epilogue.reads) {
      pointer(r, false);
      members += fmt::format("  const {}* {};\n", arrays.at(r).ctype, arrays.at(r).param);
      init += (init.empty() ? "" : ", ") + arrays.at(r).param;
    }
    if (sm90) {
      launch.tensorMaps = {tensorMapOf("A", stagedA >= 0 ? stagedA : bufferOf.at(aArray), gemm.a, gemm, gemm.BM),
                           tensorMapOf("B", stagedB >= 0 ? stagedB : bufferOf.at(bArray), gemm.b, gemm,
                                       gemm.BN / gemm.clusterM)};
    } else {
      std::set<NodeId> passed = epilogue.reads;
      for (auto [operand, staged, param] : {std::tuple{aArray, stagedA, "g_staged_a"}, std::tuple{bArray, stagedB, "g_staged_b"}})
        if (staged >= 0) {
          launch.params.push_back({staged, false});
          params += fmt::format("{}const llmc_bf16* __restrict__ {}", params.empty() ? "" : ", ", param);
        } else if (passed.insert(operand).second) {
          pointer(operand, false);
        }
    }
    launch.grid = {gemm.grid[0], gemm.grid[1], gemm.grid[2]};
    launch.block = gemm.threads;
    launch.dynamicSmemBytes = gemm.smemBytes;
    launch.instructions.tensorCores = gemm.describe();
    launch.gemm = gemm;
    const std::string& n = launch.name;
    auto operandNote = [&](const char* role, const GemmOperandPlacement& o) {
      return fmt::format("{} = {}{} ({}-major, {} x {}, leading dimension {})", role, name(o.array),
                         o.offset ? fmt::format(" from element {}", o.offset) : "", o.kMajor ? "K" : "MN", o.rows,
                         o.contiguous, o.ld);
    };
    std::string text = fmt::format(
        "\n// {}: {} x {} x {} blocks x {} threads, {} bytes of dynamic shared memory{}. Instruction selection: {}.\n"
        "// Rows [{}], columns [{}], k [{}], batches [{}]; {}; {}.\n"
        "// Tile {}x{}: {}. The work after the contraction is the epilogue functor, at 8 columns per call.\n",
        n, launch.grid[0], launch.grid[1], launch.grid[2], launch.block, launch.dynamicSmemBytes,
        sm90 ? " (persistent: one block per SM at most)" : "", launch.instructions.describe(), axisList(gemm.m),
        axisList(gemm.n), axisList(gemm.k), axisList(gemm.batch), operandNote("A", gemm.a), operandNote("B", gemm.b),
        gemm.BM, gemm.BN, gemm.tileChoice);
    // The inputs' members and statements, those `which` selects, each after `indent`.
    using Input = WrittenKernel::EpilogueInput;
    auto inputLines = [&](auto which, std::string Input::*part, const char* indent, const char* after) {
      std::string out;
      for (const Input& input : epilogue.epilogueInputs)
        if (which(input)) out += indent + input.*part + after;
      return out;
    };
    auto all = [](const Input&) { return true; };
    auto atRows = [](const Input& i) { return i.atRows; };
    auto notAtRows = [](const Input& i) { return !i.atRows; };
    auto inputMembers = [&](auto which) {
      const std::string list = inputLines(which, &Input::declaration, " ", ";");
      return list.empty() ? std::string() : list + " ";
    };
    const char* signature = "  __device__ void {}(llmc::BatchIndex batch, int row, int col, {}& in) const {{\n{}  }}\n";
    text += fmt::format("struct {}_epilogue {{\n{}", n, members);
    if (gemm.inputBytes > 0) {
      // The library loads what varies with the rows ahead into shared memory
      // (gemm_sm90.cuh, kInputBytes): Ahead, by prefetch(); the rest by
      // load_columns(), beside the piece as load() does.
      text += fmt::format("  struct Ahead {{{}}};\n  struct Inputs : Ahead {{{}}};\n", inputMembers(atRows), inputMembers(notAtRows));
      text += fmt::format(fmt::runtime(signature), "load", "Inputs", inputLines(all, &Input::load, "    ", "\n"));
      text += fmt::format(fmt::runtime(signature), "load_columns", "Inputs", inputLines(notAtRows, &Input::load, "    ", "\n"));
      text += fmt::format(fmt::runtime(signature), "prefetch", "Ahead", inputLines(atRows, &Input::prefetch, "    ", "\n"));
    } else {
      text += fmt::format("  struct Inputs {{{}}};\n", inputMembers(all));
      text += fmt::format(fmt::runtime(signature), "load", "Inputs", inputLines(all, &Input::load, "    ", "\n"));
    }
    auto indented = [](const std::string& lines, const char* indent) {
      std::string out;
      for (size_t at = 0; at < lines.size();) {
        const size_t end = lines.find('\n', at);
        out += indent + lines.substr(at, end - at + 1);
        at = end + 1;
      }
      return out;
    };
    text += "  __device__ void operator()(llmc::BatchIndex batch, int row, int col, const float (&v)[8], "
            "int count, const Inputs& in) const {\n";
    const std::string body = indented(epilogue.body, "  ");
    text += body + "  }\n};\n";
    text += fmt::format("using {}_config = {};\nstatic_assert({}_config::kSmemBytes == {}, \"the launch description's "
                        "dynamic shared memory\");\n",
                        n, gemm.configType(), n, gemm.smemBytes);
    const std::string shape =
        fmt::format("llmc::GemmShape{{{}, {}, {}, {}, {}}}", gemm.M, gemm.N, gemm.K, gemm.batchOuter, gemm.batchInner);
    if (sm90) {
      text += fmt::format("extern \"C\" __global__ void __launch_bounds__({0}_config::kThreads, 1){5} {0}("
                          "const __grid_constant__ llmc::sm90::TmaDescriptor tma_a, const __grid_constant__ "
                          "llmc::sm90::TmaDescriptor tma_b, {1}) {{\n"
                          "  llmc::sm90::gemm<{0}_config>(tma_a, tma_b, {2}, {0}_epilogue{{{3}}}{4});\n}}\n",
                          n, params, shape, init,
                          gemm.splits > 1 ? fmt::format(", llmc::sm90::SplitK{{{}}}", gemm.splits) : "",
                          gemm.clusterM > 1 ? fmt::format(" __cluster_dims__({}, 1, 1)", gemm.clusterM) : "");
    } else {
      auto operand = [&](const GemmOperandPlacement& o, const char* stagedParam) {
        return fmt::format("llmc::GemmOperand{{reinterpret_cast<const llmc::bf16*>({}) + {}, {}, {{{}, {}}}}}",
                           o.staged ? stagedParam : arrays.at(o.array).param, o.offset, o.ld, o.batchOuterStride,
                           o.batchInnerStride);
      };
      text += fmt::format("extern \"C\" __global__ void __launch_bounds__({0}_config::kThreads) {0}({1}) {{\n"
                          "  llmc::sm80::gemm<{0}_config>({2}, {3}, {4}, {0}_epilogue{{{5}}});\n}}\n",
                          n, params, shape, operand(gemm.a, "g_staged_a"), operand(gemm.b, "g_staged_b"), init);
    }
    return text;
  }

  const Graph& graph_;
  const LaunchList& list_;
  const Target& target_;
  const EmitOptions& options_;
  std::map<int, std::string> paramNames_;  // a buffer's parameter name in the functions
  CudaModule module_;
  std::string kernelsSource_;            // every function, in launch order
  StagingCopies staging_;                // gemm_staging.h: the staging launches and their scratch buffers
  std::set<std::string> tileLibraries_;  // the device headers the module includes
};

}  // namespace

CudaModule writeModule(const Graph& graph, const LaunchList& launches, const Target& target,
                       const EmitOptions& options) {
  return ModuleWriter(graph, launches, target, options).run();
}

CudaModule emitCuda(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                    const EmitOptions& options) {
  return writeModule(graph, planLaunches(graph, kernels, options), target, options);
}

}  // namespace llmc
