#include "report/pseudocode.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "analysis/streamability.h"
#include "ir/print.h"
#include "planning/row_products.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

std::string kib(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.2f} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  return fmt::format("{:.1f} KiB", bytes / 1024);
}

class Writer {
 public:
  Writer(const Graph& g, const Target& t) : g_(g), t_(t), names_(printedNames(g)) {}

  std::string kernel(const PlannedKernel& pk) {
    const Kernel& k = pk.kernel;
    const KernelShape& s = pk.shape;
    const Partition& p = pk.partition;
    const KernelCost& c = pk.cost;
    out_.clear();
    if (!c.launched) {  // a join whose parts their own launches write where it has them (codegen/concat_parts.h)
      std::string made;
      for (NodeId o : k.outputs) made += (made.empty() ? "" : ", ") + names_[static_cast<size_t>(o)];
      line(0, fmt::format("kernel {}  on {} ({})", k.name, t_.arch, t_.device), "no launch");
      line(1, fmt::format("GMEM {} made where its parts are written, by the launches that write them", made), "nothing moved");
      return out_;
    }
    line(0, fmt::format("kernel {}  on {} ({})", k.name, t_.arch, t_.device),
         fmt::format("predicted {:.1f} us, bound by {}", c.predicted * 1e6, c.bottleneck));
    line(0, "", fmt::format("SMEM {} of {} per block; HBM moves {}", kib(c.level("SMEM").memoryBytes),
                            kib(c.level("SMEM").capacityBytes), kib(c.level("GMEM").movedBytes)));

    std::set<NodeId> inside(k.nodes.begin(), k.nodes.end());
    if (const NodeId sum = wholeArraySumOf(g_, k.outputs, inside); sum >= 0) {
      gridSum(k, sum, c);
      return out_;
    }
    if (pk.scan) {
      scan(k, *pk.scan, c);
      return out_;
    }
    std::string grid;
    for (const auto& a : s.groupAxes)
      grid += fmt::format("{}{} in 0..{} step {}", grid.empty() ? "" : ", ", a.name, a.size, p.groupTiles.at(a.name));
    line(0, fmt::format("parallel {} over GRID", grid.empty() ? "(one block)" : grid),
         fmt::format("{} blocks, {:.0f}% of whole waves", c.blocks, c.waveEfficiency * 100));

    // Inputs without the stream axis are loaded once per block.
    for (NodeId in : k.inputs)
      if (!g_.node(in).type.has(s.streamAxis) || p.streamChunk == 0) load(1, in, s, p);

    StreamAnalysis stream;
    if (!s.streamAxis.empty() && p.streamChunk > 0) stream = analyzeStream(g_, inside, s.streamAxis);
    if (stream.streamable && !stream.slots.empty()) {
      std::string head;
      for (size_t i = 0; i < stream.slots.size(); ++i)
        head += fmt::format("{}S{} = {}", head.empty() ? "" : "; ", i,
                            stream.slots[i].kind == AccumulatorSlot::Kind::Max ? "-inf" : "0");
      line(1, "REG  " + head, "accumulator head");
    }
    std::set<NodeId> storedInStream;
    if (p.streamChunk > 0) {
      line(1, fmt::format("for {0}0 in 0..{1} step {2}", s.streamAxis, s.streamExtent, p.streamChunk),
           fmt::format("stream: {} chunks", c.chunks));
      for (NodeId in : k.inputs)
        if (g_.node(in).type.has(s.streamAxis)) load(2, in, s, p);
      // A tensor-core stream stores its outputs along the stream that need
      // none of its results at each step (tensor_core_stream.h, stepOutputs).
      std::vector<std::string> eachStep;
      if (c.engine == "tensor-core stream")
        for (NodeId out : stepOutputs(k, stream)) {
          eachStep.push_back(fmt::format("GMEM {} <- {}", names_[static_cast<size_t>(out)], tile(g_.node(out).type, s, p)));
          storedInStream.insert(out);
        }
      body(2, k, stream, eachStep);
    } else {
      body(1, k, stream, {});
    }
    const std::vector<NodeId> rowProducts = rowProductOutputs(g_, k.outputs, k.nodes, s.streamAxis);
    for (NodeId out : k.outputs) {
      if (std::count(rowProducts.begin(), rowProducts.end(), out) || storedInStream.count(out)) continue;
      const Type& ty = g_.node(out).type;
      line(1, fmt::format("GMEM {} <- {}", names_[static_cast<size_t>(out)], tile(ty, s, p)),
           fmt::format("store {}", kib(static_cast<double>(ty.elementCount()) * 2)));
    }
    return out_;
  }

 private:
  // The outputs along the stream that read none of its results.
  std::vector<NodeId> stepOutputs(const Kernel& k, const StreamAnalysis& stream) const {
    const std::set<NodeId> inside(k.nodes.begin(), k.nodes.end());
    std::vector<NodeId> out;
    for (NodeId o : outputsAlongStream(g_, k.outputs, k.nodes, stream.axis))
      if (!readsStreamResults(g_, stream, inside, o)) out.push_back(o);
    return out;
  }

  // A whole array summed over the grid (planning/fusion.h, isWholeArraySum):
  // as codegen/cuda_writer_launches.cpp writes it.
  void gridSum(const Kernel& k, NodeId sum, const KernelCost& c) {
    const Node& x = g_.node(g_.node(sum).operands[0]);
    const bool runs = !x.type.axes.empty();  // 8 consecutive elements a step, as the writer takes them
    line(0, fmt::format("parallel p in 0..{} grid-strided over GRID", x.type.elementCount()),
         fmt::format("{} blocks, {:.0f}% of whole waves", c.blocks, c.waveEfficiency * 100));
    line(1, "REG  partial = 0", "per thread");
    line(1, runs ? "for each run of 8 consecutive p of the thread's share" : "for each p of the thread's share",
         "grid-stride loop");
    for (NodeId in : k.inputs) {  // laid out as the summed array: its 8 at once; else a value an element
      const bool eight = runs && g_.node(in).type.axes == x.type.axes;
      line(2, fmt::format("REG  {}{} <- GMEM {}", names_[static_cast<size_t>(in)], eight ? "[8]" : "", names_[static_cast<size_t>(in)]),
           eight ? "8 at once, 16-byte loads" : "load");
    }
    for (NodeId id : k.nodes) {
      const Node& n = g_.node(id);
      if (n.op != Op::Input && id != sum) line(2, fmt::format("REG  {} = {}", names_[static_cast<size_t>(id)], describe(n)));
    }
    line(2, fmt::format("REG  partial += {}", names_[static_cast<size_t>(x.id)]));
    for (NodeId out : k.outputs)
      if (out != sum) line(2, fmt::format("GMEM {} <- [p]", names_[static_cast<size_t>(out)]), "store");
    line(1, "REG  partial = sum of the block's partials", "warp shuffles, shared memory");
    line(1, fmt::format("GMEM {} += partial", names_[static_cast<size_t>(sum)]), "one atomic add per block, zeroed first");
  }

  // A blocked scan (planning/scan_layout.h), as codegen/cuda_writer_scan.cpp writes it.
  void scan(const Kernel& k, const ScanLayout& l, const KernelCost& c) {
    const Node& n = g_.node(l.scan);
    const std::string& name = names_[static_cast<size_t>(n.id)];
    // A linear recurrence carries the pair (a, b) of the step h -> a h + b
    // (ir.h, isLinearScan); a sum or maximum one value.
    const bool linear = isLinearScan(n);
    // A user's operator (isMonoidScan) carries its value and whether it has one.
    const std::string identity = linear ? "(1, 0)" : n.combine ? "(none)" : n.reduce == ReduceOp::Sum ? "0" : "-inf";
    std::string lines;
    for (const Axis& a : l.lines) lines += fmt::format("{}{}", lines.empty() ? "" : " ", a.name);
    line(0, fmt::format("parallel lines [{}] in 0..{} step {} over GRID", lines, l.lineCount, l.linesPerBlock),
         fmt::format("{} blocks of {} threads, {:.0f}% of whole waves", c.blocks, l.threads(), c.waveEfficiency * 100));
    line(1, fmt::format("REG  carry = {}", identity), "per line");
    line(1, fmt::format("for {0}0 in 0..{1} step {2}{3}", l.along, l.positions, int64_t{l.slices} * l.perSlice,
                        n.hi ? ", from the end" : ""),
         fmt::format("{} rounds", l.rounds));
    line(2, fmt::format("parallel {} slices of {} positions over the line's threads", l.slices, l.perSlice));
    for (NodeId in : k.inputs)
      line(3, fmt::format("REG  {}[{}] <- GMEM {}", names_[static_cast<size_t>(in)], l.perSlice, names_[static_cast<size_t>(in)]), "load");
    for (NodeId id : k.nodes) {
      const Node& m = g_.node(id);
      if (m.op != Op::Input && id != n.id) line(3, fmt::format("REG  {} = {}", names_[static_cast<size_t>(id)], describe(m)));
    }
    if (linear)
      line(3, fmt::format("REG  v[{}] = the steps h -> {} h + {} composed over the slice{}", l.perSlice,
                          names_[static_cast<size_t>(n.operands[1])], names_[static_cast<size_t>(n.operands[0])],
                          n.lagged ? " (each coefficient the previous position's)" : ""));
    else
      line(3, fmt::format("REG  v[{}] = running {} of {} over the slice", l.perSlice, scanOperatorName(n),
                          names_[static_cast<size_t>(n.operands[0])]));
    if (l.slices > 1)
      line(2, fmt::format("SMEM totals[{}{}] = the slices' totals, scanned", l.threads(), l.parts > 1 ? " x 2" : ""), "barriers");
    const std::string op = scanOperatorName(n);
    const std::string combined = linear      ? "the carry, then the steps of the slices before, then v"
                                 : n.combine ? fmt::format("{} over the carry, the totals before the slice, v", op)
                                             : "carry + the totals before the slice + v";
    line(2, fmt::format("GMEM {} <- {}{}", name, combined, n.lo ? ", each position's own left out" : ""), "store");
    line(2, linear      ? "REG  carry = the carry, then the round's steps"
            : n.combine ? fmt::format("REG  carry = {}(carry, the round's total)", op)
                        : "REG  carry += the round's total");
  }

  void line(int depth, const std::string& text, const std::string& note = "") {
    std::string l = std::string(2 * static_cast<size_t>(depth), ' ') + text;
    if (!note.empty()) l += std::string(l.size() < 64 ? 64 - l.size() : 1, ' ') + "# " + note;
    out_ += l + "\n";
  }

  std::string tile(const Type& t, const KernelShape& s, const Partition& p) const {
    std::string out = "[";
    for (const auto& a : t.axes) {
      int64_t n = a.size;
      if (auto g = p.groupTiles.find(a.name); g != p.groupTiles.end()) n = std::min(n, g->second);
      else if (a.name == s.streamAxis && p.streamChunk > 0) n = std::min(n, p.streamChunk);
      out += fmt::format("{}{}:{}", out.size() > 1 ? " " : "", a.name, n);
    }
    return out + "]";
  }

  void load(int depth, NodeId in, const KernelShape& s, const Partition& p) {
    const Type& ty = g_.node(in).type;
    line(depth, fmt::format("SMEM {}_s{} <- {}", names_[static_cast<size_t>(in)], tile(ty, s, p), names_[static_cast<size_t>(in)]),
         "load");
  }

  // `eachStep`: the lines of the stores made at each step of the stream.
  void body(int depth, const Kernel& k, const StreamAnalysis& stream, const std::vector<std::string>& eachStep) {
    std::set<NodeId> tail(stream.tail.begin(), stream.tail.end());
    std::set<NodeId> aggregates(stream.aggregates.begin(), stream.aggregates.end());
    for (NodeId id : k.nodes) {
      const Node& n = g_.node(id);
      if (n.op == Op::Input || tail.count(id) || aggregates.count(id)) continue;
      line(depth, fmt::format("REG  {} = {}", names_[static_cast<size_t>(id)], describe(n)),
           n.op == Op::Contract ? "tensor cores" : "");
    }
    for (size_t i = 0; i < stream.slots.size(); ++i) {
      const auto& slot = stream.slots[i];
      std::string core;
      for (const auto& f : slot.core) {
        std::string base = names_[static_cast<size_t>(f.node)];
        if (f.pivoted()) base = fmt::format("({} - {}@0)", base, names_[static_cast<size_t>(f.pivotOf)]);
        if (f.kind == StreamFactor::Kind::Exp) base = "exp(" + base + (slot.rescaledBy >= 0 ? " - m_new)" : ")");
        if (f.kind == StreamFactor::Kind::Mask) base = "[" + base + "]";
        if (f.kind == StreamFactor::Kind::NotMask) base = "[not " + base + "]";
        if (f.power != 1) base += fmt::format("^{}", f.power);
        core += (core.empty() ? "" : " * ") + base;
      }
      if (core.empty()) core = "1";
      if (slot.kind == AccumulatorSlot::Kind::Max) {
        line(depth, fmt::format("S{0} = max(S{0}, max over {1} of {2})", i, stream.axis, core), "accumulator body");
      } else if (slot.rescaledBy >= 0) {
        line(depth, fmt::format("S{0} = S{0} * exp(m_old - m_new) + sum over {1} of {2}", i, stream.axis, core),
             "rescaled as the max moves");
      } else {
        line(depth, fmt::format("S{0} = S{0} + sum over {1} of {2}", i, stream.axis, core), "accumulator body");
      }
    }
    // Row products (planning/row_products.h) are added a step at a time.
    for (NodeId out : rowProductOutputs(g_, k.outputs, k.nodes, k.streamAxis))
      line(depth, fmt::format("GMEM {} += {} over the block's {}", names_[static_cast<size_t>(out)],
                              names_[static_cast<size_t>(out)], g_.node(out).axes[0]),
           "an atomic add an element, zeroed first");
    for (const std::string& store : eachStep) line(depth, store, "store, each step");
    if (!stream.slots.empty()) {
      std::string after;
      for (NodeId id : stream.aggregates) after += (after.empty() ? "" : ", ") + names_[static_cast<size_t>(id)];
      for (NodeId id : stream.tail) after += ", " + names_[static_cast<size_t>(id)];
      line(depth - 1, "REG  " + after + " from S0..S" + std::to_string(stream.slots.size() - 1), "accumulator tail");
    }
  }

  std::string describe(const Node& n) const {
    auto name = [&](size_t i) { return names_[static_cast<size_t>(n.operands[i])]; };
    std::string axes;
    for (const auto& a : n.axes) axes += (axes.empty() ? "" : ", ") + a;
    switch (n.op) {
      case Op::Contract: return fmt::format("contract({}, {}, {})", name(0), name(1), axes);
      case Op::Reduce: return fmt::format("{}({}, {})", reduceName(n.reduce), name(0), axes);
      case Op::Gather: return fmt::format("gather({}, {}, {})", name(0), name(1), axes);
      case Op::Unary: return fmt::format("{}({})", unaryName(n.unary), name(0));
      case Op::Binary: return fmt::format("{}({}, {})", binaryName(n.binary), name(0), name(1));
      case Op::Compare: return fmt::format("{} {} {}", name(0), compareSymbol(n.compare), name(1));
      case Op::Select: return fmt::format("where({}, {}, {})", name(0), name(1), name(2));
      case Op::Constant: return fmt::format("{}", n.value);
      case Op::Pos: return fmt::format("pos({})", n.axes[0]);
      default: {
        std::string ops;
        for (size_t i = 0; i < n.operands.size(); ++i) ops += (i ? ", " : "") + name(i);
        return fmt::format("{}({})", opName(n.op), ops);
      }
    }
  }

  const Graph& g_;
  const Target& t_;
  std::vector<std::string> names_;
  std::string out_;
};

}  // namespace

std::string printPseudocode(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target) {
  Writer w(graph, target);
  std::string out;
  for (const auto& k : kernels) out += w.kernel(k) + "\n";
  return out;
}

}  // namespace llmc
