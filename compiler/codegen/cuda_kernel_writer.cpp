#include "codegen/cuda_kernel_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>

#include "planning/fusion.h"
#include "ir/print.h"
#include "analysis/streamability.h"
#include "analysis/strided_view.h"
#include "lowering/tensor_core_stream.h"

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The C type a value is computed in: fp32 for every float, int for integers.
const char* valueType(DType d) {
  if (d == DType::Bool) return "bool";
  if (isInteger(d)) return "int";
  return "float";
}

std::string floatLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "LLMC_INF" : "(-LLMC_INF)";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s + "f";
}

// Where an index comes from: a C expression, and the scope that defines the
// variables it uses (0: none, a constant).
struct Binding {
  std::string expr;
  int scope = 0;
};
using Env = std::map<std::string, Binding>;

class Writer {
 public:
  Writer(const Graph& g, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
         const std::vector<std::string>& names, const GemmEpilogueAxes* epilogue = nullptr,
         const TensorCoreStream* tensorStream = nullptr, DeviceResidency resident = {})
      : g_(g), plan_(plan), stored_(stored), names_(names), resident_(resident), epilogue_(epilogue),
        tcs_(tensorStream),
        approximate_(std::any_of(stored.begin(), stored.end(), [](const auto& a) { return a.second.ctype == "llmc_bf16"; })) {
    scopes_.push_back({-1, 0, "", {}});
  }

  WrittenKernel run() {
    WrittenKernel out;
    if (epilogue_) gemmEpilogue();
    else if (tcs_) tensorCoreStream(out);
    else switch (plan_.kind) {
      case LaunchPlan::Kind::Tile:
        if (isGridSum(g_, plan_)) gridSum(out);
        else tile(out);
        break;
      case LaunchPlan::Kind::Scatter: scatter(out); break;
      case LaunchPlan::Kind::Clear: clear(out); break;
    }
    for (const std::string& l : scopes_[0].lines) out.body += "  " + l + "\n";
    out.reads = reads_;
    out.epilogueInputs = epilogueInputs_;
    out.epilogueLoads = epilogueLoads_;
    return out;
  }

 private:
  struct Scope {
    int parent;
    int depth;
    std::string header;
    std::vector<std::string> lines;
  };

  // ---- scopes: a block of code under a header (a loop, an if). Code that
  // depends only on the indices of an outer scope is emitted there, ahead of
  // the open inner scopes (which join their parent when closed).
  int open(int parent, std::string header) {
    scopes_.push_back({parent, scopes_[static_cast<size_t>(parent)].depth + 1, std::move(header), {}});
    return static_cast<int>(scopes_.size()) - 1;
  }
  void close(int s) {
    Scope& sc = scopes_[static_cast<size_t>(s)];
    auto& out = scopes_[static_cast<size_t>(sc.parent)].lines;
    out.push_back(sc.header + " {");
    for (const std::string& l : sc.lines) out.push_back("  " + l);
    out.push_back("}");
    sc.lines.clear();
    if (auto after = afterClose_.find(s); after != afterClose_.end())
      for (const std::string& l : after->second) out.push_back(l);
    if (auto span = spanOf_.find(s); span != spanOf_.end()) close(span->second);  // a lane loop's 8 positions, then its span
  }
  void emit(int s, std::string line) { scopes_[static_cast<size_t>(s)].lines.push_back(std::move(line)); }
  int depth(int s) const { return scopes_[static_cast<size_t>(s)].depth; }
  int deeper(int a, int b) const { return depth(a) >= depth(b) ? a : b; }
  std::string fresh(const std::string& base) { return fmt::format("{}_{}", base, counter_++); }
  std::string define(int s, const std::string& ctype, const std::string& base, const std::string& expr) {
    std::string name = fresh(base);
    emit(s, fmt::format("const {} {} = {};", ctype, name, expr));
    return name;
  }
  // A loop over a whole axis, binding it in env; over the block's share of
  // an axis split across blocks.
  int loop(int parent, const Axis& axis, Env& env) {
    if (axis.name == laneAxis_ && lanesTake8(axis.size) && bf16ArrayAlong(axis.name)) {
      // 8 adjacent positions a lane per span of 8 x lanes: bf16 arrays along the axis load 16 bytes at once (load).
      const std::string base = fresh("i_" + axis.name + "_8");
      const int span = open(parent, fmt::format("for (int {0} = lane * 8; {0} < {1}; {0} += {2})", base, axis.size, 8 * lanes_));
      const int elements = open(span, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
      const std::string var = define(elements, "int", "i_" + axis.name, base + " + e");
      spanOf_[elements] = span;
      vectorElements_[var] = {base, span, elements};
      env[axis.name] = {var, elements};
      return elements;
    }
    std::string var = fresh("i_" + axis.name);
    auto split = tcs_ ? plan_.splitTiles.end() : plan_.splitTiles.find(axis.name);
    int s = axis.name == laneAxis_ ? open(parent, fmt::format("for (int {0} = lane; {0} < {1}; {0} += {2})", var, axis.size, lanes_))
            : split == plan_.splitTiles.end()
                ? open(parent, fmt::format("for (int {0} = 0; {0} < {1}; ++{0})", var, axis.size))
                : open(parent, fmt::format("for (int {0} = split_{2}; {0} < min(split_{2} + {3}, {1}); ++{0})", var,
                                           axis.size, axis.name, split->second));
    env[axis.name] = {var, s};
    return s;
  }
  void closeAll(std::vector<int>& opened) {
    for (auto it = opened.rbegin(); it != opened.rend(); ++it) close(*it);
    opened.clear();
  }

  int64_t axisSize(NodeId id, const std::string& axis) const {
    const Axis* a = g_.node(id).type.find(axis);
    if (!a) throw std::logic_error(fmt::format("emit cuda: {} has no axis '{}'", names_[static_cast<size_t>(id)], axis));
    return a->size;
  }

  // ---- values
  std::string value(NodeId id, const Env& env) {
    const Node& n = g_.node(id);
    if (n.op == Op::Constant) {
      if (n.type.dtype == DType::Bool) return n.value != 0 ? "true" : "false";
      if (isInteger(n.type.dtype)) return fmt::format("{}", static_cast<int64_t>(n.value));
      return floatLiteral(n.value);
    }
    Env own;
    for (const Axis& a : n.type.axes) {
      auto it = env.find(a.name);
      if (it == env.end())
        throw std::logic_error(fmt::format("emit cuda: no index for axis '{}' of {}", a.name,
                                           names_[static_cast<size_t>(id)]));
      own[a.name] = it->second;
    }
    if (n.op == Op::Pos) return own.at(n.axes[0]).expr;
    if (auto fixed = fixed_.find(id); fixed != fixed_.end()) return fixed->second;
    if (auto score = scoreIndex_.find(id); score != scoreIndex_.end() && !inTail_)
      return fmt::format("sc{}[{}][2 * {} + {}]", score->second, fragment_.column, fragment_.half, fragment_.element);
    if (epilogue_ && id == epilogue_->contraction) {
      for (const Axis& a : n.type.axes)
        if (own.at(a.name).expr != contractionAt_.at(a.name).expr)
          throw EpilogueUnsupported(fmt::format("the epilogue reads {} at other positions than the one it stores",
                                                names_[static_cast<size_t>(id)]));
      return "v[e]";
    }
    int target = floor_;
    for (const auto& [axis, b] : own) target = deeper(target, b.scope);
    std::string key = fmt::format("{}@{}", id, target);
    for (const Axis& a : n.type.axes) key += "|" + own[a.name].expr;
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::string result;
    if (stream_.streamable && aggregateTerms().count(id)) result = aggregate(n, own, target);
    else if (stored_.count(id) && !plan_.computed.count(id)) result = load(n, own, target);
    else result = compute(n, own, target);
    cache_[key] = result;
    return result;
  }

  const std::map<NodeId, std::vector<AggregateTerm>>& aggregateTerms() const { return stream_.aggregateTerms; }

  // Row-major offset of a position of a stored array (Horner form).
  std::string offset(NodeId id, const Env& env) const {
    const Type& t = g_.node(id).type;
    if (t.axes.empty()) return "0";
    const bool wide = t.elementCount() > INT_MAX;
    std::string off;
    for (const Axis& a : t.axes) {
      const std::string& e = env.at(a.name).expr;
      if (off.empty()) off = wide ? fmt::format("(long long)({})", e) : e;
      else off = fmt::format("({}) * {} + {}", off, a.size, e);
    }
    return off;
  }

  std::string load(const Node& n, const Env& own, int target) {
    const StoredArray& arr = stored_.at(n.id);
    reads_.insert(n.id);
    if (const VectorSpan* span = vectorSpanOf(n, own); span && arr.ctype == "llmc_bf16") {
      // A lane's 8 positions of a bf16 array along its innermost axis: one 16-byte load per span, before them.
      Env at = own;
      at[n.type.axes.back().name] = {span->base, span->scope};
      // Keyed by the span's scope too: a stream's tail opens a span of its own over the same positions, where
      // the body's array is out of scope.
      const std::string key = fmt::format("{}@{}@{}", n.id, offset(n.id, at), span->scope);
      auto [it, isNew] = vectorLoads_.emplace(key, "");
      if (isNew) {
        it->second = fresh(names_[static_cast<size_t>(n.id)] + "_8");
        emit(span->scope, fmt::format("float {}[8];", it->second));
        emit(span->scope, fmt::format("llmc_load_bf16x8({} + {}, {});", arr.param, offset(n.id, at), it->second));
      }
      return define(target, "float", names_[static_cast<size_t>(n.id)], it->second + "[e]");
    }
    if (epilogue_ && columnsVectorised_ && arr.ctype == "llmc_bf16" && alongColumns(n, own)) {
      // The epilogue's 8 columns of a bf16 array whose rows are its columns (laid out like the output, or a
      // bias along them): one 16-byte load, before the column loop.
      Env at = own;
      for (const Axis& c : epilogue_->columns) at[c.name] = firstColumn_.at(c.name);
      const std::string key = fmt::format("{}@{}", n.id, offset(n.id, at));
      auto [it, isNew] = vectorLoads_.emplace(key, "");
      if (isNew) {
        it->second = fresh(names_[static_cast<size_t>(n.id)]);
        emit(0, fmt::format("float {}[8];", it->second));
        if (addressedByCoordinates(n, at)) {
          epilogueInputs_.push_back(it->second);
          epilogueLoads_ += fmt::format("in.{} = llmc_load_raw16({} + {});\n", it->second, arr.param, offset(n.id, at));
          emit(0, fmt::format("llmc_unpack_bf16x8(in.{0}, {0});", it->second));
        } else {
          emit(0, fmt::format("llmc_load_bf16x8({} + {}, {});", arr.param, offset(n.id, at), it->second));
        }
      }
      return it->second + "[e]";
    }
    std::string at = fmt::format("{}[{}]", arr.param, offset(n.id, own));
    std::string expr = at;
    if (arr.ctype == "llmc_bf16") expr = fmt::format("llmc_bf16_to_f32({})", at);
    else if (arr.ctype == "unsigned short") expr = fmt::format("(int){}", at);
    else if (arr.ctype == "unsigned char") expr = fmt::format("({} != 0)", at);
    else if (arr.ctype == "double") expr = fmt::format("(float){}", at);
    return define(target, valueType(n.type.dtype), names_[static_cast<size_t>(n.id)], expr);
  }

  // Whether the innermost axes of `n` are the epilogue's columns, in order,
  // read at the contraction's columns, and its other axes are the same for
  // the 8 columns (bound outside the column loop: a row, a batch, a layer).
  // Its other strides are then multiples of the columns' count, so the 8
  // columns from col (a multiple of 8) are 16-byte aligned.
  bool alongColumns(const Node& n, const Env& own) const {
    const std::vector<Axis>& columns = epilogue_->columns;
    if (n.type.axes.size() < columns.size()) return false;
    for (size_t i = 0; i < columns.size(); ++i) {
      const std::string& axis = n.type.axes[n.type.axes.size() - columns.size() + i].name;
      if (axis != columns[i].name || own.at(axis).expr != contractionAt_.at(axis).expr) return false;
    }
    for (size_t i = 0; i + columns.size() < n.type.axes.size(); ++i)
      if (own.at(n.type.axes[i].name).scope != 0) return false;
    return true;
  }

  // Whether the epilogue's read of `n` at `at` is addressed by the call's
  // coordinates (batch, row, col) and constants alone: no value the functor
  // computes (a gathered index) goes into it, so load() can issue it first.
  bool addressedByCoordinates(const Node& n, const Env& at) const {
    auto constant = [](const std::string& e) {
      return !e.empty() && e.find_first_not_of("()-0123456789") == std::string::npos;
    };
    for (const Axis& a : n.type.axes) {
      const std::string& e = at.at(a.name).expr;
      const bool coordinate = std::any_of(firstColumn_.begin(), firstColumn_.end(),
                                          [&](const auto& bound) { return bound.second.expr == e; });
      if (!coordinate && !constant(e)) return false;
    }
    return true;
  }

  std::string storeConversion(const StoredArray& arr, const std::string& v) const {
    if (arr.ctype == "llmc_bf16") return fmt::format("llmc_f32_to_bf16({})", v);
    if (arr.ctype == "unsigned char") return fmt::format("(unsigned char)({} ? 1 : 0)", v);
    if (arr.ctype == "unsigned short") return fmt::format("(unsigned short)({})", v);
    return v;
  }

  std::string compute(const Node& n, const Env& own, int target) {
    const std::string name = names_[static_cast<size_t>(n.id)];
    const char* ctype = valueType(n.type.dtype);
    const bool isF = isFloat(n.type.dtype);
    auto operand = [&](size_t k) { return value(n.operands[k], own); };
    auto def = [&](const std::string& expr) { return define(target, ctype, name, expr); };
    switch (n.op) {
      case Op::Unary: {
        std::string x = operand(0);
        switch (n.unary) {
          case UnaryOp::Neg: return def(fmt::format("-{}", x));
          case UnaryOp::Exp: {
            // exp(a - b): a - b's rounding and exp's multiply by log2(e) become one fused multiply-add.
            const Node& arg = g_.node(n.operands[0]);
            if (approximate_ && arg.op == Op::Binary && arg.binary == BinaryOp::Sub)
              return def(fmt::format("llmc_fast_exp_difference({}, {})", value(arg.operands[0], own),
                                     value(arg.operands[1], own)));
            return def(exp(x));
          }
          case UnaryOp::Log: return def(fmt::format("logf({})", x));
          case UnaryOp::Tanh: return def(fmt::format(fmt::runtime(approximate_ ? "llmc_fast_tanh({})" : "tanhf({})"), x));
          case UnaryOp::Sqrt: return def(fmt::format("sqrtf({})", x));
          case UnaryOp::Rsqrt: return def(reciprocalSqrt(x));
          case UnaryOp::Abs: return def(fmt::format(fmt::runtime(isF ? "fabsf({})" : "abs({})"), x));
        }
        break;
      }
      case Op::Binary: {
        std::string x = operand(0), y = operand(1);
        switch (n.binary) {
          case BinaryOp::Add: return def(fmt::format("{} + {}", x, y));
          case BinaryOp::Sub: return def(fmt::format("{} - {}", x, y));
          case BinaryOp::Mul: return def(fmt::format("{} * {}", x, y));
          case BinaryOp::Div: return def(divide(x, y));
          case BinaryOp::Maximum: return def(fmt::format(fmt::runtime(isF ? "fmaxf({}, {})" : "max({}, {})"), x, y));
          case BinaryOp::Minimum: return def(fmt::format(fmt::runtime(isF ? "fminf({}, {})" : "min({}, {})"), x, y));
        }
        break;
      }
      case Op::Compare: return def(fmt::format("{} {} {}", operand(0), compareSymbol(n.compare), operand(1)));
      case Op::Select: {
        std::string c = operand(0), x = operand(1), y = operand(2);
        return def(fmt::format("{} ? {} : {}", c, x, y));
      }
      case Op::Cast: {
        std::string x = operand(0);
        DType from = g_.node(n.operands[0]).type.dtype;
        if (n.type.dtype == DType::Bool) return def(fmt::format("{} != 0", x));
        if (isInteger(n.type.dtype)) return def(fmt::format("(int)({})", x));  // truncates toward zero
        if (from == DType::Bool) return def(fmt::format("{} ? 1.0f : 0.0f", x));
        return def(fmt::format("(float)({})", x));
      }
      case Op::Reduce:
      case Op::Contract: return reduction(n, own, target);
      case Op::Gather: return gather(n, own, target);
      case Op::Split: {
        Env e = own;
        std::string whole;
        int scope = 0;
        for (const std::string& part : n.newAxes) {
          const Binding& b = own.at(part);
          whole = whole.empty() ? b.expr : fmt::format("({}) * {} + {}", whole, axisSize(n.id, part), b.expr);
          scope = deeper(scope, b.scope);
          e.erase(part);
        }
        e[n.axes[0]] = {whole, scope};
        return value(n.operands[0], e);
      }
      case Op::Merge: {
        Env e = own;
        const Binding merged = own.at(n.newAxes[0]);
        e.erase(n.newAxes[0]);
        int64_t inner = 1;
        for (size_t k = n.axes.size(); k-- > 0;) {
          int64_t size = axisSize(n.operands[0], n.axes[k]);
          std::string expr = inner == 1 ? merged.expr : fmt::format("{} / {}", merged.expr, inner);
          if (k > 0) expr = fmt::format("({}) % {}", expr, size);
          e[n.axes[k]] = {fmt::format("({})", expr), merged.scope};
          inner *= size;
        }
        return value(n.operands[0], e);
      }
      case Op::Rename: {
        Env e = own;
        e.erase(n.newAxes[0]);
        e[n.axes[0]] = own.at(n.newAxes[0]);
        return value(n.operands[0], e);
      }
      case Op::Index: {
        Env e = own;
        e[n.axes[0]] = {fmt::format("{}", n.lo), 0};
        return value(n.operands[0], e);
      }
      case Op::Slice: {
        Env e = own;
        const Binding b = own.at(n.newAxes[0]);
        e.erase(n.newAxes[0]);
        e[n.axes[0]] = {n.lo == 0 ? b.expr : fmt::format("({} + {})", b.expr, n.lo), b.scope};
        return value(n.operands[0], e);
      }
      case Op::Transpose:
      case Op::Broadcast:
      case Op::StopGradient: return value(n.operands[0], own);
      case Op::Concat: {
        const Binding joined = own.at(n.newAxes[0]);
        const int64_t part = axisSize(n.operands[0], n.axes[0]);
        std::string r = fresh(name);
        emit(target, fmt::format("{} {} = {};", ctype, r, isF ? "0.0f" : "0"));
        for (size_t k = 0; k < n.operands.size(); ++k) {
          const int64_t lo = static_cast<int64_t>(k) * part;
          int s = open(target, fmt::format("if ({0} >= {1} && {0} < {2})", joined.expr, lo, lo + part));
          Env e = own;
          e.erase(n.newAxes[0]);
          e[n.axes[0]] = {lo == 0 ? joined.expr : fmt::format("({} - {})", joined.expr, lo), s};
          // The part is made inside its branch: only the chosen part's bytes are read.
          const int floor = floor_;
          floor_ = s;
          std::string v = value(n.operands[k], e);
          floor_ = floor;
          emit(s, fmt::format("{} = {};", r, v));
          close(s);
        }
        return r;
      }
      case Op::Input:
      case Op::Constant:
      case Op::Pos:
      case Op::ScatterAdd: break;
    }
    throw std::logic_error(fmt::format("emit cuda: {} ({}) cannot be computed in launch {}", name, opName(n.op),
                                       plan_.name));
  }

  // A sum, a max or a contraction over its axes, looped whole.
  std::string reduction(const Node& n, const Env& own, int target) {
    const bool isMax = n.op == Op::Reduce && n.reduce == ReduceOp::Max;
    const char* ctype = valueType(n.type.dtype);
    std::string acc = fresh(names_[static_cast<size_t>(n.id)]);
    std::string init = isMax ? (isFloat(n.type.dtype) ? "-LLMC_INF" : "LLMC_INT_MIN") : (isFloat(n.type.dtype) ? "0.0f" : "0");
    emit(target, fmt::format("{} {} = {};  // {} over {}", ctype, acc, init,
                             n.op == Op::Contract ? "contraction" : reduceName(n.reduce), joinAxes(n.axes)));
    Env e = own;
    std::vector<int> opened;
    int s = target;
    for (const std::string& a : n.axes) {
      s = loop(s, Axis{a, axisSize(n.operands[0], a)}, e);
      opened.push_back(s);
    }
    if (n.op == Op::Contract) {
      std::string x = value(n.operands[0], e), y = value(n.operands[1], e);
      emit(s, fmt::format("{} += {} * {};", acc, x, y));
    } else {
      std::string x = value(n.operands[0], e);
      emit(s, isMax ? fmt::format(fmt::runtime(isFloat(n.type.dtype) ? "{0} = fmaxf({0}, {1});" : "{0} = max({0}, {1});"), acc, x)
                    : fmt::format("{} += {};", acc, x));
    }
    closeAll(opened);
    if (std::find(n.axes.begin(), n.axes.end(), laneAxis_) != n.axes.end()) {
      // The lanes' partial results combined: every lane holds the whole.
      const std::string other = fmt::format("__shfl_xor_sync(0xffffffffu, {}, offset)", acc);
      emit(target, fmt::format("for (int offset = {}; offset > 0; offset /= 2) {};", lanes_ / 2,
                               isMax ? fmt::format(fmt::runtime(isFloat(n.type.dtype) ? "{0} = fmaxf({0}, {1})" : "{0} = max({0}, {1})"), acc, other)
                                     : fmt::format("{} += {}", acc, other)));
    }
    return acc;
  }

  // table[a = index]; NaN (0 for integers) for an index out of range.
  std::string gather(const Node& n, const Env& own, int target) {
    const std::string& axis = n.axes[0];
    std::string row = define(target, "int", "row", value(n.operands[1], own));
    std::string r = fresh(names_[static_cast<size_t>(n.id)]);
    emit(target, fmt::format("{} {} = {};", valueType(n.type.dtype), r, isFloat(n.type.dtype) ? "LLMC_NAN" : "0"));
    int s = open(target, fmt::format("if ({0} >= 0 && {0} < {1})", row, axisSize(n.operands[0], axis)));
    Env e = own;
    e[axis] = {row, s};
    std::string v = value(n.operands[0], e);
    emit(s, fmt::format("{} = {};", r, v));
    close(s);
    return r;
  }

  static std::string joinAxes(const std::vector<std::string>& axes) {
    std::string out;
    for (const auto& a : axes) out += (out.empty() ? "" : " ") + a;
    return out;
  }

  // ---- the stream: accumulator slots (head), their update per position of
  // the stream axis (body, with the online-softmax rescaling), and the
  // aggregates read from them afterwards (tail).
  struct SlotLayout {
    std::string name;
    std::vector<Axis> local;  // the accumulator's axes inside a point of the tile
    std::vector<std::string> innerAxes;  // reduced axes other than the stream axis, looped whole
    int maxSlotOfRescale = -1;  // a sum rescaled by a running max: that max's slot
    bool keepsPrevious = false; // a max some sum is rescaled by: its value before the update is kept
  };

  std::string slotRef(int k, const Env& env) const {
    const SlotLayout& s = slots_[static_cast<size_t>(k)];
    if (tcs_) {  // in the stream: the slot's registers for the row half; after it: the staged slot
      if (!inTail_) return fmt::format("{}[{}]", s.name, fragment_.half);
      if (s.local.empty()) return fmt::format("{}_staged[p]", s.name);
      return fmt::format("{}_staged[p * {} + {}]", s.name, productOf(k)->stagedStride(), env.at(s.local[0].name).expr);
    }
    if (s.local.empty()) return eightBase_.empty() ? s.name : s.name + "[e]";
    std::string off;
    for (const Axis& a : s.local) off = off.empty() ? env.at(a.name).expr : fmt::format("({}) * {} + {}", off, a.size, env.at(a.name).expr);
    return fmt::format("{}[{}]", s.name, off);
  }
  std::string previousRef(int k, const Env& env) const {
    std::string ref = slotRef(k, env);
    const std::string& name = slots_[static_cast<size_t>(k)].name;
    return name + "_prev" + ref.substr(name.size());
  }

  bool setUpStream() {
    if (plan_.streamAxis.empty() || plan_.streamChunk <= 0) return false;
    stream_ = analyzeStream(g_, plan_.computed, plan_.streamAxis);
    if (!stream_.streamable || stream_.slots.empty()) {
      stream_ = StreamAnalysis{};
      return false;
    }
    std::set<std::string> group;
    for (const Axis& a : plan_.groupAxes) group.insert(a.name);
    for (size_t k = 0; k < stream_.slots.size(); ++k) {
      const AccumulatorSlot& slot = stream_.slots[k];
      SlotLayout layout;
      layout.name = fmt::format("S{}", k);
      std::set<std::string> seen(group.begin(), group.end());
      seen.insert(slot.axes.begin(), slot.axes.end());
      for (const StreamFactor& f : slot.core)
        for (const Axis& a : g_.node(f.node).type.axes)
          if (seen.insert(a.name).second) layout.local.push_back(a);
      for (const std::string& a : slot.axes)
        if (a != plan_.streamAxis) layout.innerAxes.push_back(a);
      slots_.push_back(layout);
    }
    for (size_t k = 0; k < stream_.slots.size(); ++k) {
      NodeId m = stream_.slots[k].rescaledBy;
      if (m < 0) continue;
      for (size_t j = 0; j < stream_.slots.size(); ++j) {
        const auto& agg = stream_.slots[j].aggregates;
        if (stream_.slots[j].kind == AccumulatorSlot::Kind::Max && std::find(agg.begin(), agg.end(), m) != agg.end()) {
          slots_[k].maxSlotOfRescale = static_cast<int>(j);
          slots_[j].keepsPrevious = true;
        }
      }
      if (slots_[k].maxSlotOfRescale < 0) throw std::logic_error("emit cuda: a rescaled slot without its running max");
    }
    return true;
  }

  // The chunk-local product of a slot's factors at a position of the stream.
  // `leftOut`: a factor not multiplied in (a tensor-core product's operand).
  std::string core(int k, const Env& env, NodeId leftOut = -1) {
    const AccumulatorSlot& slot = stream_.slots[static_cast<size_t>(k)];
    const SlotLayout& layout = slots_[static_cast<size_t>(k)];
    const std::string& position = env.at(plan_.streamAxis).expr;
    std::string product, conditions;
    for (const StreamFactor& f : slot.core) {
      if (f.node == leftOut) continue;
      const Node& node = g_.node(f.node);
      std::string v = value(f.node, env);
      std::string base;
      switch (f.kind) {
        case StreamFactor::Kind::Value: base = isFloat(node.type.dtype) ? v : fmt::format("(float)({})", v); break;
        case StreamFactor::Kind::Exp:
          if (layout.maxSlotOfRescale >= 0 && f.node == g_.node(slot.rescaledBy).operands[0])
            base = streamValue(f.node, layout.maxSlotOfRescale, env, "exp_shifted",
                               fmt::format("{}({}, {})", approximate_ ? "llmc_fast_exp_shifted" : "llmc_exp_shifted", v,
                                           slotRef(layout.maxSlotOfRescale, env)));
          else base = exp(v);
          break;
        // A bool's mask (from a where); an integer's is the one-hot of a
        // gather index along the stream axis. Masks select rather than
        // multiply: a masked-out -inf must give 0, not NaN.
        case StreamFactor::Kind::Mask:
        case StreamFactor::Kind::NotMask: {
          std::string on = node.type.dtype == DType::Bool ? v : fmt::format("{} == {}", v, position);
          if (f.kind == StreamFactor::Kind::NotMask) on = fmt::format("!({})", on);
          conditions = conditions.empty() ? on : conditions + " && " + on;
          continue;
        }
      }
      for (int p = 0; p < std::abs(f.power); ++p) {
        std::string term = f.power > 0 ? base : fmt::format("(1.0f / {})", base);
        product = product.empty() ? term : product + " * " + term;
      }
    }
    if (product.empty()) product = "1.0f";
    return conditions.empty() ? product : fmt::format("({}) ? {} : 0.0f", conditions, product);
  }

  void streamLoop(int point, const Env& env, WrittenKernel& out) {
    const std::string& x = plan_.streamAxis;
    int64_t extent = 0;
    for (NodeId id : plan_.computed)
      for (NodeId o : g_.node(id).operands)
        if (const Axis* a = g_.node(o).type.find(x)) extent = a->size;
    // Head.
    for (size_t k = 0; k < slots_.size(); ++k) {
      const SlotLayout& s = slots_[k];
      const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
      std::string init = isMax ? "-LLMC_INF" : "0.0f";
      int64_t n = 1;
      for (const Axis& a : s.local) n *= a.size;
      std::string note = fmt::format("  // accumulator head: {} over {}", isMax ? "max" : "sum", joinAxes(stream_.slots[k].axes));
      if (s.local.empty() && !eightBase_.empty()) {  // one per point of the thread's 8
        emit(point, fmt::format("float {}[8] = {{{}, {}, {}, {}, {}, {}, {}, {}}};{}", s.name, init, init, init, init, init,
                                init, init, init, note));
      } else if (s.local.empty()) {
        emit(point, fmt::format("float {} = {};{}", s.name, init, note));
        if (s.keepsPrevious) emit(point, fmt::format("float {}_prev;", s.name));
      } else {
        emit(point, fmt::format("float {}[{}];{}", s.name, n, note));
        if (s.keepsPrevious) emit(point, fmt::format("float {}_prev[{}];", s.name, n));
        emit(point, fmt::format("for (int j = 0; j < {}; ++j) {}[j] = {};", n, s.name, init));
      }
    }
    // Body.
    const bool lanes = laneAxis_ == x;
    if (lanes && vectorisableLanes(extent)) {
      vectorLanes(point, env, extent);
      mergeLaneSlots(point);
      out.streamNote = fmt::format("stream over {} with {} accumulator slots, {}, its lanes along the "
                                   "stream, 8 positions a lane (16-byte loads)",
                                   x, slots_.size(), lanesNote());
      return;
    }
    const std::string chunk = "chunk_" + x, var = "i_" + x;
    int chunks = open(point, fmt::format("for (int {0} = 0; {0} < {1}; {0} += {2})", chunk, extent, plan_.streamChunk));
    int positions = open(chunks, lanes        ? fmt::format("for (int {0} = {1} + lane; {0} < min({1} + {2}, {3}); {0} += {4})",
                                                                var, chunk, plan_.streamChunk, extent, lanes_)
                                 : slices_ > 1 ? fmt::format("for (int {0} = {1} + slice; {0} < min({1} + {2}, {3}); {0} += {4})",
                                                                var, chunk, plan_.streamChunk, extent, slices_)
                                               : fmt::format("for (int {0} = {1}; {0} < min({1} + {2}, {3}); ++{0})", var,
                                                             chunk, plan_.streamChunk, extent));
    Env e = env;
    e[x] = {var, positions};
    positions_ = positions;
    // With 8 points a thread: the slots' common inner axes, then the 8 points, around every update.
    std::vector<int> around;
    int body = positions;
    if (!eightBase_.empty()) {
      for (const std::string& a : slots_[0].innerAxes) around.push_back(body = loop(body, Axis{a, innerSize(a)}, e));
      around.push_back(body = openEightPoints(body, body, e));
    }
    for (int pass = 0; pass < 2; ++pass) {  // the running maxima first, then the sums they rescale
      for (size_t k = 0; k < slots_.size(); ++k) {
        const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
        if (isMax != (pass == 0)) continue;
        const SlotLayout& s = slots_[k];
        Env se = e;
        std::vector<int> opened;
        int scope = body;
        for (const Axis& a : s.local) opened.push_back(scope = loop(scope, a, se));
        std::string ref = slotRef(static_cast<int>(k), se);
        if (isMax && s.keepsPrevious) emit(scope, fmt::format("{} = {};", previousRef(static_cast<int>(k), se), ref));
        if (s.maxSlotOfRescale >= 0) {
          std::string c = rescaleFactor(s.maxSlotOfRescale, se);
          emit(scope, fmt::format("{} *= {};  // rescaled as the max moves: exp(m_old - m_new)", ref, c));
        }
        if (eightBase_.empty())
          for (const std::string& a : s.innerAxes) opened.push_back(scope = loop(scope, Axis{a, innerSize(a)}, se));
        std::string c = core(static_cast<int>(k), se);
        emit(scope, isMax ? fmt::format("{0} = fmaxf({0}, {1});", ref, c) : fmt::format("{} += {};", ref, c));
        closeAll(opened);
      }
    }
    closeAll(around);
    close(positions);
    close(chunks);
    if (lanes) mergeLaneSlots(point);
    out.streamNote = fmt::format("stream over {} in chunks of {} with {} accumulator slots{}{}{}", x, plan_.streamChunk,
                                 slots_.size(), lanes ? ", " + lanesNote() + ", its lanes along the stream" : "",
                                 eightBase_.empty() ? "" : ", 8 points a thread",
                                 slices_ > 1 ? fmt::format(", its positions dealt to {} slices of the block's threads", slices_) : "");
  }

  // Lanes take 8 adjacent positions each where the axis is a multiple of 8
  // long and holds a span of 8 x the point's lanes (every lane busy), under bf16 storage.
  bool lanesTake8(int64_t extent) const { return approximate_ && extent % 8 == 0 && extent >= 8 * lanes_; }

  // The lanes a point takes: a warp's 32, or, where the lane axis is shorter
  // than a warp's span of 8 positions a lane and a bf16 array lies along it
  // (16-byte loads), as many as hold it, several points a warp (attention's
  // 64 channels: 8 lanes, 4 points; at 2 positions a lane of 32 the loads are
  // 4 bytes: measured 2.4x the model's time on the H200, 2026-11-30). The
  // points must fill whole warps, and no tile may end past its axis (a point
  // there is skipped): the shuffles take all 32 lanes of a warp.
  int lanesPerPoint(int64_t points) const {
    if (laneAxis_.empty() || !approximate_) return 32;
    const int64_t extent = innerSize(laneAxis_);
    if (extent % 8 != 0 || extent >= 256 || !bf16ArrayAlong(laneAxis_)) return 32;
    for (const Axis& a : plan_.groupAxes)
      if (a.size % plan_.tiles.at(a.name) != 0) return 32;
    int lanes = 1;
    while (16 * lanes <= extent) lanes *= 2;
    return points % (32 / lanes) == 0 ? lanes : 32;
  }
  std::string lanesNote() const {
    return lanes_ == 32 ? "a warp per point" : fmt::format("{} lanes per point, {} points a warp", lanes_, 32 / lanes_);
  }

  // A warp-per-point stream whose lanes can take 8 adjacent positions each:
  // a multiple of 8 positions, at least 256 (every lane busy), scalar slots,
  // and a bf16 array read along the
  // stream with the stream axis innermost (the loss's logits). (Its chunks
  // only split the loop: a CUDA-core launch reads its inputs from GMEM.)
  bool vectorisableLanes(int64_t extent) const {
    const std::string& x = plan_.streamAxis;
    if (!lanesTake8(extent)) return false;
    for (const SlotLayout& s : slots_)
      if (!s.local.empty() || !s.innerAxes.empty()) return false;
    return bf16ArrayAlong(x);
  }

  // The stream's positions 8 to a lane: per span of 8 x lanes, each bf16 array read
  // along the stream (innermost) by one 16-byte load per lane; the running
  // maxima over the lane's 8 positions first, then each sum rescaled once to
  // them and its 8 terms added (the online softmax's update per group of
  // positions, as the tensor-core streams do it per step).
  void vectorLanes(int point, const Env& env, int64_t extent) {
    const std::string& x = plan_.streamAxis;
    const std::string base = fresh("i_" + x + "_8");
    const int group = open(point, fmt::format("for (int {0} = lane * 8; {0} < {1}; {0} += {2})", base, extent, 8 * lanes_));
    const bool anyMax = std::any_of(stream_.slots.begin(), stream_.slots.end(),
                                    [](const AccumulatorSlot& slot) { return slot.kind == AccumulatorSlot::Kind::Max; });
    for (int pass = anyMax ? 0 : 1; pass < 2; ++pass) {  // the running maxima first, then the sums they rescale
      positions_ = group;
      for (size_t k = 0; k < slots_.size(); ++k) {
        const SlotLayout& s = slots_[k];
        const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
        if (pass == 0 && isMax && s.keepsPrevious)
          emit(group, fmt::format("{} = {};", previousRef(static_cast<int>(k), env), slotRef(static_cast<int>(k), env)));
        if (pass == 1 && !isMax && s.maxSlotOfRescale >= 0)
          emit(group, fmt::format("{} *= {};  // rescaled as the max moves: exp(m_old - m_new)", slotRef(static_cast<int>(k), env),
                                  rescaleFactor(s.maxSlotOfRescale, env)));
      }
      const int elements = open(group, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
      Env e = env;
      const std::string element = define(elements, "int", "i_" + x, base + " + e");
      vectorElements_[element] = {base, group, elements};
      e[x] = {element, elements};
      positions_ = elements;
      for (size_t k = 0; k < slots_.size(); ++k) {
        const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
        if (isMax != (pass == 0)) continue;
        const std::string ref = slotRef(static_cast<int>(k), e), c = core(static_cast<int>(k), e);
        emit(elements, isMax ? fmt::format("{0} = fmaxf({0}, {1});", ref, c) : fmt::format("{} += {};", ref, c));
      }
      close(elements);
    }
    close(group);
  }

  // The lanes' scalar slots combined after a lane-strided stream: each
  // running max over the warp, the sums rescaled to it (exp(m_lane - m_warp))
  // first, then every sum over the warp.
  void mergeLaneSlots(int point) {
    const std::string butterfly = fmt::format("for (int offset = {}; offset > 0; offset /= 2) ", lanes_ / 2);
    for (size_t k = 0; k < slots_.size(); ++k) {
      if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max) continue;
      const std::string& m = slots_[k].name;
      const std::string warpMax = fresh(m + "_warp");
      emit(point, fmt::format("float {} = {};", warpMax, m));
      emit(point, fmt::format("{}{} = fmaxf({}, __shfl_xor_sync(0xffffffffu, {}, offset));", butterfly, warpMax, warpMax, warpMax));
      for (size_t j = 0; j < slots_.size(); ++j)
        if (slots_[j].maxSlotOfRescale == static_cast<int>(k))
          emit(point, fmt::format("{} *= {}({}, {});", slots_[j].name, rescale(), m, warpMax));
      emit(point, fmt::format("{} = {};", m, warpMax));
    }
    for (size_t k = 0; k < slots_.size(); ++k)
      if (stream_.slots[k].kind == AccumulatorSlot::Kind::Sum)
        emit(point, fmt::format("{}{} += __shfl_xor_sync(0xffffffffu, {}, offset);", butterfly, slots_[k].name, slots_[k].name));
  }

  int64_t innerSize(const std::string& axis) const {
    for (NodeId id : plan_.computed)
      for (NodeId o : g_.node(id).operands)
        if (const Axis* a = g_.node(o).type.find(axis)) return a->size;
    throw std::logic_error("emit cuda: no size for axis " + axis);
  }

  // exp(m_old - m_new) of a running max, once per position of the max.
  std::string rescaleFactor(int maxSlot, const Env& env) {
    return streamValue(-1, maxSlot, env, "rescale",
                       fmt::format("{}({}, {})", rescale(), previousRef(maxSlot, env), slotRef(maxSlot, env)));
  }

  // A value of the stream body that reads the running max of a slot: computed
  // once per position of the stream and of the axes of `node` (-1: none) and
  // of the max, after the max's update.
  std::string streamValue(NodeId node, int maxSlot, const Env& env, const std::string& base, const std::string& expr) {
    int target = positions_;
    std::string key = fmt::format("{}{}:{}", base, maxSlot, node);
    std::vector<Axis> axes = slots_[static_cast<size_t>(maxSlot)].local;
    if (node >= 0) axes.insert(axes.end(), g_.node(node).type.axes.begin(), g_.node(node).type.axes.end());
    for (const Axis& a : axes) {
      target = deeper(target, env.at(a.name).scope);
      key += "|" + env.at(a.name).expr;
    }
    key += fmt::format("@{}", target);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::string c = define(target, "float", base, expr);
    cache_[key] = c;
    return c;
  }

  // An aggregate after the stream: the sum of its terms over the slots.
  std::string aggregate(const Node& n, const Env& own, int target) {
    std::string sum;
    for (const AggregateTerm& t : aggregateTerms().at(n.id)) {
      const AccumulatorSlot& slot = stream_.slots[static_cast<size_t>(t.slot)];
      std::string term = slotRef(t.slot, own);
      // A slot per point of the thread's 8 read by an aggregate without the
      // points' axis (a row's mean beside a matmul's 8 columns): its 8 copies
      // hold the same sum, and no loop over e is open here: the first.
      if (!tcs_ && !eightBase_.empty() && !own.count(plan_.groupAxes.back().name) && term.ends_with("[e]"))
        term.replace(term.size() - 3, 3, "[0]");
      if (t.coefficient != 1) term = fmt::format("{} * {}", floatLiteral(t.coefficient), term);
      bool dropped = false;  // a rescaled slot already holds the sum times exp(-m)
      for (const StreamFactor& f : t.scale) {
        if (!dropped && slot.rescaledBy == f.node && f.kind == StreamFactor::Kind::Exp && f.power == -1) {
          dropped = true;
          continue;
        }
        std::string v = value(f.node, own);
        std::string base = f.kind == StreamFactor::Kind::Exp ? exp(fmt::format("{}{}", f.power < 0 ? "-" : "", v)) : v;
        int times = f.kind == StreamFactor::Kind::Exp ? 1 : std::abs(f.power);
        for (int p = 0; p < times; ++p)
          term = f.power > 0 || f.kind == StreamFactor::Kind::Exp ? term + " * " + base : divide(term, base);
      }
      sum = sum.empty() ? term : sum + " + " + term;
    }
    return define(target, "float", names_[static_cast<size_t>(n.id)], sum.empty() ? "0.0f" : sum);
  }

  // ---- launches
  void store(int scope, NodeId id, const Env& env) {
    const StoredArray& arr = stored_.at(id);
    std::string v = value(id, env);
    if (!plan_.splitTiles.empty() && !tcs_) {  // a partial sum: f32, zeroed first
      emit(scope, fmt::format("atomicAdd(&{}[{}], {});", arr.param, offset(id, env), v));
      return;
    }
    if (const VectorSpan* span = vectorSpanOf(g_.node(id), env); span && arr.ctype == "llmc_bf16") {
      // A lane's 8 positions of a bf16 array along its innermost axis: gathered, then one 16-byte store after them.
      const std::string buffer = fresh(names_[static_cast<size_t>(id)] + "_8");
      Env at = env;
      at[g_.node(id).type.axes.back().name] = {span->base, span->scope};
      emit(span->scope, fmt::format("float {}[8];", buffer));
      emit(scope, fmt::format("{}[e] = {};", buffer, v));
      afterClose_[span->elements].push_back(fmt::format("llmc_store_bf16x8({} + {}, {});", arr.param, offset(id, at), buffer));
      return;
    }
    emit(scope, fmt::format("{}[{}] = {};", arr.param, offset(id, env), storeConversion(arr, v)));
  }

  // A warp per point where the tile's points walk rows of at least a
  // warp's width: the longest axis (kLaneAxisMin or more) that a reduction of the launch loops over,
  // outside the group, in a launch without a stream. Its loops stride by the
  // 32 lanes (adjacent lanes, adjacent elements: coalesced), reductions over
  // it end in a shuffle butterfly, so every lane continues with the whole.
  // A stream's axis is the lanes' only where its chunks fill a warp, and not
  // where the arrays read along it are contiguous along the axis the tile's
  // threads walk instead (coalesced as they are): the gradient of a position
  // embedding, summed over a batch of 32 in chunks of 4, would leave 28 lanes
  // idle and the others reading rows 1536 bytes apart.
  static constexpr int64_t kLaneAxisMin = 32;

  // The layouts of the stored arrays the launch reads along `along`, through
  // the views it reads them through (a renamed axis is the array's own).
  std::vector<AffineLayout> readLayoutsAlong(const std::string& along) const {
    std::set<NodeId> stored;
    for (const auto& [id, array] : stored_) stored.insert(id);
    std::vector<AffineLayout> layouts;
    for (NodeId id : plan_.computed)
      for (NodeId o : g_.node(id).operands) {
        if (isFree(g_, g_.node(o)) || !g_.node(o).type.has(along)) continue;
        std::string why;
        if (std::optional<AffineLayout> l = layoutThroughViews(g_, o, plan_.computed, stored, names_, why))
          layouts.push_back(std::move(*l));
      }
    return layouts;
  }

  // Whether a stored array the launch reads along `along` is contiguous
  // along `walked`.
  bool contiguousAcrossPoints(const std::string& along, const std::string& walked) const {
    for (const AffineLayout& l : readLayoutsAlong(along))
      if (l.strides.count(walked) && l.strides.at(walked) == 1) return true;
    return false;
  }
  // A stream whose slots are all scalars per point (a softmax's max and
  // sum over a vocabulary) strides its positions by the lanes instead: each
  // lane keeps its own slots, merged after the stream (online-softmax style).
  std::string laneAxis() const {
    std::set<std::string> group;
    for (const Axis& a : plan_.groupAxes) group.insert(a.name);
    if (!plan_.streamAxis.empty()) {
      if (!plan_.splitTiles.empty() || plan_.streamChunk < kLaneAxisMin || innerSize(plan_.streamAxis) < kLaneAxisMin)
        return "";
      if (!plan_.groupAxes.empty() && contiguousAcrossPoints(plan_.streamAxis, plan_.groupAxes.back().name)) return "";
      const StreamAnalysis a = analyzeStream(g_, plan_.computed, plan_.streamAxis);
      if (!a.streamable || a.slots.empty()) return "";
      for (const AccumulatorSlot& slot : a.slots) {
        if (slot.axes.size() != 1) return "";
        for (const StreamFactor& f : slot.core)
          for (const Axis& x : g_.node(f.node).type.axes)
            if (!group.count(x.name) && x.name != plan_.streamAxis) return "";
      }
      return plan_.streamAxis;
    }
    std::string best;
    int64_t bestExtent = kLaneAxisMin - 1;
    for (NodeId id : plan_.computed) {
      const Node& n = g_.node(id);
      if (n.op != Op::Reduce && n.op != Op::Contract) continue;
      for (const std::string& a : n.axes) {
        const int64_t extent = axisSize(n.operands[0], a);
        if (!group.count(a) && !plan_.splitTiles.count(a) && extent > bestExtent) {  // a split axis is the blocks' to share
          best = a;
          bestExtent = extent;
        }
      }
    }
    return best;
  }

  void tile(WrittenKernel& out) {
    int64_t points = 1;
    out.grid = 1;
    for (const Axis& a : plan_.groupAxes) {
      points *= plan_.tiles.at(a.name);
      out.grid *= ceilDiv(a.size, plan_.tiles.at(a.name));
    }
    if (points > INT_MAX) throw std::logic_error("emit cuda: a tile of more than 2^31 points");
    laneAxis_ = laneAxis();
    lanes_ = lanesPerPoint(points);
    const bool streamed = setUpStream();
    const bool eight = pointsTake8(streamed);
    const int64_t threadPoints = eight ? points / 8 : points;  // what the block's threads walk
    std::vector<std::pair<std::string, int64_t>> splits;  // axis, blocks sharing it
    for (const auto& [axis, perBlock] : plan_.splitTiles) {
      splits.emplace_back(axis, ceilDiv(innerSize(axis), perBlock));
      out.grid *= splits.back().second;
    }
    slices_ = streamed ? streamSlices(out.grid, threadPoints) : 1;
    out.block = static_cast<int>(std::min<int64_t>(
        256, !laneAxis_.empty() ? points * lanes_ : slices_ > 1 ? threadPoints * slices_ : ceilDiv(threadPoints, 32) * 32));
    // Tile origin from the block index, last group axis fastest; the shares
    // of split axes fastest of all.
    if (out.grid > 1) emit(0, "long long block = blockIdx.x;");
    for (const auto& [axis, blocks] : splits) {
      emit(0, fmt::format("const int split_{} = (int)(block % {}) * {};", axis, blocks, plan_.splitTiles.at(axis)));
      emit(0, fmt::format("block /= {};", blocks));
    }
    std::vector<std::string> origins(plan_.groupAxes.size());
    for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
      const Axis& a = plan_.groupAxes[i];
      const int64_t tiles = ceilDiv(a.size, plan_.tiles.at(a.name));
      origins[i] = "t_" + a.name;
      if (tiles == 1) {
        emit(0, fmt::format("const int {} = 0;", origins[i]));
        continue;
      }
      emit(0, fmt::format("const int {} = (int)(block % {}) * {};", origins[i], tiles, plan_.tiles.at(a.name)));
      if (i > 0) emit(0, fmt::format("block /= {};", tiles));
    }
    if (!laneAxis_.empty()) emit(0, fmt::format("const int lane = threadIdx.x % {};{}", lanes_,
                                                lanes_ < 32 ? "  // within the point's lanes" : ""));
    if (slices_ > 1) emit(0, fmt::format("const int slice = threadIdx.x / {};  // the block's threads: {} slices of the stream's positions", threadPoints, slices_));
    const int point = open(0, !laneAxis_.empty() ? fmt::format("for (int p = threadIdx.x / {1}; p < {0}; p += blockDim.x / {1})", points, lanes_)
                              : slices_ > 1      ? fmt::format("for (int p = threadIdx.x % {}; p < {}; p += blockDim.x)", threadPoints, threadPoints)
                                                 : fmt::format("for (int p = threadIdx.x; p < {}; p += blockDim.x)", threadPoints));
    floor_ = point;
    Env env;
    int64_t inner = 1;
    std::string outside;
    // Threads next to each other take points next to each other along the
    // last group axis: the innermost axis of the outputs, for coalescing.
    std::string eightBase;  // with 8 points a thread: the first of its 8 along the last group axis
    for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
      const Axis& a = plan_.groupAxes[i];
      const bool last = i + 1 == plan_.groupAxes.size();
      const int64_t t = eight && last ? plan_.tiles.at(a.name) / 8 : plan_.tiles.at(a.name);
      std::string pos = inner == 1 ? "p" : fmt::format("p / {}", inner);
      if (i > 0 && t > 1) pos = fmt::format("({}) % {}", pos, t);
      if (t == 1) pos = "0";
      if (eight && last) pos = fmt::format("({}) * 8", pos);
      std::string var = eight && last ? "i_" + a.name + "_8" : "i_" + a.name;
      emit(point, fmt::format("const int {} = {} + {};", var, origins[i], pos));
      if (a.size % plan_.tiles.at(a.name) != 0)
        outside += fmt::format("{}{} >= {}", outside.empty() ? "" : " || ", var, a.size);
      if (eight && last) eightBase = var;
      else env[a.name] = {var, point};
      inner *= t;
    }
    if (!outside.empty()) emit(point, fmt::format("if ({}) continue;  // past the end of a remainder tile", outside));
    eightBase_ = eightBase;
    if (streamed) {
      // The thread's 8 points (if so) are a loop inside the stream's positions, then again for the tail.
      streamLoop(point, env, out);
      if (slices_ > 1) mergeSlices(point, threadPoints);
    }
    int tail = slices_ > 1 ? open(point, "if (slice == 0)") : point;
    const int at = eight ? openEightPoints(tail, tail, env) : tail;
    storeOutputs(at, env);
    if (at != tail) close(at);
    if (tail != point) close(tail);
    close(point);
  }

  // The thread's 8 adjacent points along an axis (the last group axis, from
  // eightBase_, unless named), a loop inside `parent`: bf16 arrays along the
  // axis load and store 16 bytes at once, at `span` (load, store).
  int openEightPoints(int parent, int span, Env& env) {
    return openEightPoints(parent, span, plan_.groupAxes.back().name, eightBase_, env);
  }
  int openEightPoints(int parent, int span, const std::string& axis, const std::string& base, Env& env) {
    const int at = open(parent, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
    const std::string var = define(at, "int", "i_" + axis, base + " + e");
    vectorElements_[var] = {base, span, at};
    env[axis] = {var, at};
    return at;
  }

  // Slots every thread can keep as scalars per point and combine with
  // another thread's by one + or max: no per-point axes, no sum rescaled by a
  // running max, the same axes looped inside each position.
  bool plainSlots() const {
    for (const SlotLayout& s : slots_)
      if (!s.local.empty() || s.maxSlotOfRescale >= 0 || s.keepsPrevious || s.innerAxes != slots_[0].innerAxes) return false;
    return true;
  }

  // A stream on CUDA cores whose launch has fewer threads than the device
  // holds (the columns of a bias gradient: 384 blocks of 8 threads of 8
  // channels, each summing rows) deals its positions out to slices of the
  // block's threads, every slice taking each slices-th position, and joins
  // the slices' slots after it. Without them the loads in flight are too few
  // to cover the memory's latency (Little's law: 4.8 TB/s x ~0.8 us is ~4 MB
  // in flight across the H200; 384 blocks of 64 threads reading 2 bytes each
  // kept 1.2 TB/s). Slices double while the threads of the blocks resident
  // at once (a grid larger than the device's blocks runs in turns) stay
  // within the device's, a block within 256 threads, and each slice 8 or more
  // positions. The cost model's latency term counts the threads so.
  int streamSlices(int64_t grid, int64_t threadPoints) const {
    if (!laneAxis_.empty() || tcs_ || !plainSlots()) return 1;
    for (const Axis& a : plan_.groupAxes)
      if (a.size % plan_.tiles.at(a.name) != 0) return 1;  // a remainder tile's idle points would skip the joins
    const int64_t extent = innerSize(plan_.streamAxis);
    int slices = 1;
    const int64_t residentBlocks = std::min(grid, resident_.blocks);
    while (threadPoints * slices * 2 <= 256 && residentBlocks * threadPoints * slices * 2 <= resident_.threads &&
           extent / (slices * 2) >= 8)
      slices *= 2;
    return slices;
  }

  // The slices' slots joined after the stream: a tree over shared memory,
  // each round the upper half of the slices handing theirs to the lower.
  void mergeSlices(int point, int64_t threadPoints) {
    const int width = eightBase_.empty() ? 1 : 8;
    const std::string at = fmt::format("((slice - half) * {} + p) * {}", threadPoints, width);
    const std::string own = fmt::format("(slice * {} + p) * {}", threadPoints, width);
    for (size_t k = 0; k < slots_.size(); ++k)
      emit(0, fmt::format("__shared__ float {}_slices[{}];", slots_[k].name, slices_ / 2 * threadPoints * width));
    const int round = open(point, fmt::format("for (int half = {}; half > 0; half /= 2)", slices_ / 2));
    const int upper = open(round, "if (slice >= half && slice < 2 * half)");
    for (const SlotLayout& s : slots_)
      emit(upper, width == 1 ? fmt::format("{0}_slices[{1}] = {0};", s.name, at)
                             : fmt::format("for (int w = 0; w < 8; ++w) {0}_slices[{1} + w] = {0}[w];", s.name, at));
    close(upper);
    emit(round, "__syncthreads();");
    const int lower = open(round, "if (slice < half)");
    for (size_t k = 0; k < slots_.size(); ++k) {
      const std::string& name = slots_[k].name;
      const std::string mine = width == 1 ? name : name + "[w]";
      const std::string theirs = fmt::format("{}_slices[{}{}]", name, own, width == 1 ? "" : " + w");
      const std::string join = stream_.slots[k].kind == AccumulatorSlot::Kind::Max
                                   ? fmt::format("{0} = fmaxf({0}, {1});", mine, theirs)
                                   : fmt::format("{} += {};", mine, theirs);
      emit(lower, width == 1 ? join : "for (int w = 0; w < 8; ++w) " + join);
    }
    close(lower);
    emit(round, "__syncthreads();");
    close(round);
  }

  // A launch without lanes whose threads can take 8 adjacent points each
  // along the last group axis (its tile and size multiples of 8): under bf16
  // storage, where a bf16 array it reads or writes has that axis innermost
  // (a gradient of the logits, the concatenation of dq, dk, dv, a bias's
  // gradient summed over the rows).
  // A stream's slots must then be plain (one per point, joined by + or max):
  // each becomes 8 registers, the points' loop inside the stream's positions.
  bool pointsTake8(bool streamed) const {
    if (!approximate_ || !laneAxis_.empty() || plan_.groupAxes.empty()) return false;
    if (streamed ? !plainSlots() : !plan_.streamAxis.empty() || !plan_.splitTiles.empty()) return false;
    const Axis& x = plan_.groupAxes.back();
    return plan_.tiles.at(x.name) % 8 == 0 && x.size % 8 == 0 && bf16ArrayAlong(x.name);
  }

  // Whether the launch reads or writes a bf16 array whose innermost axis is
  // `axis` (read through views: a renamed axis is the array's own): what
  // taking 8 adjacent positions at once turns into 16-byte accesses.
  bool bf16ArrayAlong(const std::string& axis) const {
    auto bf16 = [&](NodeId id) {
      auto it = stored_.find(id);
      return it != stored_.end() && it->second.ctype == "llmc_bf16";
    };
    for (NodeId o : plan_.outputs)
      if (bf16(o) && !g_.node(o).type.axes.empty() && g_.node(o).type.axes.back().name == axis) return true;
    for (const AffineLayout& l : readLayoutsAlong(axis))
      if (bf16(l.array) && l.strides.count(axis) && l.strides.at(axis) == 1) return true;
    return false;
  }

  // The launch's outputs at a point of the tile: each one's axes outside the
  // group looped whole; an output without some group axis stored by the
  // point at position 0 of it.
  void storeOutputs(int point, const Env& env) { storeOutputs(point, env, plan_.outputs); }
  void storeOutputs(int point, const Env& env, const std::vector<NodeId>& outputs) {
    std::set<std::string> group;
    for (const Axis& a : plan_.groupAxes) group.insert(a.name);
    for (NodeId o : outputs) {
      Env e = env;
      std::vector<int> opened;
      int s = point;
      std::string once;
      for (const Axis& a : plan_.groupAxes)
        if (!g_.node(o).type.has(a.name)) once += fmt::format("{}{} == 0", once.empty() ? "" : " && ", env.at(a.name).expr);
      if (!laneAxis_.empty() && !g_.node(o).type.has(laneAxis_)) once += fmt::format("{}lane == 0", once.empty() ? "" : " && ");
      if (!once.empty()) opened.push_back(s = open(s, fmt::format("if ({})", once)));  // stored by one point only
      for (const Axis& a : g_.node(o).type.axes)
        if (!group.count(a.name)) opened.push_back(s = loop(s, a, e));
      store(s, o, e);
      closeAll(opened);
    }
  }

  // ---- a stream on the tensor cores (tensor_core_stream.h): one block per 64
  // rows and batch position, 16 rows per warp; per step of 64 positions, the
  // scores by mma.sync, the running maxima, then the sums and the products'
  // weights at the 32 fragment elements each lane holds, the products by
  // mma.sync; after the stream the slots are staged in shared memory and the
  // tail runs per row as in a CUDA-core tile.
  const StreamProduct* productOf(int slot) const {
    for (const StreamProduct& p : tcs_->products)
      if (p.slot == slot) return &p;
    return nullptr;
  }

  std::string tileOrigin(const StreamTile& tile, const std::string& outerPosition) {
    std::string offset = fmt::format("{}", tile.layout.offset);
    for (const auto& [axis, stride] : tile.layout.strides) {
      if (axis == tile.channel.name || stride == 0) continue;
      offset += fmt::format(" + (long long)({}) * {}", axis == tile.outer ? outerPosition : "i_" + axis, stride);
    }
    reads_.insert(tile.layout.array);
    return fmt::format("reinterpret_cast<const llmc::bf16*>({}) + {}", stored_.at(tile.layout.array).param, offset);
  }

  // A tile by the TMA (one thread a block issues it), counted on `barrier`.
  std::string tmaTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                      const std::string& barrier) const {
    std::string batch[2] = {"0", "0"};
    for (size_t k = 0; k < tile.batchAxes.size(); ++k) batch[k] = "i_" + tile.batchAxes[k].name;
    return fmt::format("llmc::stream::tma_tile<{}>(llmc::smem_addr(smem + {}), {}, {}, {}, {}, {});", tile.paddedChannels,
                       smemAt, tile.tensorMap, outerPosition, batch[0], batch[1], barrier);
  }

  std::string loadTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                       int64_t outerSize) {
    return fmt::format("llmc::sm80::detail::load_tile_async<{}, {}, {}>(reinterpret_cast<llmc::bf16*>(smem + {}), {}, {}, "
                       "{} - ({}), {});",
                       tile.outer == tcs_->rows.name ? kStreamRowsPerBlock : kStreamPositionsPerStep, tile.paddedChannels,
                       kStreamThreads, smemAt, tileOrigin(tile, outerPosition),
                       tile.layout.strides.at(tile.outer), outerSize, outerPosition, tile.channel.size);
  }

  // The loop over the lane's two rows, binding the row axis (clamped into the
  // array: rows past the end are computed on the last row and never stored).
  int openRows(int parent, Env& env) {
    fragment_.half = fresh("h");
    const int s = open(parent, fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 2; ++{0})", fragment_.half));
    const Axis& r = tcs_->rows;
    std::string row = fmt::format("t_{} + warp * 16 + (lane >> 2) + 8 * {}", r.name, fragment_.half);
    if (r.size % kStreamRowsPerBlock != 0) row = fmt::format("min({}, {})", row, r.size - 1);
    env[r.name] = {define(s, "int", "i_" + r.name, row), s};
    return s;
  }

  // The loops over the lane's 16 columns of the step, binding the stream
  // axis; `valid` is set to the condition of a position inside the axis.
  int openColumns(int parent, Env& env, std::vector<int>& opened, std::string& valid) {
    fragment_.column = fresh("j");
    fragment_.element = fresh("e");
    opened.push_back(open(parent, fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 8; ++{0})", fragment_.column)));
    const int s = open(opened.back(), fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 2; ++{0})", fragment_.element));
    opened.push_back(s);
    const Axis& c = tcs_->stream;
    std::string position = define(s, "int", "position", fmt::format("c0 + 8 * {} + 2 * (lane & 3) + {}", fragment_.column,
                                                                     fragment_.element));
    valid = c.size % kStreamPositionsPerStep != 0 ? fmt::format("{} < {}", position, c.size) : "";
    env[c.name] = {c.size % kStreamPositionsPerStep != 0 ? define(s, "int", "i_" + c.name, fmt::format("min({}, {})", position, c.size - 1))
                                    : position,
                   s};
    positions_ = s;
    return s;
  }

  // The comparison holds `neutralWhen` at every row and position of the
  // step: each side ranges over the block's rows or the step's positions.
  // `step`: the step's first position.
  std::string skipCondition(const StreamStepSkip& skip, const std::string& step) const {
    const TensorCoreStream& t = *tcs_;
    auto range = [&](const std::string& axis) -> std::pair<std::string, std::string> {
      if (axis == t.rows.name)
        return {"t_" + axis, fmt::format("min(t_{} + 63, {})", axis, t.rows.size - 1)};
      return {step, fmt::format("min({} + 63, {})", step, t.stream.size - 1)};
    };
    const auto [lo, hi] = range(skip.left);
    const auto [lo2, hi2] = range(skip.right);
    std::string always, never;  // the comparison true everywhere, false everywhere
    switch (g_.node(skip.comparison).compare) {
      case CompareOp::Le: always = fmt::format("{} <= {}", hi, lo2); never = fmt::format("{} > {}", lo, hi2); break;
      case CompareOp::Lt: always = fmt::format("{} < {}", hi, lo2); never = fmt::format("{} >= {}", lo, hi2); break;
      case CompareOp::Ge: always = fmt::format("{} >= {}", lo, hi2); never = fmt::format("{} < {}", hi, lo2); break;
      case CompareOp::Gt: always = fmt::format("{} > {}", lo, hi2); never = fmt::format("{} <= {}", hi, lo2); break;
      default: throw std::logic_error("emit cuda: a step skip on an equality");
    }
    return skip.neutralWhen ? always : never;
  }

  // The comparison holds the other way (not `neutralWhen`) at every row and
  // position of the step: the step changes slots everywhere, no mask needed.
  std::string maskFreeCondition(const StreamStepSkip& skip, const std::string& step) const {
    StreamStepSkip other = skip;
    other.neutralWhen = !skip.neutralWhen;
    return skipCondition(other, step);
  }

  static std::string masked(const std::string& valid, const std::string& v, const char* otherwise) {
    return valid.empty() ? v : fmt::format("({}) ? {} : {}", valid, v, otherwise);
  }

  void tensorCoreStream(WrittenKernel& out) {
    const TensorCoreStream& t = *tcs_;
    if (!setUpStream()) throw std::logic_error("emit cuda: a tensor-core stream that does not stream");
    for (size_t k = 0; k < t.scores.size(); ++k) scoreIndex_[t.scores[k].contraction] = static_cast<int>(k);
    out.grid = t.grid;
    out.block = kStreamThreads;
    const bool warpgroup = t.issuer == MmaIssuer::Warpgroup;
    if (warpgroup) {
      emit(0, "extern __shared__ __align__(128) unsigned char smem_raw[];");
      emit(0, fmt::format("// wgmma reads the swizzled tiles by address: they start on a {0}-byte boundary.", kSwizzleAlignment));
      emit(0, fmt::format("unsigned char* const smem = smem_raw + ({0} - llmc::smem_addr(smem_raw) % {0}) % {0};",
                          kSwizzleAlignment));
    } else {
      emit(0, "extern __shared__ __align__(128) unsigned char smem[];");
    }
    if (warpgroup) {
      emit(0, fmt::format("const unsigned stage_full = llmc::smem_addr(smem + {});  // a stage's tiles landed: two mbarriers",
                          t.barrierOffset));
      emit(0, "llmc::stream::init_stage_barriers(stage_full);");
    }
    const char* const issuer = warpgroup ? "warpgroup" : "warp";
    emit(0, "const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
    if (t.grid > 1) emit(0, "long long block = blockIdx.x;");
    Env env;
    for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
      const Axis& a = plan_.groupAxes[i];
      const int64_t tile = a.name == t.rows.name ? kStreamRowsPerBlock : 1, tiles = ceilDiv(a.size, tile);
      if (tiles == 1) emit(0, fmt::format("const int t_{} = 0;", a.name));
      else emit(0, fmt::format("const int t_{} = (int)(block % {}) * {};", a.name, tiles, tile));
      if (tiles > 1 && i > 0) emit(0, fmt::format("block /= {};", tiles));
      if (a.name != t.rows.name) {
        emit(0, fmt::format("const int i_{0} = t_{0};", a.name));
        env[a.name] = {"i_" + a.name, 0};
      }
    }
    const std::string rowOrigin = "t_" + t.rows.name;
    const int64_t positions = t.stream.size;
    // The row tiles, the first step's column tiles; the rows' A fragments.
    if (!warpgroup)
      for (const StreamScore& sc : t.scores)
        emit(0, loadTile(sc.rows, fmt::format("{}", sc.rows.smemOffset), rowOrigin, t.rows.size));
    int64_t rowBytes = 0, stepBytes = 0;
    for (const StreamTile* tile : t.loadedTiles()) (tile->outer == t.rows.name ? rowBytes : stepBytes) += tile->stageBytes();
    // By the TMA: thread 0 expects the stage's bytes on its barrier, then issues the boxes.
    auto tmaStep = [&](int scope, const std::string& stage, const std::string& first, bool withRows) {
      const int issuer = open(scope, "if (threadIdx.x == 0)");
      const std::string barrier = fmt::format("stage_full + 8 * {}", stage);
      emit(issuer, fmt::format("llmc::stream::expect_tile_bytes({}, {});", barrier, stepBytes + (withRows ? rowBytes : 0)));
      for (const StreamTile* tile : t.loadedTiles()) {
        if (tile->outer == t.rows.name) {
          if (withRows) emit(issuer, tmaTile(*tile, fmt::format("{}", tile->smemOffset), rowOrigin, barrier));
          continue;
        }
        emit(issuer, tmaTile(*tile, fmt::format("{} + {} * {}", tile->smemOffset, stage, tile->stageBytes()), first, barrier));
      }
      close(issuer);
    };
    auto loadStep = [&](int scope, const std::string& stage, const std::string& first) {
      std::vector<const StreamTile*> tiles;
      for (const StreamScore& sc : t.scores) tiles.push_back(&sc.columns);
      for (const StreamProduct& p : t.products) tiles.push_back(&p.values);
      for (const StreamTile* tile : tiles)
        if (!tile->sharesEarlierTile)
          emit(scope, loadTile(*tile, fmt::format("{} + {} * {}", tile->smemOffset, stage, tile->stageBytes()), first,
                               positions));
    };
    // The steps to run: all, or those a comparison of positions leaves
    // unchanged dropped. Where the comparison is everywhere true (or false) in
    // a step's box of rows and positions moves one way along the stream, so
    // those steps are a prefix or a suffix of it (a causal mask's keys past
    // the block's last query, or its queries before the block's first key).
    const int64_t lastStart = (positions - 1) / kStreamPositionsPerStep * kStreamPositionsPerStep;
    if (t.skip) {
      emit(0, "// Steps where no slot changes (the comparison of positions leaves every core 0 or -inf) are not run.");
      emit(0, fmt::format("int c_first = 0, c_last = {};", lastStart));
      emit(0, fmt::format("while (c_first <= c_last && ({})) c_first += {};", skipCondition(*t.skip, "c_first"),
                          kStreamPositionsPerStep));
      emit(0, fmt::format("while (c_last >= c_first && ({})) c_last -= {};", skipCondition(*t.skip, "c_last"),
                          kStreamPositionsPerStep));
    } else {
      emit(0, fmt::format("const int c_first = 0, c_last = {};", lastStart));
    }
    if (warpgroup) {
      tmaStep(0, "0", "c_first", true);
      emit(0, "llmc::stream::wait_tiles(stage_full, 0);");
    } else {
      loadStep(0, "0", "c_first");
      emit(0, "llmc::sm80::detail::cp_async_commit();");
      emit(0, "llmc::sm80::detail::cp_async_wait<0>();");
      emit(0, "__syncthreads();");
    }
    for (size_t k = 0; k < t.scores.size() && !warpgroup; ++k) {
      const StreamTile& rows = t.scores[k].rows;
      emit(0, fmt::format("unsigned fa{}[{}][4];", k, rows.paddedChannels / 16));
      emit(0, fmt::format("llmc::stream::load_row_fragments<{}>(fa{}, llmc::smem_addr(smem + {}), warp * 16);",
                          rows.paddedChannels, k, rows.smemOffset));
    }
    // Accumulators: two rows per lane, or a product's [channels / 8][4] fragment.
    for (size_t k = 0; k < slots_.size(); ++k) {
      const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
      const std::string& name = slots_[k].name;
      if (const StreamProduct* p = productOf(static_cast<int>(k))) {
        emit(0, fmt::format("float {}[{}][4] = {{}};  // accumulator: the product with {} over {}", name,
                            p->values.paddedChannels / 8, names_[static_cast<size_t>(p->factor)], t.stream.name));
        continue;
      }
      const char* init = isMax ? "-LLMC_INF" : "0.0f";
      emit(0, fmt::format("float {}[2] = {{{}, {}}};  // accumulator: {} over {}", name, init, init, isMax ? "max" : "sum",
                          t.stream.name));
      if (slots_[k].keepsPrevious) emit(0, fmt::format("float {}_prev[2];", name));
    }

    // With the TMA, n counts the steps: step n fills its stage for the (n / 2)-th time.
    const int step = open(0, fmt::format("for (int c0 = c_first, stage = 0{}; c0 <= c_last; c0 += {}, stage ^= 1{})",
                                         warpgroup ? ", n = 0" : "", kStreamPositionsPerStep, warpgroup ? ", ++n" : ""));
    // The next step's tiles load while this one computes; the barrier at the
    // end of a step frees the stage they overwrite.
    const std::string nextStep = fmt::format("c0 + {}", kStreamPositionsPerStep);
    const int next = open(step, fmt::format("if ({} <= c_last)", nextStep));
    if (warpgroup) tmaStep(next, "(stage ^ 1)", nextStep, false);
    else loadStep(next, "(stage ^ 1)", nextStep);
    close(next);
    if (warpgroup) {
      emit(step, "llmc::stream::wait_tiles(stage_full + 8 * stage, (n >> 1) & 1);");
    } else {
      emit(step, "llmc::sm80::detail::cp_async_commit();");
      emit(step, "llmc::sm80::detail::cp_async_wait<1>();");
      emit(step, "__syncthreads();");
    }
    // The scores: from the rows' fragments by each warp, or from both tiles by the warpgroup,
    // which issues them all before it waits.
    std::string scoreFragments;
    for (size_t k = 0; k < t.scores.size(); ++k) {
      const StreamScore& sc = t.scores[k];
      const std::string columns = fmt::format("llmc::smem_addr(smem + {} + stage * {})", sc.columns.smemOffset,
                                              sc.columns.stageBytes());
      emit(step, fmt::format("float sc{}[8][4];", k));
      if (warpgroup)
        emit(step, fmt::format("llmc::stream::warpgroup_scores<{}>(sc{}, llmc::smem_addr(smem + {}), {});",
                               sc.columns.paddedChannels, k, sc.rows.smemOffset, columns));
      else
        emit(step, fmt::format("llmc::stream::warp_scores<{}>(sc{}, fa{}, {});", sc.columns.paddedChannels, k, k, columns));
      scoreFragments += fmt::format("{}sc{}", k ? ", " : "", k);
    }
    if (warpgroup) emit(step, fmt::format("llmc::stream::warpgroup_wait({});", scoreFragments));
    for (const StreamProduct& p : t.products) emit(step, fmt::format("float w{}[8][4];", p.slot));
    // The step's elementwise work at the lane's fragment elements, under `parent`.
    auto elementwise = [&](int parent) {
      // The running maxima first: the sums are rescaled by them.
      for (size_t k = 0; k < slots_.size(); ++k) {
        if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max) continue;
        Env e = env;
        const int rows = openRows(parent, e);
        std::string stepMax = fresh("step_max");
        emit(rows, fmt::format("float {} = -LLMC_INF;", stepMax));
        std::vector<int> opened;
        std::string valid;
        const int at = openColumns(rows, e, opened, valid);
        emit(at, fmt::format("{0} = fmaxf({0}, {1});", stepMax, masked(valid, core(static_cast<int>(k), e), "-LLMC_INF")));
        closeAll(opened);
        const std::string ref = slotRef(static_cast<int>(k), e);
        if (slots_[k].keepsPrevious) emit(rows, fmt::format("{}_prev[{}] = {};", slots_[k].name, fragment_.half, ref));
        emit(rows, fmt::format("{0} = fmaxf({0}, llmc::stream::quad_max({1}));", ref, stepMax));
        close(rows);
      }
      {
        Env e = env;
        const int rows = openRows(parent, e);
        std::map<int, std::string> rescaleOf;  // by max slot
        for (size_t k = 0; k < slots_.size(); ++k) {
          const int m = slots_[k].maxSlotOfRescale;
          if (m < 0) continue;
          if (!rescaleOf.count(m))
            rescaleOf[m] = define(rows, "float", "rescale",
                                  fmt::format("{}({}_prev[{}], {})", rescale(), slots_[static_cast<size_t>(m)].name,
                                              fragment_.half, slotRef(m, e)));
          const std::string& factor = rescaleOf[m];
          if (const StreamProduct* p = productOf(static_cast<int>(k)))
            emit(rows, fmt::format("_Pragma(\"unroll\") for (int n = 0; n < {0}; ++n) {{ {1}[n][2 * {2}] *= {3}; "
                                   "{1}[n][2 * {2} + 1] *= {3}; }}  // rescaled as the max moves",
                                   p->values.paddedChannels / 8, slots_[k].name, fragment_.half, factor));
          else emit(rows, fmt::format("{} *= {};  // rescaled as the max moves", slotRef(static_cast<int>(k), e), factor));
        }
        std::vector<int> opened;
        std::string valid;
        const int at = openColumns(rows, e, opened, valid);
        for (size_t k = 0; k < slots_.size(); ++k) {
          if (stream_.slots[k].kind == AccumulatorSlot::Kind::Max) continue;
          if (const StreamProduct* p = productOf(static_cast<int>(k)))
            emit(at, fmt::format("w{}[{}][2 * {} + {}] = {};", k, fragment_.column, fragment_.half, fragment_.element,
                                 masked(valid, core(static_cast<int>(k), e, p->factor), "0.0f")));
          else
            emit(at, fmt::format("{} += {};", slotRef(static_cast<int>(k), e), masked(valid, core(static_cast<int>(k), e), "0.0f")));
        }
        closeAll(opened);
        close(rows);
      }
    };
    if (t.skip && t.products.size() <= 1) {
      // A step whose every row and position the comparison leaves unmasked
      // (a causal mask's keys before the block's first query) runs without it.
      // Measured on the H200 (GPT-2 d12, 2026-11-30): the attention forward 6%
      // and its dQ stream 15% faster; its dK/dV stream, two products (twice
      // the step's code, copied), 5% slower: that one keeps a single copy.
      const std::string full = fresh("unmasked");
      emit(step, fmt::format("const bool {} = {};", full, maskFreeCondition(*t.skip, "c0")));
      const int unmasked = open(step, fmt::format("if ({})", full));
      fixed_[t.skip->comparison] = t.skip->neutralWhen ? "false" : "true";
      elementwise(unmasked);
      fixed_.clear();
      close(unmasked);
      const int masked = open(step, fmt::format("if (!{})", full));
      elementwise(masked);
      close(masked);
    } else {
      elementwise(step);
    }
    std::string productFragments;
    for (const StreamProduct& p : t.products) {
      productFragments += fmt::format("{}{}", productFragments.empty() ? "" : ", ", slots_[static_cast<size_t>(p.slot)].name);
      emit(step, fmt::format("unsigned fw{}[4][4];", p.slot));
      emit(step, fmt::format("llmc::stream::weight_fragments(fw{0}, w{0});", p.slot));
      emit(step, fmt::format("llmc::stream::{}_accumulate<{}>({}, fw{}, llmc::smem_addr(smem + {} + stage * {}));",
                             issuer, p.values.paddedChannels, slots_[static_cast<size_t>(p.slot)].name, p.slot, p.values.smemOffset,
                             p.values.stageBytes()));
    }
    if (warpgroup) emit(step, fmt::format("llmc::stream::warpgroup_wait({});", productFragments));
    emit(step, "__syncthreads();");
    close(step);

    // The slots, whole across the four lanes of a row, staged for the tail.
    for (size_t k = 0; k < slots_.size(); ++k) {
      const std::string& name = slots_[k].name;
      emit(0, fmt::format("float* const {}_staged = reinterpret_cast<float*>(smem + {});", name,
                          t.slotSmemOffset.at(static_cast<int>(k))));
      if (const StreamProduct* p = productOf(static_cast<int>(k))) {
        emit(0, fmt::format("_Pragma(\"unroll\") for (int n = 0; n < {}; ++n)", p->values.paddedChannels / 8));
        emit(0, fmt::format("  _Pragma(\"unroll\") for (int r = 0; r < 4; ++r) {}_staged[(warp * 16 + (lane >> 2) + 8 * (r / 2)) * "
                            "{} + 8 * n + 2 * (lane & 3) + r % 2] = {}[n][r];",
                            name, p->stagedStride(), name));
        continue;
      }
      if (stream_.slots[k].kind == AccumulatorSlot::Kind::Sum)
        emit(0, fmt::format("for (int h = 0; h < 2; ++h) {0}[h] = llmc::stream::quad_sum({0}[h]);", name));
      emit(0, fmt::format("if ((lane & 3) == 0) for (int h = 0; h < 2; ++h) {0}_staged[warp * 16 + (lane >> 2) + 8 * h] = {0}[h];",
                          name));
    }
    emit(0, "__syncthreads();");
    inTail_ = true;
    // The tail: an output whose innermost axis is a product's channels is
    // stored by threads along the channels (coalesced; 8 a thread and one
    // 16-byte store where bf16), each other output by a thread per row.
    std::vector<NodeId> byRow;
    for (NodeId o : plan_.outputs) {
      const Axis* channel = channelsInnermost(o);
      if (!channel) {
        byRow.push_back(o);
        continue;
      }
      const bool eight = channel->size % 8 == 0 && stored_.at(o).ctype == "llmc_bf16";
      const int64_t perRow = eight ? channel->size / 8 : channel->size;
      const int q = open(0, fmt::format("for (int q = threadIdx.x; q < {}; q += blockDim.x)", kStreamRowsPerBlock * perRow));
      floor_ = q;
      emit(q, fmt::format("const int p = q / {};", perRow));
      Env e = env;
      e[t.rows.name] = {define(q, "int", "i_" + t.rows.name, rowOrigin + " + p"), q};
      if (t.rows.size % kStreamRowsPerBlock != 0)
        emit(q, fmt::format("if ({} >= {}) continue;  // past the end of the rows", e.at(t.rows.name).expr, t.rows.size));
      int at = q;
      if (eight) {
        const std::string base = define(q, "int", "i_" + channel->name + "_8", fmt::format("(q % {}) * 8", perRow));
        at = openEightPoints(q, q, channel->name, base, e);
      } else {
        e[channel->name] = {define(q, "int", "i_" + channel->name, fmt::format("q % {}", perRow)), q};
      }
      store(at, o, e);
      if (at != q) close(at);
      close(q);
    }
    if (!byRow.empty()) {
      const int point = open(0, fmt::format("for (int p = threadIdx.x; p < {}; p += blockDim.x)", kStreamRowsPerBlock));
      floor_ = point;
      emit(point, fmt::format("const int i_{0} = {1} + p;", t.rows.name, rowOrigin));
      if (t.rows.size % kStreamRowsPerBlock != 0) emit(point, fmt::format("if (i_{} >= {}) continue;  // past the end of the rows", t.rows.name, t.rows.size));
      env[t.rows.name] = {"i_" + t.rows.name, point};
      storeOutputs(point, env, byRow);
      close(point);
    }
    if (warpgroup)
      for (const StreamTile* tile : t.loadedTiles()) out.tensorMaps.push_back(tile->tensorMap);
    out.streamNote = fmt::format("stream over {} in steps of {} positions: scores and products by {}, the slots in "
                                 "registers",
                                 t.stream.name, kStreamPositionsPerStep,
                                 warpgroup ? "wgmma (the block's warpgroup)" : "mma.sync");
  }

  // The channel axis of a product slot when it is the innermost axis of
  // output `o` and the only one outside the launch's group; else null.
  const Axis* channelsInnermost(NodeId o) const {
    const std::vector<Axis>& axes = g_.node(o).type.axes;
    if (axes.empty()) return nullptr;
    const Axis* channel = nullptr;
    for (const StreamProduct& p : tcs_->products)
      if (slots_[static_cast<size_t>(p.slot)].local.size() == 1 && slots_[static_cast<size_t>(p.slot)].local[0].name == axes.back().name)
        channel = &axes.back();
    if (!channel) return nullptr;
    for (size_t i = 0; i + 1 < axes.size(); ++i) {
      const bool grouped = axes[i].name == tcs_->rows.name ||
                           std::any_of(tcs_->batch.begin(), tcs_->batch.end(), [&](const Axis& b) { return b.name == axes[i].name; });
      if (!grouped) return nullptr;
    }
    return channel;
  }

  // Binds `axes` (outermost first) to the digits of the flat index `flat`.
  static void bindDigits(const std::vector<Axis>& axes, const std::string& flat, int scope, Env& env) {
    int64_t inner = 1;
    for (size_t i = axes.size(); i-- > 0;) {
      std::string pos = inner == 1 ? flat : fmt::format("{} / {}", flat, inner);
      if (i > 0) pos = fmt::format("({}) % {}", pos, axes[i].size);
      env[axes[i].name] = {fmt::format("({})", pos), scope};
      inner *= axes[i].size;
    }
  }

  // operator()(batch, row, col, v, count) of a GEMM's epilogue functor: a
  // loop over the 8 columns (unrolled, so v stays in registers); values that
  // depend on the row alone are computed once, before it.
  void gemmEpilogue() {
    const GemmEpilogueAxes& ax = *epilogue_;
    Env env;
    if (ax.batch.size() == 2) env[ax.batch[0].name] = {"batch.outer", 0};
    if (!ax.batch.empty()) env[ax.batch.back().name] = {"batch.inner", 0};
    bindDigits(ax.rows, "row", 0, env);
    // Axes of extent 1 are no GEMM dimension (tensor_core_gemm.cpp leaves
    // them out): their position is always 0.
    for (const Axis& a : g_.node(ax.contraction).type.axes)
      if (a.size == 1 && !env.count(a.name)) env[a.name] = {"0", 0};
    firstColumn_ = env;
    bindDigits(ax.columns, "col", 0, firstColumn_);
    const Env& firstColumn = firstColumn_;
    int64_t columns = 1;
    for (const Axis& a : ax.columns) columns *= a.size;
    columnsVectorised_ = columns % 8 == 0;  // count is then always 8, and rows are 16-byte aligned
    const int column = open(0, "for (int e = 0; e < 8; ++e)");
    // Past count only where the columns end inside a group: an exit at each
    // column makes the unrolled loop 8 blocks, each column's work waiting for
    // the one before it (GELU's epilogue ran at one instruction every 5.5
    // cycles a warp: ncu on the H200, 2026-11-30).
    if (!columnsVectorised_) emit(column, "if (e >= count) break;");
    bindDigits(ax.columns, "(col + e)", column, env);
    contractionAt_ = env;
    std::vector<std::string> after;
    const bool atomic = !plan_.splitTiles.empty();  // split sums: added into zeroed f32 arrays
    for (NodeId o : plan_.outputs) {
      const StoredArray& arr = stored_.at(o);
      const std::vector<Axis>& axes = g_.node(o).type.axes;
      // Rows of a multiple of 8 columns: all 8 at once (aligned: col % 8 == 0), one 16-byte store of
      // bf16, or two 16-byte atomic adds of f32 split sums.
      bool vector = (atomic ? arr.ctype == "float" : arr.ctype == "llmc_bf16") && columnsVectorised_ &&
                    axes.size() >= ax.columns.size();
      for (size_t i = 0; vector && i < ax.columns.size(); ++i)
        vector = axes[axes.size() - ax.columns.size() + i].name == ax.columns[i].name;
      if (!vector) {
        store(column, o, env);
        continue;
      }
      std::string staged = fresh("out_" + names_[static_cast<size_t>(o)]);
      emit(0, fmt::format("float {}[8];", staged));
      emit(column, fmt::format("{}[e] = {};", staged, value(o, env)));
      after.push_back(atomic ? fmt::format("llmc_add_f32x8({} + {}, {});", arr.param, offset(o, firstColumn), staged)
                             : fmt::format("llmc::store_bf16x8(reinterpret_cast<llmc::bf16*>({}) + {}, {}, count);",
                                           arr.param, offset(o, firstColumn), staged));
    }
    emit(0, "#pragma unroll");
    close(column);
    for (std::string& line : after) emit(0, std::move(line));
  }

  // Thread index over every element of `t`, with the axes bound in env.
  // A grid-stride loop over the points of `t`, binding its axes; at most
  // `maxBlocks` blocks.
  int flatPoints(const Type& t, Env& env, WrittenKernel& out, int64_t maxBlocks = INT_MAX) {
    const int64_t n = t.elementCount();
    out.grid = std::clamp<int64_t>(ceilDiv(n, 256), 1, maxBlocks);
    out.block = 256;
    const char* itype = n > INT_MAX ? "long long" : "int";
    const int point = open(0, fmt::format("for ({0} p = ({0})blockIdx.x * blockDim.x + threadIdx.x; p < {1}; p += ({0})gridDim.x * blockDim.x)",
                                          itype, n));
    floor_ = point;
    int64_t inner = 1;
    for (size_t i = t.axes.size(); i-- > 0;) {
      const Axis& a = t.axes[i];
      std::string pos = inner == 1 ? "p" : fmt::format("p / {}", inner);
      if (i > 0) pos = fmt::format("({}) % {}", pos, a.size);
      std::string var = "i_" + a.name;
      emit(point, fmt::format("const int {} = (int)({});", var, pos));
      env[a.name] = {var, point};
      inner *= a.size;
    }
    return point;
  }

  // isGridSum: each thread sums its share of the array in a grid-stride
  // loop, the lanes of a warp combine theirs with shuffles, the warps theirs
  // in shared memory, and one atomic add per block lands in the zeroed
  // output. A few blocks per SM keep the atomics few while every SM streams.
  void gridSum(WrittenKernel& out) {
    const Node& r = g_.node(plan_.outputs.at(0));
    const Node& x = g_.node(r.operands.at(0));
    emit(0, "float partial = 0.0f;");
    Env env;
    const int point = flatPoints(x.type, env, out, kWholeArraySumBlocks);
    emit(point, fmt::format("partial += {};", value(x.id, env)));
    close(point);
    // The block's warps joined through shared memory before the one atomic
    // add: adds to one address serialise in L2 (with one a warp, GPT-2's loss
    // took 2.8 us against the 1 us the model gives a kernel of its size:
    // H200, 2026-11-30).
    const char* butterfly = "for (int offset = 16; offset > 0; offset /= 2) partial += __shfl_xor_sync(0xffffffffu, partial, offset);";
    emit(0, butterfly);
    emit(0, "__shared__ float warp_partials[32];");
    emit(0, "if ((threadIdx.x & 31) == 0) warp_partials[threadIdx.x / 32] = partial;");
    emit(0, "__syncthreads();");
    const int first = open(0, "if (threadIdx.x < 32)");
    emit(first, "partial = threadIdx.x < (blockDim.x + 31) / 32 ? warp_partials[threadIdx.x] : 0.0f;");
    emit(first, butterfly);
    emit(first, fmt::format("if (threadIdx.x == 0) atomicAdd(&{}[0], partial);", stored_.at(r.id).param));
    close(first);
    out.streamNote = fmt::format("a sum over the whole grid: {} blocks, warp shuffles, one atomic add per block", out.grid);
  }

  void scatter(WrittenKernel& out) {
    const Node& s = g_.node(plan_.outputs.at(0));
    const Node& values = g_.node(s.operands[0]);
    Env env;
    const int point = flatPoints(values.type, env, out);
    std::string v = value(values.id, env);
    std::string row = define(point, "int", "row", value(s.operands[1], env));
    Env at = env;
    at[s.newAxes[0]] = {row, point};
    const StoredArray& arr = stored_.at(s.id);
    emit(point, fmt::format("if ({0} >= 0 && {0} < {1}) atomicAdd(&{2}[{3}], {4});", row, s.type.find(s.newAxes[0])->size,
                            arr.param, offset(s.id, at), v));
    close(point);
  }

  // Zeroes a whole f32 array: 16-byte stores where it is 4 floats a multiple
  // and 16-byte aligned (a caller may place it anywhere), else 4-byte ones
  // (they cleared the token embedding's 154 MB gradient at 1.6 TB/s on the
  // H200, 2026-11-30).
  void clear(WrittenKernel& out) {
    const Node& s = g_.node(plan_.outputs.at(0));
    const std::string& param = stored_.at(s.id).param;
    const int64_t n = s.type.elementCount();
    if (n % 4 != 0) {
      Env env;
      const int point = flatPoints(s.type, env, out);
      emit(point, fmt::format("{}[p] = 0.0f;", param));
      close(point);
      return;
    }
    out.grid = std::max<int64_t>(1, ceilDiv(n / 4, 256));
    out.block = 256;
    const char* itype = n > INT_MAX ? "long long" : "int";
    const std::string stride = fmt::format("({})gridDim.x * blockDim.x", itype);
    emit(0, fmt::format("const {0} first = ({0})blockIdx.x * blockDim.x + threadIdx.x;", itype));
    const int vector = open(0, fmt::format("if ((reinterpret_cast<unsigned long long>({}) & 15) == 0)", param));
    emit(vector, fmt::format("for ({} p = first; p < {}; p += {}) reinterpret_cast<float4*>({})[p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);",
                             itype, n / 4, stride, param));
    close(vector);
    const int scalar = open(0, "else");
    emit(scalar, fmt::format("for ({} p = first; p < {}; p += {}) {}[p] = 0.0f;", itype, n, stride, param));
    close(scalar);
  }

  const Graph& g_;
  const LaunchPlan& plan_;
  const std::map<NodeId, StoredArray>& stored_;
  const std::vector<std::string>& names_;  // printedNames(g_)
  const DeviceResidency resident_;         // the device's threads and blocks at once (0 threads: not known, no slices)
  std::vector<Scope> scopes_;
  std::map<std::string, std::string> cache_;
  std::set<NodeId> reads_;
  int floor_ = 0;  // values are computed no further out than this scope
  int positions_ = 0;  // the loop over the positions of the stream axis
  int slices_ = 1;     // the block's threads share a point's stream in this many slices (streamSlices)
  std::string eightBase_;  // set: each thread takes 8 adjacent points, from this one (pointsTake8)
  // Lanes taking 8 adjacent positions (vectorLanes, loop): each element's
  // position variable -> the span loop around it and the span's first
  // position; the 8 values of an array loaded at a span (by array and offset).
  struct VectorSpan {
    std::string base;  // the span's first position
    int scope = 0;     // the span loop
    int elements = 0;  // the loop over its 8 positions
  };
  std::map<std::string, VectorSpan> vectorElements_;
  std::map<int, std::vector<std::string>> afterClose_;  // lines a scope's parent gets after the scope (a span's stores)

  // The span of 8 positions a value of `n` at `env` is read or written in:
  // where its innermost axis is a lane's (or thread's) element position and
  // its other indices are known at the span (bound in it or outside), outside
  // any branch taken per element; else null.
  const VectorSpan* vectorSpanOf(const Node& n, const Env& env) const {
    if (n.type.axes.empty()) return nullptr;
    auto element = vectorElements_.find(env.at(n.type.axes.back().name).expr);
    // Not from inside a branch among the 8 (a concatenation's part): its loads stay in the branch.
    if (element == vectorElements_.end() || depth(floor_) > depth(element->second.elements)) return nullptr;
    for (auto a = n.type.axes.begin(); a + 1 != n.type.axes.end(); ++a)
      if (depth(env.at(a->name).scope) > depth(element->second.scope)) return nullptr;
    return &element->second;
  }
  std::map<std::string, std::string> vectorLoads_;
  std::map<int, int> spanOf_;  // a lane loop's scope of 8 positions -> its span's scope
  int counter_ = 0;
  StreamAnalysis stream_;
  std::vector<SlotLayout> slots_;
  const GemmEpilogueAxes* epilogue_ = nullptr;  // set: writing a GEMM's epilogue functor
  const TensorCoreStream* tcs_ = nullptr;      // set: writing a stream on the tensor cores

  // exp, division and 1/sqrt in the launch's float arithmetic. Under bf16
  // storage (any array of the module stored bf16) they are the hardware's
  // approximations: llmc_fast_exp (ex2.approx.ftz after x log2(e): 2 ulp, plus 2 per unit of |x|),
  // __fdividef and rsqrtf (2 ulp), far inside bf16's 2^-8, as FlashAttention
  // and llm.c's kernels use them. The accurate forms cost tens of instructions
  // each: per score element of attention, per element of a layernorm's
  // backward recomputing 1/sqrt(variance). With f32 storage the kernels keep
  // expf, IEEE division and 1.0f / sqrtf (the f32 oracle's 1e-5).
  const bool approximate_;
  std::string exp(const std::string& x) const {
    return approximate_ ? fmt::format("llmc_fast_exp({})", x) : fmt::format("expf({})", x);
  }
  std::string divide(const std::string& x, const std::string& y) const {
    return approximate_ ? fmt::format("__fdividef({}, {})", x, y) : fmt::format("{} / {}", x, y);
  }
  const char* rescale() const { return approximate_ ? "llmc_fast_rescale" : "llmc_rescale"; }
  std::string reciprocalSqrt(const std::string& x) const {
    return approximate_ ? fmt::format("rsqrtf({})", x) : fmt::format("1.0f / sqrtf({})", x);
  }
  std::map<NodeId, int> scoreIndex_;           // its score contractions: the register tile sc<k>
  struct {
    std::string half, column, element;  // the loop variables of the fragment element being written
  } fragment_;
  bool inTail_ = false;                        // past the stream: slots read from shared memory
  std::string laneAxis_;                       // set: a warp per point, its lanes along this axis
  int lanes_ = 32;                             // with laneAxis_: the lanes a point takes (lanesPerPoint)
  Env contractionAt_;  // the epilogue's position of the contraction, v[e]
  Env firstColumn_;    // the same at column col (e = 0)
  bool columnsVectorised_ = false;  // the epilogue's rows hold a multiple of 8 columns
  std::map<NodeId, std::string> fixed_;  // values known where the code is written (a step's unmasked comparison)
  std::vector<std::string> epilogueInputs_;  // WrittenKernel::epilogueInputs
  std::string epilogueLoads_;                // WrittenKernel::epilogueLoads
};

}  // namespace

WrittenKernel writeKernel(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                          const std::vector<std::string>& names, DeviceResidency resident) {
  return Writer(graph, plan, stored, names, nullptr, nullptr, resident).run();
}

bool isGridSum(const Graph& graph, const LaunchPlan& plan) {
  return plan.kind == LaunchPlan::Kind::Tile && isWholeArraySum(graph, plan.outputs, plan.computed);
}

WrittenKernel writeTensorCoreStream(const Graph& graph, const LaunchPlan& plan,
                                    const std::map<NodeId, StoredArray>& stored, const std::vector<std::string>& names,
                                    const TensorCoreStream& stream) {
  return Writer(graph, plan, stored, names, nullptr, &stream).run();
}

WrittenKernel writeGemmEpilogue(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                                const std::vector<std::string>& names, const GemmEpilogueAxes& axes) {
  return Writer(graph, plan, stored, names, &axes).run();
}

}  // namespace llmc
