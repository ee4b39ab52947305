#include "analysis/streamability.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/print.h"

namespace llmc {

namespace {

using Factor = StreamFactor;
using FactorKind = StreamFactor::Kind;

// A value inside the stream as a sum of terms coefficient * core * scale: the
// core a product of chunk-local factors, the scale a product of the stream's
// own aggregates (known only at the end) and exps of them.
struct Term {
  double coefficient = 1;
  std::vector<Factor> core;
  std::vector<Factor> scale;
};
using Form = std::vector<Term>;

constexpr size_t kMaxTerms = 16;  // products of sums grow fast; past this, give up

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Sorts factors and merges repeated ones (x * x^-1 = 1).
std::vector<Factor> normalize(std::vector<Factor> factors) {
  auto key = [](const Factor& f) { return std::tie(f.kind, f.node, f.pivotOf, f.pivotKeeps); };
  std::sort(factors.begin(), factors.end(), [&](const Factor& a, const Factor& b) { return key(a) < key(b); });
  std::vector<Factor> out;
  for (const auto& f : factors) {
    if (!out.empty() && key(out.back()) == key(f)) {
      out.back().power += f.power;
      if (out.back().power == 0) out.pop_back();
    } else {
      out.push_back(f);
    }
  }
  return out;
}

Term multiply(const Term& a, const Term& b) {
  Term t;
  t.coefficient = a.coefficient * b.coefficient;
  t.core = a.core;
  t.core.insert(t.core.end(), b.core.begin(), b.core.end());
  t.core = normalize(t.core);
  t.scale = a.scale;
  t.scale.insert(t.scale.end(), b.scale.begin(), b.scale.end());
  t.scale = normalize(t.scale);
  return t;
}

bool scaleFree(const Form& f) {
  return std::all_of(f.begin(), f.end(), [](const Term& t) { return t.scale.empty(); });
}

class Analyzer {
 public:
  Analyzer(const Graph& g, const std::set<NodeId>& region, const std::string& axis)
      : g_(g), region_(region), x_(axis) {
    result_.axis = axis;
  }

  StreamAnalysis run() {
    // A value from outside is known before the stream starts only if it does
    // not itself come from the region (through a view, say).
    // (Only the nodes from the region's first to its last are looked at: a
    // path out of the region and back runs between them. The fusion asks
    // about many regions of a graph of tens of thousands of nodes.)
    if (region_.empty()) return fail(-1, fmt::format("nothing in the region reduces axis '{}'", x_));
    std::vector<bool> fromRegion(g_.nodes.size(), false);
    for (NodeId id = *region_.begin(); id <= *region_.rbegin(); ++id) {
      const Node& n = g_.node(id);
      bool inside = region_.count(n.id) > 0;
      for (NodeId o : n.operands) fromRegion[static_cast<size_t>(n.id)] = fromRegion[static_cast<size_t>(n.id)] ||
                                                                           region_.count(o) || fromRegion[static_cast<size_t>(o)];
      if (!inside) continue;
      for (NodeId o : n.operands)
        if (!region_.count(o) && fromRegion[static_cast<size_t>(o)])
          return fail(n.id, fmt::format("it reads a value computed from the region outside it, which cannot be known "
                                        "before the stream over '{}'",
                                        x_));
    }
    for (NodeId id : region_) {
      if (!visit(g_.node(id))) return result_;
    }
    if (result_.aggregates.empty()) return fail(-1, fmt::format("nothing in the region reduces axis '{}'", x_));
    // What leaves the region along x is written chunk by chunk, so it must not
    // wait for the aggregates (softmax alone: every output needs the whole row).
    for (NodeId id : region_) {
      const Node& n = g_.node(id);
      if (!n.type.has(x_) || !readsAggregates(id) || !leavesRegion(id)) continue;
      return fail(id, fmt::format("its result along '{}' depends on the stream's own aggregates, so it needs the "
                                  "whole axis first",
                                  x_));
    }
    result_.streamable = true;
    return result_;
  }

 private:
  StreamAnalysis fail(NodeId at, std::string reason) {
    result_.streamable = false;
    result_.failedAt = at;
    result_.reason = std::move(reason);
    return result_;
  }

  // A graph output, or read by a node outside the region (the nodes that are,
  // found in one pass when first asked).
  bool leavesRegion(NodeId id) {
    if (!leaving_) {
      leaving_.emplace();
      for (const auto& o : g_.outputs) leaving_->insert(o.node);
      for (size_t i = static_cast<size_t>(*region_.begin()); i < g_.nodes.size(); ++i)
        if (!region_.count(static_cast<NodeId>(i)))
          for (NodeId o : g_.nodes[i].operands)
            if (region_.count(o)) leaving_->insert(o);
    }
    return leaving_->count(id) > 0;
  }

  bool reduces(const Node& n) const {
    switch (n.op) {
      case Op::Reduce:
      case Op::Contract: return contains(n.axes, x_);
      case Op::Gather: return n.axes[0] == x_;
      default: return false;
    }
  }

  // The form of an operand: values from outside the region are known before
  // the stream starts, like the region's own values that do not depend on it.
  Form formOf(NodeId id) const {
    auto form = forms_.find(id);  // only the region's nodes have forms
    if (form == forms_.end()) return {Term{1, {Factor{FactorKind::Value, id, 1}}, {}}};
    return form->second;
  }

  Form pure(NodeId id) const { return {Term{1, {Factor{FactorKind::Value, id, 1}}, {}}}; }
  Form aggregateValue(NodeId id) const { return {Term{1, {}, {Factor{FactorKind::Value, id, 1}}}}; }

  bool visit(const Node& n) {
    const NodeId i = n.id;
    if (n.op == Op::StopGradient) {
      // The same values: a softmax's stop_gradient'ed max is still the running
      // max that rescales its sums.
      forms_[i] = formOf(n.operands[0]);
      return true;
    }
    if (reduces(n)) {
      if (!aggregate(n)) return false;
      forms_[i] = aggregateValue(n.id);
      return true;
    }
    std::vector<Form> operands;
    bool anyScaled = false, anyAlongAxis = false;
    for (NodeId o : n.operands) {
      operands.push_back(formOf(o));
      anyScaled |= readsAggregates(o);
      anyAlongAxis |= g_.node(o).type.has(x_) && region_.count(o);
    }
    const bool alongAxis = n.type.has(x_);
    if (n.op == Op::Scan && contains(n.axes, x_)) {
      // Its own stream (analysis/scan_streams.h), carrying each line's
      // element: not a reduction a region's accumulator holds.
      fail(n.id, fmt::format("a scan along '{}' streams on its own, carrying each line's element; its positions are "
                             "not reduced",
                             x_));
      return false;
    }
    if (touchesAxis(n)) {
      fail(n.id, fmt::format("{} changes the stream axis '{}'", opName(n.op), x_));
      return false;
    }
    if (!alongAxis && anyAlongAxis) {
      fail(n.id, fmt::format("{} takes values along '{}' out of the stream without reducing them", opName(n.op), x_));
      return false;
    }
    if (!anyScaled) {
      forms_[i] = pure(n.id);
      return true;
    }
    if (!alongAxis) {
      // Computed from the aggregates once the stream is done: the tail.
      result_.tail.push_back(n.id);
      forms_[i] = aggregateValue(n.id);
      return true;
    }
    std::optional<Form> f = combine(n, operands);
    if (!f) return false;
    // Kept as the product even where the aggregates cancel (v / s * s): the
    // node itself, computed in the body, would read s before the stream ends.
    forms_[i] = *f;
    derived_.insert(i);
    return true;
  }

  // Axis boxes that split, merge, rename, slice, join or take one position of
  // the stream axis itself.
  bool touchesAxis(const Node& n) const {
    switch (n.op) {
      case Op::Split:
      case Op::Merge:
      case Op::Slice:
      case Op::Rename:
      case Op::Index:
      case Op::Concat:
        return contains(n.axes, x_);
      default:
        return false;
    }
  }

  // The laws for a chunk-local node one of whose operands carries aggregates.
  std::optional<Form> combine(const Node& n, const std::vector<Form>& in) {
    auto nonlinear = [&](const char* what) -> std::optional<Form> {
      fail(n.id, fmt::format("{} of a value that depends on the stream's own aggregates needs the whole axis '{}' "
                             "first",
                             what, x_));
      return std::nullopt;
    };
    switch (n.op) {
      case Op::Binary:
        switch (n.binary) {
          case BinaryOp::Add:
          case BinaryOp::Sub: {
            Form out = in[0];
            for (Term t : in[1]) {
              if (n.binary == BinaryOp::Sub) t.coefficient = -t.coefficient;
              out.push_back(t);
            }
            takeAboutPivot(out);
            return bounded(n, out);
          }
          case BinaryOp::Mul: {
            Form out;
            for (const Term& a : in[0])
              for (const Term& b : in[1]) out.push_back(multiply(a, b));
            return bounded(n, out);
          }
          case BinaryOp::Div: {
            if (in[1].size() != 1) return nonlinear("division by a sum");
            Term inverse = in[1][0];
            inverse.coefficient = 1 / inverse.coefficient;
            for (auto& f : inverse.core) f.power = -f.power;
            for (auto& f : inverse.scale) f.power = -f.power;
            Form out;
            for (const Term& a : in[0]) out.push_back(multiply(a, inverse));
            return out;
          }
          default:
            return nonlinear(binaryName(n.binary));
        }
      case Op::Unary:
        if (n.unary == UnaryOp::Neg) {
          Form out = in[0];
          for (auto& t : out) t.coefficient = -t.coefficient;
          return out;
        }
        if (n.unary == UnaryOp::Exp) return exponential(n, in[0]);
        return nonlinear(unaryName(n.unary));
      case Op::Select: {
        if (!scaleFree(in[0])) return nonlinear("a condition");
        Form out;
        for (Term t : in[1]) {
          t.core = normalize([&] { auto c = t.core; c.push_back({FactorKind::Mask, n.operands[0], 1}); return c; }());
          out.push_back(t);
        }
        for (Term t : in[2]) {
          t.core = normalize([&] { auto c = t.core; c.push_back({FactorKind::NotMask, n.operands[0], 1}); return c; }());
          out.push_back(t);
        }
        return bounded(n, out);
      }
      case Op::Transpose:
      case Op::Broadcast:
        return in[0];  // the same values, laid out or repeated along another axis
      case Op::Compare: return nonlinear("a comparison");
      case Op::Cast: return nonlinear("a cast");
      case Op::Reduce: return nonlinear(n.reduce == ReduceOp::Sum ? "a sum over another axis" : "a max over another axis");
      case Op::Contract: return nonlinear("a contraction over another axis");
      default: return nonlinear(opName(n.op));
    }
  }

  // c (a - m), a a chunk-local value along the stream and m an aggregate (or
  // a value made from them): c ((a - p) - (m - p)), p a's pivot.
  void takeAboutPivot(Form& f) const {
    if (f.size() != 2) return;
    Term* local = &f[0];
    Term* aggregate = &f[1];
    if (local->core.empty()) std::swap(local, aggregate);
    auto single = [](const std::vector<Factor>& factors) {
      return factors.size() == 1 && factors[0].kind == FactorKind::Value && factors[0].power == 1 &&
             !factors[0].pivoted();
    };
    if (!single(local->core) || !local->scale.empty() || !aggregate->core.empty() || !single(aggregate->scale) ||
        local->coefficient != -aggregate->coefficient)
      return;
    const NodeId a = local->core[0].node, m = aggregate->scale[0].node;
    if (!g_.node(a).type.has(x_)) return;  // known before the stream: nothing cancels in a sum over it
    for (Factor* factor : {&local->core[0], &aggregate->scale[0]}) factor->pivotOf = a, factor->pivotKeeps = m;
  }

  std::optional<Form> bounded(const Node& n, Form f) {
    if (f.size() > kMaxTerms) {
      fail(n.id, fmt::format("the value expands to more than {} terms", kMaxTerms));
      return std::nullopt;
    }
    return f;
  }

  // exp(a + offsets) = exp(a) * prod exp(offset): the chunk-local part stays in
  // the core, each additive aggregate becomes a factor of the scale. Pivots
  // cancel under exp (exp((a - p) - (m - p)) = exp(a) exp(-m)): the factors
  // made here leave them out.
  std::optional<Form> exponential(const Node& n, const Form& in) {
    Term out;
    bool haveCore = false;
    for (const Term& t : in) {
      if (!t.core.empty()) {
        if (haveCore || !t.scale.empty() || t.coefficient != 1 || t.core.size() != 1 ||
            t.core[0].kind != FactorKind::Value || t.core[0].power != 1) {
          fail(n.id, "exp of a value that is not a chunk-local value plus aggregates");
          return std::nullopt;
        }
        out.core.push_back({FactorKind::Exp, t.core[0].node, 1});
        haveCore = true;
      } else {
        if (t.scale.size() != 1 || t.scale[0].kind != FactorKind::Value || t.scale[0].power != 1 ||
            (t.coefficient != 1 && t.coefficient != -1)) {
          fail(n.id, "exp of a product of aggregates");
          return std::nullopt;
        }
        out.scale.push_back({FactorKind::Exp, t.scale[0].node, static_cast<int>(t.coefficient)});
      }
    }
    out.scale = normalize(out.scale);
    return Form{out};
  }

  bool aggregate(const Node& n) {
    result_.aggregates.push_back(n.id);
    auto addSlot = [&](AccumulatorSlot::Kind kind, const Term& t) {
      // The aggregate's value is the sum of its terms: the slot times the scale.
      auto record = [&](int index) {
        result_.aggregateTerms[n.id].push_back({t.coefficient, index, t.scale});
      };
      AccumulatorSlot slot;
      slot.kind = kind;
      slot.core = t.core;
      slot.axes = n.axes;
      slot.aggregates = {n.id};
      // exp(core) * exp(-m) with m the running max of the same core: the
      // online-softmax rescaling keeps the sum bounded as m grows.
      // exp(core)^k * exp(-m)^k the same way (a softmax squared), with the
      // rescaling raised to k.
      for (const auto& s : t.scale) {
        if (s.kind != FactorKind::Exp || s.power > -1) continue;
        const Node& m = g_.node(s.node);
        bool maxOfCore = m.op == Op::Reduce && m.reduce == ReduceOp::Max &&
                         std::any_of(t.core.begin(), t.core.end(), [&](const Factor& f) {
                           return f.kind == FactorKind::Exp && sameValue(g_, f.node, m.operands[0]) &&
                                  f.power == -s.power;
                         });
        if (maxOfCore) slot.rescaledBy = s.node, slot.rescalePower = -s.power;
      }
      // Terms with the same core share one accumulator, across aggregates too
      // (the mean's sum of x is also the variance's).
      for (auto& other : result_.slots) {
        if (other.kind == slot.kind && other.core == slot.core && other.axes == slot.axes &&
            other.rescaledBy == slot.rescaledBy && other.rescalePower == slot.rescalePower) {
          if (std::find(other.aggregates.begin(), other.aggregates.end(), n.id) == other.aggregates.end())
            other.aggregates.push_back(n.id);
          record(static_cast<int>(&other - result_.slots.data()));
          return;
        }
      }
      result_.slots.push_back(slot);
      record(static_cast<int>(result_.slots.size()) - 1);
    };
    if (n.op == Op::Reduce && n.reduce == ReduceOp::Max) {
      Form in = formOf(n.operands[0]);
      if (!scaleFree(in)) {
        fail(n.id, fmt::format("max over '{}' of a value that depends on the stream's own aggregates: a maximum "
                               "does not factor like a sum",
                               x_));
        return false;
      }
      addSlot(AccumulatorSlot::Kind::Max, in[0]);
      return true;
    }
    Form in;
    if (n.op == Op::Contract) {
      for (const Term& a : formOf(n.operands[0]))
        for (const Term& b : formOf(n.operands[1])) in.push_back(multiply(a, b));
    } else if (n.op == Op::Gather) {
      in = formOf(n.operands[0]);
      if (!scaleFree(in)) {
        fail(n.id, "gather along the stream axis of a value that depends on the stream's own aggregates");
        return false;
      }
      in[0].core.push_back({FactorKind::Mask, n.operands[1], 1});  // the one-hot of the index
    } else {
      in = formOf(n.operands[0]);
    }
    // A factor of the scale comes out of the sum only where it is constant
    // along every axis the aggregate reduces, not just along x: summed over
    // x and y, a per-y statistic m(y) times sum_x a(x, y) is no slot times m.
    for (const Term& t : in)
      for (const Factor& f : t.scale)
        for (const std::string& axis : n.axes)
          if (axis != x_ && g_.node(f.node).type.has(axis)) {
            fail(n.id, fmt::format("a sum over '{}' and '{}' of a value scaled by an aggregate of the stream that "
                                   "varies along '{}': the factor does not come out of the sum",
                                   x_, axis, axis));
            return false;
          }
    for (const Term& t : in) addSlot(AccumulatorSlot::Kind::Sum, t);
    return true;
  }

  const Graph& g_;
  const std::set<NodeId>& region_;
  std::string x_;
  std::unordered_map<NodeId, Form> forms_;          // per region node, once visited
  // Nodes whose form combines the stream's aggregates, even where they cancel
  // (v / s * s): computed whole in the body, they would read an aggregate
  // before the stream ends, so they are only ever taken as their forms.
  std::unordered_set<NodeId> derived_;
  bool readsAggregates(NodeId id) const { return derived_.count(id) > 0 || !scaleFree(formOf(id)); }
  std::optional<std::unordered_set<NodeId>> leaving_;  // leavesRegion's answers
  StreamAnalysis result_;
};

}  // namespace

std::set<NodeId> withStopGradients(const Graph& graph, std::set<NodeId> nodes) {
  if (nodes.empty()) return nodes;
  // In order: a stop_gradient of one is seen after it (and after the first).
  for (NodeId id : graph.stopGradients)
    if (id > *nodes.begin() && graph.node(id).op == Op::StopGradient && nodes.count(graph.node(id).operands[0]))
      nodes.insert(id);
  return nodes;
}

StreamAnalysis analyzeStream(const Graph& graph, const std::set<NodeId>& region, const std::string& axis) {
  return Analyzer(graph, withStopGradients(graph, region), axis).run();
}

bool readsStreamResults(const Graph& g, const StreamAnalysis& analysis, const std::set<NodeId>& region, NodeId value) {
  const std::set<NodeId> results(analysis.aggregates.begin(), analysis.aggregates.end());
  std::set<NodeId> seen;
  std::vector<NodeId> pending{value};
  while (!pending.empty()) {
    const NodeId n = pending.back();
    pending.pop_back();
    if (results.count(n)) return true;
    if (!region.count(n) || !seen.insert(n).second) continue;
    for (NodeId operand : g.node(n).operands) pending.push_back(operand);
  }
  return false;
}

bool sharesStreamOut(const Graph& g, const StreamAnalysis& analysis, const std::set<NodeId>& region, NodeId output,
                     const std::string& axis) {
  if (std::find(analysis.aggregates.begin(), analysis.aggregates.end(), output) != analysis.aggregates.end()) return true;
  return g.node(output).type.has(axis) && !readsStreamResults(g, analysis, region, output);
}

bool slotsOnePerPoint(const Graph& g, const StreamAnalysis& analysis, const std::set<std::string>& group) {
  for (const AccumulatorSlot& slot : analysis.slots)
    for (const StreamFactor& f : slot.core)
      for (const Axis& x : g.node(f.node).type.axes)
        if (!group.count(x.name) && !contains(slot.axes, x.name)) return false;
  return true;
}

std::vector<std::string> reducedAxes(const Graph& graph) {
  std::vector<std::string> axes;
  auto add = [&](const std::string& a) {
    if (!contains(axes, a)) axes.push_back(a);
  };
  for (const Node& n : graph.nodes) {
    if (n.op == Op::Reduce || n.op == Op::Contract)
      for (const auto& a : n.axes) add(a);
    if (n.op == Op::Gather) add(n.axes[0]);
  }
  return axes;
}

std::string describeStream(const Graph& graph, const StreamAnalysis& a) {
  std::vector<std::string> names = printedNames(graph);
  auto name = [&](NodeId id) { return names[static_cast<size_t>(id)]; };
  if (!a.streamable) {
    return fmt::format("stream over {}: not streamable: {}{}\n", a.axis, a.reason,
                       a.failedAt >= 0 ? fmt::format(" (at {})", name(a.failedAt)) : "");
  }
  auto factorText = [&](const StreamFactor& f) {
    std::string base;
    switch (f.kind) {
      case FactorKind::Value:
        base = f.pivoted() ? fmt::format("({} - {}@0)", name(f.node), name(f.pivotOf)) : name(f.node);
        break;
      case FactorKind::Exp: base = fmt::format("exp({})", name(f.node)); break;
      case FactorKind::Mask: base = fmt::format("[{}]", name(f.node)); break;
      case FactorKind::NotMask: base = fmt::format("[not {}]", name(f.node)); break;
    }
    return f.power == 1 ? base : fmt::format("{}^{}", base, f.power);
  };
  std::string out = fmt::format("stream over {}: streamable\n", a.axis);
  out += "  accumulator (head: sum slots 0, max slots -inf; body: update per chunk of " + a.axis + ")\n";
  for (size_t k = 0; k < a.slots.size(); ++k) {
    const auto& s = a.slots[k];
    std::string core;
    for (const auto& f : s.core) core += (core.empty() ? "" : " * ") + factorText(f);
    if (core.empty()) core = "1";
    std::string axes;
    for (const auto& ax : s.axes) axes += (axes.empty() ? "" : " ") + ax;
    std::string feeds;
    for (NodeId id : s.aggregates) feeds += (feeds.empty() ? "" : ", ") + name(id);
    out += fmt::format("    S{} = {} over {} of {}{}   -> {}\n", k, s.kind == AccumulatorSlot::Kind::Max ? "max" : "sum",
                       axes, core,
                       s.rescaledBy >= 0 ? fmt::format(", rescaled by exp({0}_old - {0}_new)", name(s.rescaledBy)) : "",
                       feeds);
  }
  if (!a.tail.empty()) {
    out += "  tail (after the stream):";
    for (NodeId id : a.tail) out += " " + name(id);
    out += "\n";
  }
  return out;
}

}  // namespace llmc
