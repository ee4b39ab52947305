#include "frontend/elaborate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "frontend/builtins.h"
#include "frontend/resource_limits.h"

namespace llmc {

namespace {

// What an expression evaluates to: an array (a node of the graph) or a number
// that has no dtype yet and takes the dtype of the array it meets.
struct Value {
  bool isNumber = false;
  NodeId node = -1;
  double number = 0;
  bool isInteger = false;
};

Value arrayValue(NodeId id) { return Value{false, id, 0, false}; }
Value numberValue(double v, bool isInteger) { return Value{true, -1, v, isInteger}; }

std::string axesList(const Type& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.axes.size(); ++i) out += (i ? " " : "") + t.axes[i].name;
  return out + "]";
}

// Limits that keep a huge (or mistaken) program from running for hours: loops
// are unrolled and composites inlined, so the graph grows with both.
constexpr int64_t kMaxLoopIterations = 100000;  // in all 'for' loops together
constexpr size_t kMaxNodes = 1000000;
constexpr size_t kMaxCallDepth = 1000;

// One instantiation of a diagram: the names visible in its body.
struct Frame {
  const DiagramDecl* decl = nullptr;
  std::map<std::string, std::string> axisNames;  // axis as written -> axis in the graph
  std::map<std::string, int64_t> axisSizes;      // axis in the graph -> size
  std::map<std::string, int64_t> symbols;        // size symbols bound by the signature
  std::map<std::string, Value> values;
  std::map<std::string, int64_t> indices;        // loop variables
};

class Elaborator {
 public:
  Elaborator(const Program& program, const SizeBindings& sizes) : program_(program), global_(sizes) {}

  Graph run(const std::string& entryName) {
    const DiagramDecl* entry = program_.find(entryName);
    if (!entry) {
      std::string known;
      for (const auto& [name, d] : program_.diagrams) known += (known.empty() ? "" : ", ") + name;
      throw CompileError(SourceLoc{program_.main().file, 0, 0},
                         fmt::format("no diagram named '{}' (defined: {})", entryName, known));
    }
    graph_.name = entry->name;
    Frame frame;
    frame.decl = entry;
    std::vector<Value> args;
    for (const auto& port : entry->inputs) {
      Node n;
      n.op = Op::Input;
      n.name = port.name;
      n.isParam = port.isParam;
      n.loc = port.loc;
      n.type = entryInputType(frame, port);
      checkSizeLimits(n.type, fmt::format("input '{}'", port.name), port.loc);
      NodeId id = graph_.add(std::move(n));
      graph_.inputs.push_back(id);
      args.push_back(arrayValue(id));
    }
    std::vector<Value> outs = instantiateBody(frame, args, /*isEntry=*/true);
    for (size_t i = 0; i < outs.size(); ++i)
      graph_.outputs.push_back({entry->outputs[i].name, outs[i].node});
    return std::move(graph_);
  }

 private:
  // ---------------------------------------------------------------- errors
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& message) {
    std::vector<std::string> notes;
    for (auto it = callStack_.rbegin(); it != callStack_.rend(); ++it)
      notes.push_back(fmt::format("{}: note: in diagram '{}' called from here", it->second.str(), it->first));
    throw CompileError(loc, message, notes);
  }

  // An error at an argument of the call being instantiated: the argument is in
  // the caller, so that call is no note. (Nothing catches the error, so the
  // call stack may be cut.)
  [[noreturn]] void failAtArgument(const SourceLoc& loc, const std::string& message) {
    callStack_.pop_back();
    fail(loc, message);
  }

  // ---------------------------------------------------------------- sizes
  std::optional<int64_t> lookupSymbol(const Frame& f, const std::string& name) const {
    if (auto it = f.symbols.find(name); it != f.symbols.end()) return it->second;
    if (auto it = global_.find(name); it != global_.end()) return it->second;
    return std::nullopt;
  }

  // Evaluates a size; nullopt when it names a symbol that is not bound yet.
  std::optional<int64_t> evalSize(const Frame& f, const SizeExpr& e) {
    switch (e.kind) {
      case SizeExpr::Kind::Int: return e.value;
      case SizeExpr::Kind::Symbol: return lookupSymbol(f, e.symbol);
      case SizeExpr::Kind::Binary: {
        auto l = evalSize(f, *e.lhs), r = evalSize(f, *e.rhs);
        if (!l || !r) return std::nullopt;
        int64_t result = 0;
        bool overflow = false;
        switch (e.op) {
          case '+': overflow = __builtin_add_overflow(*l, *r, &result); break;
          case '-': overflow = __builtin_sub_overflow(*l, *r, &result); break;
          case '*': overflow = __builtin_mul_overflow(*l, *r, &result); break;
          default:
            if (*r == 0) fail(e.loc, fmt::format("size {} divides by zero", sizeText(e)));
            // The one quotient that overflows (and traps on x86).
            if (*r == -1 && *l == std::numeric_limits<int64_t>::min())
              fail(e.loc, fmt::format("size {} is too large: {} / -1 overflows", sizeText(e), *l));
            if (*l % *r != 0) fail(e.loc, fmt::format("size {} / {} is not a whole number", *l, *r));
            result = *l / *r;
        }
        if (overflow) fail(e.loc, fmt::format("size {} is too large: {} {} {} overflows", sizeText(e), *l, e.op, *r));
        return result;
      }
    }
    return std::nullopt;
  }

  std::string sizeText(const SizeExpr& e) {
    switch (e.kind) {
      case SizeExpr::Kind::Int: return std::to_string(e.value);
      case SizeExpr::Kind::Symbol: return e.symbol;
      case SizeExpr::Kind::Binary:
        return fmt::format("{}{}{}", sizeText(*e.lhs), e.op, sizeText(*e.rhs));
    }
    return "?";
  }

  // Checks an axis of known size against its declared size, binding a symbol
  // the first time it is met.
  void matchSize(Frame& f, const SizeExpr& spec, int64_t actual, const std::string& what) {
    std::optional<int64_t> expected = evalSize(f, spec);
    if (!expected) {
      if (spec.kind == SizeExpr::Kind::Symbol) {
        f.symbols[spec.symbol] = actual;
        return;
      }
      fail(spec.loc, fmt::format("size {} is unbound; bind its names with --set NAME=N", sizeText(spec)));
    }
    if (*expected != actual)
      fail(spec.loc, spec.kind == SizeExpr::Kind::Int
                         ? fmt::format("axis size mismatch: {} has size {}, but the type says {}", what, actual,
                                       *expected)
                         : fmt::format("axis size mismatch: {} has size {}, but the type says {} = {}", what,
                                       actual, sizeText(spec), *expected));
  }

  DType dtypeOf(const TypeSpec& spec) {
    auto d = dtypeFromName(spec.dtype);
    if (!d) fail(spec.loc, fmt::format("unknown dtype '{}' (known: bool i32 u16 f16 bf16 f32 f64)", spec.dtype));
    return *d;
  }

  // ---------------------------------------------------------------- axes
  std::string resolveAxis(const Frame& f, const std::string& name, const SourceLoc& loc) {
    auto it = f.axisNames.find(name);
    if (it == f.axisNames.end()) {
      std::vector<std::string> known;
      for (const auto& [written, actual] : f.axisNames) known.push_back(written);
      fail(loc, fmt::format("unknown axis '{}'{}", name, didYouMean(name, known)));
    }
    return it->second;
  }

  // Declares an axis created in the body (split, merge, rename, ...).
  std::string declareNewAxis(Frame& f, const std::string& name, int64_t size, const Type& within,
                             const SourceLoc& loc) {
    if (size <= 0) fail(loc, fmt::format("axis '{}' has size {}; sizes must be positive", name, size));
    auto it = f.axisNames.find(name);
    if (it != f.axisNames.end()) {
      int64_t known = f.axisSizes.at(it->second);
      if (known != size)
        fail(loc, fmt::format("axis size mismatch: axis '{}' has size {} here but {} elsewhere in '{}'",
                              name, size, known, f.decl->name));
      if (within.has(it->second))
        fail(loc, fmt::format("new axis '{}' collides with an axis the array already has", name));
      return it->second;
    }
    // An axis local to a composite is renamed where it would clash: with an
    // axis the caller weaves over (which the composite cannot know), or with an
    // axis of another size elsewhere (in the flat graph a name has one size).
    std::string actual = name;
    for (int k = 2; within.has(actual) || (graphAxisSizes_.count(actual) && graphAxisSizes_[actual] != size); ++k)
      actual = fmt::format("{}_{}", name, k);
    graphAxisSizes_[actual] = size;
    f.axisNames[name] = actual;
    f.axisSizes[actual] = size;
    return actual;
  }

  // Refuses an array past the size limits (limits.h) before any pass
  // multiplies its sizes: `what` names it ("input 'x'", "this array").
  void checkSizeLimits(const Type& t, const std::string& what, const SourceLoc& loc) {
    int64_t elements = 1;
    for (const Axis& a : t.axes) {
      if (a.size > kMaxAxisSize)
        fail(loc, fmt::format("axis '{}' of {} has size {}, more than the limit of {} (2^40)", a.name, what, a.size,
                              kMaxAxisSize));
      const auto product = checkedMul(elements, a.size);
      if (!product || *product > kMaxElements)
        fail(loc, fmt::format("{} ({}) has more elements than the limit of {} (2^48)", what, t.str(), kMaxElements));
      elements = *product;
    }
  }

  // ---------------------------------------------------------------- nodes
  NodeId add(Node n, const SourceLoc& loc) {
    if (graph_.nodes.size() >= kMaxNodes)
      fail(loc, fmt::format("the program unrolls to more than {} primitive boxes; loops are unrolled and "
                            "composites inlined, so loop only over short axes such as the layers", kMaxNodes));
    checkSizeLimits(n.type, "this array", loc);
    n.loc = loc;
    n.origin = origin_;
    return graph_.add(std::move(n));
  }
  const Type& typeOf(NodeId id) const { return graph_.node(id).type; }

  NodeId constant(double v, DType dtype, const SourceLoc& loc) {
    Node n;
    n.op = Op::Constant;
    n.type.dtype = dtype;
    n.value = v;
    return add(std::move(n), loc);
  }

  // A number becomes a constant of the dtype it meets.
  NodeId materialize(const Value& v, DType dtype, const SourceLoc& loc) {
    if (!v.isNumber) return v.node;
    if (std::isnan(v.number)) fail(loc, "this number is not a number (NaN), as log(-1) or 0/0 would give");
    if (!isFloat(dtype) && !v.isInteger)
      fail(loc, fmt::format("dtype mismatch: the number {} is not a whole number, but the array is {}",
                            v.number, dtypeName(dtype)));
    if (dtype == DType::Bool) fail(loc, "a number cannot be used as a bool; write a comparison");
    return constant(v.number, dtype, loc);
  }

  NodeId requireArray(const Value& v, const SourceLoc& loc, const std::string& what) {
    if (v.isNumber) fail(loc, fmt::format("expected an array for {}, found a number", what));
    return v.node;
  }

  // The axes of an elementwise result: those of the operand with the most axes
  // (the first such), then any others in operand order. Same-named axes must
  // have the same size.
  std::vector<Axis> unifyAxes(const std::vector<NodeId>& operands, const SourceLoc& loc) {
    std::vector<NodeId> byRank = operands;
    std::stable_sort(byRank.begin(), byRank.end(), [&](NodeId a, NodeId b) {
      return typeOf(a).axes.size() > typeOf(b).axes.size();
    });
    std::vector<Axis> out;
    for (NodeId operand : byRank) {
      for (const auto& a : typeOf(operand).axes) {
        auto it = std::find_if(out.begin(), out.end(), [&](const Axis& b) { return b.name == a.name; });
        if (it == out.end()) {
          out.push_back(a);
        } else if (it->size != a.size) {
          fail(loc, fmt::format("axis size mismatch: axis '{}' has size {} in one operand and {} in another",
                                a.name, it->size, a.size));
        }
      }
    }
    return out;
  }

  // The common dtype of an elementwise operation's operands; numbers adapt.
  DType commonDType(const std::vector<Value>& vals, const SourceLoc& loc, const char* opText) {
    std::optional<DType> d;
    for (const auto& v : vals) {
      if (v.isNumber) continue;
      DType t = typeOf(v.node).dtype;
      if (d && *d != t)
        fail(loc, fmt::format("dtype mismatch: '{}' of {} and {}; insert a cast such as {}(x)", opText,
                              dtypeName(*d), dtypeName(t), dtypeName(*d)));
      d = t;
    }
    return *d;
  }

  Value elementwise(Node n, const std::vector<Value>& vals, const SourceLoc& loc, const char* opText,
                    std::optional<DType> resultDType = std::nullopt) {
    DType common = commonDType(vals, loc, opText);
    if (common == DType::Bool && n.op != Op::Select && n.op != Op::Compare)
      fail(loc, fmt::format("'{}' needs numbers, not a bool array; cast it with f32(...)", opText));
    for (const auto& v : vals) n.operands.push_back(materialize(v, common, loc));
    n.type.axes = unifyAxes(n.operands, loc);
    n.type.dtype = resultDType.value_or(common);
    return arrayValue(add(std::move(n), loc));
  }

  // ---------------------------------------------------------------- diagrams
  Type entryInputType(Frame& f, const Port& port) {
    Type t;
    t.dtype = dtypeOf(port.type);
    if (port.type.ellipsisAt >= 0)
      fail(port.type.loc, fmt::format("input '{}' of the entry diagram '{}' cannot have '..': its axes must be known",
                                      port.name, f.decl->name));
    for (const auto& a : port.type.axes) {
      int64_t size;
      if (auto known = f.axisSizes.find(a.name); known != f.axisSizes.end()) {
        size = known->second;
        if (a.size) matchSize(f, *a.size, size, fmt::format("axis '{}' of input '{}'", a.name, port.name));
      } else {
        if (!a.size)
          fail(a.loc, fmt::format("axis '{}' of input '{}' has no size; write {}:N or {}:SYMBOL", a.name,
                                  port.name, a.name, a.name));
        auto v = evalSize(f, *a.size);
        if (!v) fail(a.size->loc, fmt::format("size {} is unbound; set it with --set {}=N", sizeText(*a.size),
                                               firstUnboundSymbol(f, *a.size)));
        size = *v;
      }
      if (size <= 0) fail(a.loc, fmt::format("axis '{}' has size {}; sizes must be positive", a.name, size));
      if (t.has(a.name)) fail(a.loc, fmt::format("axis '{}' appears twice in one type", a.name));
      t.axes.push_back({a.name, size});
      graphAxisSizes_[a.name] = size;
      f.axisNames[a.name] = a.name;
      f.axisSizes[a.name] = size;
    }
    return t;
  }

  std::string firstUnboundSymbol(const Frame& f, const SizeExpr& e) {
    if (e.kind == SizeExpr::Kind::Symbol) return lookupSymbol(f, e.symbol) ? "" : e.symbol;
    if (e.kind == SizeExpr::Kind::Binary) {
      std::string l = firstUnboundSymbol(f, *e.lhs);
      return l.empty() ? firstUnboundSymbol(f, *e.rhs) : l;
    }
    return "";
  }

  // Checks an argument against an input port of a composite and binds the
  // port's axes and size symbols.
  void matchInput(Frame& f, const Port& port, NodeId arg, const SourceLoc& argLoc) {
    const Type& t = typeOf(arg);
    DType want = dtypeOf(port.type);
    if (t.dtype != want)
      failAtArgument(argLoc, fmt::format("dtype mismatch: input '{}' of '{}' is {}, but the argument is {}; "
                                         "insert a cast such as {}(x)", port.name, f.decl->name, dtypeName(want),
                                         dtypeName(t.dtype), dtypeName(want)));
    std::set<std::string> declared;
    for (const auto& a : port.type.axes) {
      std::string actual = f.axisNames.count(a.name) ? f.axisNames[a.name] : a.name;
      const Axis* have = t.find(actual);
      if (!have)
        failAtArgument(argLoc, fmt::format("argument for input '{}' of '{}' lacks axis '{}' (its type is {}); "
                                           "bind the axis with {}=AXIS", port.name, f.decl->name, actual, t.str(),
                                           a.name));
      if (auto known = f.axisSizes.find(actual); known != f.axisSizes.end() && known->second != have->size)
        failAtArgument(argLoc, fmt::format("axis size mismatch: axis '{}' has size {} in the argument for '{}', "
                                           "but {} in an earlier argument of '{}'", actual, have->size, port.name,
                                           known->second, f.decl->name));
      // A size symbol in a composite's signature is a pattern variable, local
      // to this call: the first argument that has the axis binds it.
      if (a.size && a.size->kind == SizeExpr::Kind::Symbol && !f.symbols.count(a.size->symbol))
        f.symbols[a.size->symbol] = have->size;
      else if (a.size)
        matchSize(f, *a.size, have->size, fmt::format("axis '{}' of input '{}'", actual, port.name));
      f.axisNames[a.name] = actual;
      f.axisSizes[actual] = have->size;
      declared.insert(actual);
    }
    if (port.type.ellipsisAt < 0) {
      for (const auto& a : t.axes)
        if (!declared.count(a.name))
          failAtArgument(argLoc, fmt::format("argument for input '{}' of '{}' has axis '{}' that the type {} does "
                                             "not declare; write '..' in the type to weave over extra axes",
                                             port.name, f.decl->name, a.name, typeSpecText(port.type)));
    }
  }

  std::string typeSpecText(const TypeSpec& s) {
    std::string out = s.dtype + "[";
    for (size_t i = 0; i <= s.axes.size(); ++i) {
      if (static_cast<int>(i) == s.ellipsisAt) out += (out.back() == '[' ? "" : " ") + std::string("..");
      if (i < s.axes.size()) out += (out.back() == '[' ? "" : " ") + s.axes[i].name;
    }
    return out + "]";
  }

  // Checks a value against an output port (or an annotation) and returns it,
  // transposed to the declared order when `reorder` is set.
  NodeId checkDeclared(Frame& f, const TypeSpec& spec, NodeId value, const std::string& what,
                       const SourceLoc& loc, bool reorder) {
    const Type& t = typeOf(value);
    DType want = dtypeOf(spec);
    if (t.dtype != want)
      fail(loc, fmt::format("dtype mismatch: {} is declared {} but its value is {}", what, dtypeName(want),
                            dtypeName(t.dtype)));
    std::vector<Axis> declared;
    for (const auto& a : spec.axes) {
      auto mapped = f.axisNames.find(a.name);
      std::string actual = mapped == f.axisNames.end() ? a.name : mapped->second;
      const Axis* have = t.find(actual);
      if (!have)
        fail(a.loc, fmt::format("{} is declared with axis '{}', but its value has axes {}", what, a.name,
                                axesList(t)));
      if (a.size) matchSize(f, *a.size, have->size, fmt::format("axis '{}' of {}", actual, what));
      declared.push_back(*have);
    }
    std::vector<Axis> extra;
    for (const auto& a : t.axes)
      if (std::none_of(declared.begin(), declared.end(), [&](const Axis& d) { return d.name == a.name; }))
        extra.push_back(a);
    if (spec.ellipsisAt < 0 && !extra.empty())
      fail(loc, fmt::format("{} has axis '{}' that its type {} does not declare; write '..' in the type to "
                            "allow woven axes", what, extra.front().name, typeSpecText(spec)));
    if (!reorder) return value;
    std::vector<Axis> order(declared.begin(), declared.end());
    if (spec.ellipsisAt >= 0) order.insert(order.begin() + spec.ellipsisAt, extra.begin(), extra.end());
    if (order == t.axes) return value;
    Node n;
    n.op = Op::Transpose;
    n.type = Type{t.dtype, order};
    n.operands = {value};
    return add(std::move(n), loc);
  }

  std::vector<Value> instantiateBody(Frame& f, const std::vector<Value>& args, bool isEntry) {
    const DiagramDecl& d = *f.decl;
    for (size_t i = 0; i < d.inputs.size(); ++i) f.values[d.inputs[i].name] = args[i];
    runStatements(f, d.body);
    std::vector<Value> outs;
    for (const auto& port : d.outputs) {
      auto it = f.values.find(port.name);
      if (it == f.values.end()) fail(port.loc, fmt::format("output '{}' is never assigned", port.name));
      Value v = it->second;
      NodeId node = v.isNumber ? materialize(v, dtypeOf(port.type), port.loc) : v.node;
      std::string what = fmt::format("output '{}' of '{}'", port.name, d.name);
      // Entry outputs are stored in the declared order; a composite's result
      // keeps the order its computation gave (axes line up by name anyway).
      node = checkDeclared(f, port.type, node, what, port.loc, isEntry);
      outs.push_back(arrayValue(node));
    }
    return outs;
  }

  void runStatements(Frame& f, const std::vector<Statement>& body) {
    for (const auto& s : body) {
      if (s.kind == Statement::Kind::For) {
        runFor(f, s);
        continue;
      }
      if (s.targets.size() > 1) {
        if (s.value->kind != Expr::Kind::Call || findBuiltin(s.value->name))
          fail(s.loc, fmt::format("{} names are assigned, but only a diagram with several outputs gives "
                                  "several values", s.targets.size()));
        std::vector<Value> outs = callDiagram(f, *s.value);
        if (outs.size() != s.targets.size())
          fail(s.loc, fmt::format("'{}' has {} output{}, but {} names are assigned", s.value->name, outs.size(),
                                  outs.size() == 1 ? "" : "s", s.targets.size()));
        for (size_t i = 0; i < outs.size(); ++i) assign(f, s.targets[i], outs[i]);
        continue;
      }
      size_t before = graph_.nodes.size();
      Value v = eval(f, *s.value);
      // Nodes made by this statement and not named inside a composite take the
      // name of what the statement assigns: readable IR.
      for (size_t i = before; i < graph_.nodes.size(); ++i)
        if (graph_.nodes[i].name.empty()) graph_.nodes[i].name = s.targets[0].name;
      assign(f, s.targets[0], v);
    }
  }

  void assign(Frame& f, const Statement::Target& target, Value v) {
    if (target.annotation) {
      DType dtype = dtypeOf(*target.annotation);
      if (v.isNumber) {
        v = arrayValue(materialize(v, dtype, target.loc));
        graph_.node(v.node).name = target.name;
      }
      v = arrayValue(checkDeclared(f, *target.annotation, v.node, fmt::format("'{}'", target.name),
                                   target.loc, /*reorder=*/true));
      if (graph_.node(v.node).name.empty()) graph_.node(v.node).name = target.name;
    }
    f.values[target.name] = v;
  }

  void runFor(Frame& f, const Statement& s) {
    std::string axis = resolveAxis(f, s.loopAxis.name, s.loopAxis.loc);
    int64_t n = f.axisSizes.at(axis);
    if (n > kMaxLoopIterations - loopIterations_)
      fail(s.loopAxis.loc, fmt::format("'for' over axis '{}' of size {} unrolls the loops to more than {} copies "
                                       "of their bodies; loop only over short axes such as the layers", axis, n,
                                       kMaxLoopIterations));
    loopIterations_ += n;
    for (int64_t i = 0; i < n; ++i) {
      f.indices[s.loopVar] = i;
      origin_.push_back(fmt::format("{}={}", s.loopVar, i));
      runStatements(f, s.body);
      origin_.pop_back();
    }
    f.indices.erase(s.loopVar);
  }

  // ---------------------------------------------------------------- expressions
  Value eval(Frame& f, const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Name: return evalName(f, e);
      case Expr::Kind::Number: return numberValue(e.number, e.isInteger);
      case Expr::Kind::Unary: {
        Value x = eval(f, *e.args[0]);
        if (x.isNumber) return numberValue(-x.number, x.isInteger);
        Node n;
        n.op = Op::Unary;
        n.unary = UnaryOp::Neg;
        return elementwise(std::move(n), {x}, e.loc, "-");
      }
      case Expr::Kind::Binary: return evalBinary(f, e);
      case Expr::Kind::Call: {
        if (findBuiltin(e.name)) return evalBuiltin(f, e);
        std::vector<Value> outs = callDiagram(f, e);
        if (outs.size() != 1)
          fail(e.loc, fmt::format("'{}' has {} outputs; assign them with as many names: a, b = {}(...)", e.name,
                                  outs.size(), e.name));
        return outs[0];
      }
      case Expr::Kind::Index: return evalIndex(f, e);
      case Expr::Kind::AxisMap:
      case Expr::Kind::Binding: break;  // refused by resolveProgram
    }
    fail(e.loc, "this is not an expression");
  }

  Value evalName(Frame& f, const Expr& e) {
    if (auto it = f.values.find(e.name); it != f.values.end()) return it->second;
    if (auto it = f.indices.find(e.name); it != f.indices.end())
      return numberValue(static_cast<double>(it->second), true);
    if (auto v = lookupSymbol(f, e.name)) return numberValue(static_cast<double>(*v), true);
    if (e.name == "inf") return numberValue(std::numeric_limits<double>::infinity(), false);
    if (e.name == "pi") return numberValue(std::numbers::pi, false);
    if (f.decl->inputs.end() != std::find_if(f.decl->inputs.begin(), f.decl->inputs.end(),
                                             [&](const Port& p) { return p.name == e.name; }))
      fail(e.loc, fmt::format("unknown name '{}'", e.name));
    fail(e.loc, fmt::format("unknown name '{}' (not a value, a loop variable or a bound size; sizes are bound "
                            "by the signature or with --set {}=N)", e.name, e.name));
  }

  int64_t evalPosition(Frame& f, const Expr& e, const char* what) {
    Value v = eval(f, e);
    if (!v.isNumber || !v.isInteger)
      fail(e.loc, fmt::format("{} must be a whole number (a literal, a size or a loop variable)", what));
    // (A double past 2^62 would not convert: undefined behaviour. Positions
    // that large are out of range of any axis anyway.)
    if (std::fabs(v.number) > static_cast<double>(int64_t{1} << 62))
      fail(e.loc, fmt::format("{} {} is out of range", what, v.number));
    return static_cast<int64_t>(v.number);
  }

  Value evalBinary(Frame& f, const Expr& e) {
    Value l = eval(f, *e.args[0]);
    Value r = eval(f, *e.args[1]);
    static const std::pair<const char*, CompareOp> kCompare[] = {
        {"<", CompareOp::Lt}, {"<=", CompareOp::Le}, {">", CompareOp::Gt},
        {">=", CompareOp::Ge}, {"==", CompareOp::Eq}, {"!=", CompareOp::Ne}};
    for (const auto& [text, op] : kCompare) {
      if (e.op != text) continue;
      if (l.isNumber && r.isNumber) fail(e.loc, "a comparison needs at least one array");
      Node n;
      n.op = Op::Compare;
      n.compare = op;
      return elementwise(std::move(n), {l, r}, e.loc, text, DType::Bool);
    }
    if (l.isNumber && r.isNumber) {
      double a = l.number, b = r.number;
      bool ints = l.isInteger && r.isInteger;
      if (e.op == "+") return numberValue(a + b, ints);
      if (e.op == "-") return numberValue(a - b, ints);
      if (e.op == "*") return numberValue(a * b, ints);
      return numberValue(a / b, ints && b != 0 && std::fmod(a, b) == 0);
    }
    Node n;
    n.op = Op::Binary;
    n.binary = e.op == "+" ? BinaryOp::Add : e.op == "-" ? BinaryOp::Sub : e.op == "*" ? BinaryOp::Mul : BinaryOp::Div;
    return elementwise(std::move(n), {l, r}, e.loc, e.op.c_str());
  }

  Value evalIndex(Frame& f, const Expr& e) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.loc, "indexing");
    std::string axis = resolveAxis(f, e.name, e.loc);
    const Type& t = typeOf(x);
    if (!t.has(axis)) fail(e.loc, fmt::format("cannot index axis '{}': the array has axes {}", axis, axesList(t)));
    int64_t i = evalPosition(f, *e.args[1], "an index");
    int64_t n = t.find(axis)->size;
    if (i < 0 || i >= n) fail(e.args[1]->loc, fmt::format("index {} is out of range for axis '{}' of size {}", i, axis, n));
    Node node;
    node.op = Op::Index;
    // A layer's slice of a stacked parameter reads best as ln1w_3.
    if (graph_.node(x).op == Op::Input) node.name = fmt::format("{}_{}", graph_.node(x).name, i);
    node.axes = {axis};
    node.lo = i;
    node.operands = {x};
    node.type.dtype = t.dtype;
    for (const auto& a : t.axes)
      if (a.name != axis) node.type.axes.push_back(a);
    return arrayValue(add(std::move(node), e.loc));
  }

  // The axis named by a call argument.
  std::string axisArgument(Frame& f, const Expr& a) {
    if (a.kind != Expr::Kind::Name) fail(a.loc, "expected an axis name");
    return resolveAxis(f, a.name, a.loc);
  }

  Value evalBuiltin(Frame& f, const Expr& e) {
    const BuiltinInfo& b = *findBuiltin(e.name);
    const auto& args = e.args;
    switch (b.kind) {
      case BuiltinKind::Unary: {
        Value x = eval(f, *args[0]);
        if (x.isNumber) return numberValue(foldUnary(b.unary, x.number), false);
        if (!isFloat(typeOf(x.node).dtype))
          fail(e.loc, fmt::format("'{}' needs a floating-point array, but the argument is {}", b.name,
                                  dtypeName(typeOf(x.node).dtype)));
        Node n;
        n.op = Op::Unary;
        n.unary = b.unary;
        return elementwise(std::move(n), {x}, e.loc, b.name);
      }
      case BuiltinKind::Binary: {
        Value l = eval(f, *args[0]), r = eval(f, *args[1]);
        if (l.isNumber && r.isNumber)
          return numberValue(b.binary == BinaryOp::Maximum ? std::max(l.number, r.number)
                                                           : std::min(l.number, r.number),
                             l.isInteger && r.isInteger);
        Node n;
        n.op = Op::Binary;
        n.binary = b.binary;
        return elementwise(std::move(n), {l, r}, e.loc, b.name);
      }
      case BuiltinKind::Where: {
        Value c = eval(f, *args[0]);
        NodeId cond = requireArray(c, args[0]->loc, "where's condition");
        if (typeOf(cond).dtype != DType::Bool)
          fail(args[0]->loc, fmt::format("where's condition must be bool (a comparison), but it is {}",
                                         dtypeName(typeOf(cond).dtype)));
        Value x = eval(f, *args[1]), y = eval(f, *args[2]);
        if (x.isNumber && y.isNumber) fail(e.loc, "where needs at least one array among its two choices");
        DType d = commonDType({x, y}, e.loc, "where");
        Node n;
        n.op = Op::Select;
        n.operands = {cond, materialize(x, d, args[1]->loc), materialize(y, d, args[2]->loc)};
        n.type.axes = unifyAxes(n.operands, e.loc);
        n.type.dtype = d;
        return arrayValue(add(std::move(n), e.loc));
      }
      case BuiltinKind::Cast: {
        DType to = *dtypeFromName(b.name);
        Value x = eval(f, *args[0]);
        if (x.isNumber) {
          if (std::isnan(x.number)) fail(e.loc, "this number is not a number (NaN), as log(-1) or 0/0 would give");
          double v = to == DType::Bool ? (x.number != 0) : isFloat(to) ? x.number : std::trunc(x.number);
          return arrayValue(constant(v, to, e.loc));
        }
        if (typeOf(x.node).dtype == to) return x;
        Node n;
        n.op = Op::Cast;
        n.operands = {x.node};
        n.type = Type{to, typeOf(x.node).axes};
        return arrayValue(add(std::move(n), e.loc));
      }
      case BuiltinKind::Reduce: {
        NodeId x = requireArray(eval(f, *args[0]), args[0]->loc, fmt::format("'{}'", b.name));
        const Type& t = typeOf(x);
        if (t.dtype == DType::Bool) fail(e.loc, fmt::format("cannot {} a bool array; cast it with f32(...)", b.name));
        Node n;
        n.op = Op::Reduce;
        n.reduce = b.reduce;
        for (size_t i = 1; i < args.size(); ++i) {
          std::string axis = axisArgument(f, *args[i]);
          if (!t.has(axis))
            fail(args[i]->loc, fmt::format("'{}' over axis '{}' that the array lacks (its type is {})", b.name,
                                           axis, t.str()));
          if (std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end())
            fail(args[i]->loc, fmt::format("axis '{}' is named twice", axis));
          n.axes.push_back(axis);
        }
        n.operands = {x};
        n.type.dtype = t.dtype;
        for (const auto& a : t.axes)
          if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) n.type.axes.push_back(a);
        return arrayValue(add(std::move(n), e.loc));
      }
      case BuiltinKind::Contract: return evalContract(f, e);
      case BuiltinKind::Gather: return evalGather(f, e);
      case BuiltinKind::Pos: {
        std::string axis = axisArgument(f, *args[0]);
        Node n;
        n.op = Op::Pos;
        n.axes = {axis};
        n.type = Type{DType::I32, {{axis, f.axisSizes.at(axis)}}};
        return arrayValue(add(std::move(n), e.loc));
      }
      case BuiltinKind::Size:
        return numberValue(static_cast<double>(f.axisSizes.at(axisArgument(f, *args[0]))), true);
      case BuiltinKind::Split: return evalSplit(f, e);
      case BuiltinKind::Merge: return evalMerge(f, e);
      case BuiltinKind::Rename:
      case BuiltinKind::Slice: return evalRenameOrSlice(f, e, b.kind == BuiltinKind::Slice);
      case BuiltinKind::Concat: return evalConcat(f, e);
      case BuiltinKind::Broadcast: return evalBroadcast(f, e);
      case BuiltinKind::ScatterAdd: return evalScatterAdd(f, e);
      case BuiltinKind::StopGradient: {
        Node n;
        n.op = Op::StopGradient;
        n.operands = {requireArray(eval(f, *args[0]), args[0]->loc, "stop_gradient")};
        n.type = typeOf(n.operands[0]);
        return arrayValue(add(std::move(n), e.loc));
      }
    }
    fail(e.loc, "unhandled built-in");
  }

  static double foldUnary(UnaryOp op, double x) {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Exp: return std::exp(x);
      case UnaryOp::Log: return std::log(x);
      case UnaryOp::Tanh: return std::tanh(x);
      case UnaryOp::Sqrt: return std::sqrt(x);
      case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
      case UnaryOp::Abs: return std::abs(x);
    }
    return x;
  }

  Value evalContract(Frame& f, const Expr& e) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "contract");
    NodeId y = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "contract");
    const Type& tx = typeOf(x);
    const Type& ty = typeOf(y);
    if (tx.dtype != ty.dtype)
      fail(e.loc, fmt::format("dtype mismatch: contract of {} and {}; insert a cast such as {}(x)",
                              dtypeName(tx.dtype), dtypeName(ty.dtype), dtypeName(tx.dtype)));
    if (tx.dtype == DType::Bool) fail(e.loc, "cannot contract bool arrays; cast them with f32(...)");
    Node n;
    n.op = Op::Contract;
    n.operands = {x, y};
    for (size_t i = 2; i < e.args.size(); ++i) {
      std::string axis = axisArgument(f, *e.args[i]);
      const char* side = !tx.has(axis) ? "first" : !ty.has(axis) ? "second" : nullptr;
      if (side)
        fail(e.args[i]->loc, fmt::format("contraction over axis '{}' that the {} operand lacks (its type is {})",
                                         axis, side, (!tx.has(axis) ? tx : ty).str()));
      if (std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end())
        fail(e.args[i]->loc, fmt::format("axis '{}' is named twice", axis));
      n.axes.push_back(axis);
    }
    for (const auto& a : unifyAxes({x, y}, e.loc))
      if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) n.type.axes.push_back(a);
    // Tensor cores and CPUs accumulate low-precision products in f32.
    n.type.dtype = tx.dtype == DType::F64 ? DType::F64 : isFloat(tx.dtype) ? DType::F32 : DType::I32;
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalGather(Frame& f, const Expr& e) {
    NodeId table = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "gather's table");
    NodeId index = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "gather's index");
    std::string axis = axisArgument(f, *e.args[2]);
    const Type& tt = typeOf(table);
    const Type& ti = typeOf(index);
    if (!isInteger(ti.dtype))
      fail(e.args[1]->loc, fmt::format("gather's index must be an integer array (i32 or u16), but it is {}",
                                       dtypeName(ti.dtype)));
    if (!tt.has(axis))
      fail(e.args[2]->loc, fmt::format("gather along axis '{}' that the table lacks (its type is {})", axis, tt.str()));
    if (ti.has(axis))
      fail(e.args[2]->loc, fmt::format("gather's index must not have the gathered axis '{}'", axis));
    unifyAxes({table, index}, e.loc);  // shared axes must agree in size
    Node n;
    n.op = Op::Gather;
    n.axes = {axis};
    n.operands = {table, index};
    n.type.dtype = tt.dtype;
    n.type.axes = ti.axes;
    for (const auto& a : tt.axes)
      if (a.name != axis && !ti.has(a.name)) n.type.axes.push_back(a);
    return arrayValue(add(std::move(n), e.loc));
  }

  // The size given for a new axis in an axis map, or nullopt (to be inferred).
  std::optional<int64_t> givenSize(Frame& f, const AxisSpec& spec) {
    if (auto it = f.axisNames.find(spec.name); it != f.axisNames.end()) {
      int64_t known = f.axisSizes.at(it->second);
      if (spec.size) matchSize(f, *spec.size, known, fmt::format("axis '{}'", spec.name));
      return known;
    }
    if (spec.size) return evalSize(f, *spec.size);
    return std::nullopt;
  }

  const Expr& axisMapArgument(const Expr& call, size_t i, size_t from, size_t to) {
    const Expr& m = *call.args[i];
    if (from && m.from.size() != from)
      fail(m.loc, fmt::format("'{}' takes {} ax{} before '->'", call.name, from, from == 1 ? "is" : "es"));
    if (to && m.to.size() != to)
      fail(m.to.back().loc, fmt::format("'{}' takes {} ax{} after '->'", call.name, to, to == 1 ? "is" : "es"));
    return m;
  }

  Value evalSplit(Frame& f, const Expr& e) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "split");
    const Expr& m = axisMapArgument(e, 1, 1, 0);
    if (m.to.size() < 2) fail(m.loc, "split needs at least two new axes after '->'");
    Type t = typeOf(x);
    std::string axis = resolveAxis(f, m.from[0].name, m.from[0].loc);
    if (!t.has(axis)) fail(m.from[0].loc, fmt::format("split of axis '{}' that the array lacks (its type is {})", axis, t.str()));
    int64_t whole = t.find(axis)->size;
    std::vector<std::optional<int64_t>> sizes;
    int unknown = -1;
    int64_t product = 1;
    for (size_t i = 0; i < m.to.size(); ++i) {
      sizes.push_back(givenSize(f, m.to[i]));
      if (sizes.back()) {
        const auto grown = checkedMul(product, *sizes.back());
        if (!grown) fail(m.to[i].loc, fmt::format("the sizes of the split of axis '{}' multiply past 2^63", axis));
        product = *grown;
      } else {
        if (unknown >= 0)
          fail(m.to[i].loc, fmt::format("cannot infer the sizes of both '{}' and '{}'; give all but one, as in {}:N",
                                        m.to[static_cast<size_t>(unknown)].name, m.to[i].name, m.to[i].name));
        unknown = static_cast<int>(i);
      }
    }
    if (unknown >= 0) {
      if (product <= 0 || whole % product != 0)
        fail(m.loc, fmt::format("axis '{}' of size {} does not split into parts of size {}", axis, whole, product));
      sizes[static_cast<size_t>(unknown)] = whole / product;
      const AxisSpec& spec = m.to[static_cast<size_t>(unknown)];
      if (spec.size && spec.size->kind == SizeExpr::Kind::Symbol) f.symbols[spec.size->symbol] = whole / product;
      product = whole;
    }
    if (product != whole)
      fail(m.loc, fmt::format("axis size mismatch: split of axis '{}' of size {} into parts whose sizes multiply to {}",
                              axis, whole, product));
    Type rest = t;
    rest.axes.erase(std::find_if(rest.axes.begin(), rest.axes.end(), [&](const Axis& a) { return a.name == axis; }));
    Node n;
    n.op = Op::Split;
    n.axes = {axis};
    n.operands = {x};
    n.type.dtype = t.dtype;
    std::vector<Axis> created;
    for (size_t i = 0; i < m.to.size(); ++i) {
      std::string name = declareNewAxis(f, m.to[i].name, *sizes[i], rest, m.to[i].loc);
      n.newAxes.push_back(name);
      created.push_back({name, *sizes[i]});
    }
    for (const auto& a : t.axes) {
      if (a.name == axis) n.type.axes.insert(n.type.axes.end(), created.begin(), created.end());
      else n.type.axes.push_back(a);
    }
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalMerge(Frame& f, const Expr& e) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "merge");
    const Expr& m = axisMapArgument(e, 1, 0, 1);
    if (m.from.size() < 2) fail(m.loc, "merge needs at least two axes before '->'");
    const Type& t = typeOf(x);
    Node n;
    n.op = Op::Merge;
    n.operands = {x};
    int64_t size = 1;
    for (const auto& spec : m.from) {
      std::string axis = resolveAxis(f, spec.name, spec.loc);
      if (!t.has(axis)) fail(spec.loc, fmt::format("merge of axis '{}' that the array lacks (its type is {})", axis, t.str()));
      if (std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end())
        fail(spec.loc, fmt::format("axis '{}' is named twice", axis));
      n.axes.push_back(axis);
      size *= t.find(axis)->size;
    }
    if (auto given = givenSize(f, m.to[0]); given && *given != size)
      fail(m.to[0].loc, fmt::format("axis size mismatch: merged axis '{}' would have size {}, but it has size {}",
                                    m.to[0].name, size, *given));
    Type rest;
    for (const auto& a : t.axes)
      if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) rest.axes.push_back(a);
    std::string name = declareNewAxis(f, m.to[0].name, size, rest, m.to[0].loc);
    n.newAxes = {name};
    n.type.dtype = t.dtype;
    bool placed = false;
    for (const auto& a : t.axes) {
      if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) {
        n.type.axes.push_back(a);
      } else if (!placed) {
        n.type.axes.push_back({name, size});
        placed = true;
      }
    }
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalRenameOrSlice(Frame& f, const Expr& e, bool isSlice) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, e.name);
    const Expr& m = axisMapArgument(e, 1, 1, 1);
    const Type& t = typeOf(x);
    std::string axis = resolveAxis(f, m.from[0].name, m.from[0].loc);
    if (!t.has(axis)) fail(m.from[0].loc, fmt::format("{} of axis '{}' that the array lacks (its type is {})", e.name, axis, t.str()));
    int64_t whole = t.find(axis)->size;
    Node n;
    n.op = isSlice ? Op::Slice : Op::Rename;
    n.axes = {axis};
    n.operands = {x};
    int64_t size = whole;
    if (isSlice) {
      n.lo = evalPosition(f, *e.args[2], "a slice bound");
      n.hi = evalPosition(f, *e.args[3], "a slice bound");
      if (n.lo < 0 || n.hi > whole || n.lo >= n.hi)
        fail(e.args[2]->loc, fmt::format("slice {}:{} is out of range for axis '{}' of size {}", n.lo, n.hi, axis, whole));
      size = n.hi - n.lo;
    }
    if (auto given = givenSize(f, m.to[0]); given && *given != size)
      fail(m.to[0].loc, fmt::format("axis size mismatch: axis '{}' would have size {}, but it has size {}",
                                    m.to[0].name, size, *given));
    Type rest = t;
    rest.axes.erase(std::find_if(rest.axes.begin(), rest.axes.end(), [&](const Axis& a) { return a.name == axis; }));
    std::string name = declareNewAxis(f, m.to[0].name, size, rest, m.to[0].loc);
    n.newAxes = {name};
    n.type = t;
    for (auto& a : n.type.axes)
      if (a.name == axis) a = {name, size};
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalConcat(Frame& f, const Expr& e) {
    const Expr& m = axisMapArgument(e, e.args.size() - 1, 1, 1);
    Node n;
    n.op = Op::Concat;
    for (size_t i = 0; i + 1 < e.args.size(); ++i)
      n.operands.push_back(requireArray(eval(f, *e.args[i]), e.args[i]->loc, "concat"));
    std::string axis = resolveAxis(f, m.from[0].name, m.from[0].loc);
    const Type& first = typeOf(n.operands[0]);
    for (size_t i = 0; i < n.operands.size(); ++i) {
      const Type& t = typeOf(n.operands[i]);
      if (!t.has(axis)) fail(e.args[i]->loc, fmt::format("concat along axis '{}' that this array lacks (its type is {})", axis, t.str()));
      if (!t.sameAxisSet(first))
        fail(e.args[i]->loc, fmt::format("concat of arrays of different types: {} and {}", first.str(), t.str()));
    }
    int64_t size = first.find(axis)->size * static_cast<int64_t>(n.operands.size());
    if (auto given = givenSize(f, m.to[0]); given && *given != size)
      fail(m.to[0].loc, fmt::format("axis size mismatch: axis '{}' would have size {}, but it has size {}",
                                    m.to[0].name, size, *given));
    Type rest = first;
    rest.axes.erase(std::find_if(rest.axes.begin(), rest.axes.end(), [&](const Axis& a) { return a.name == axis; }));
    std::string name = declareNewAxis(f, m.to[0].name, size, rest, m.to[0].loc);
    n.axes = {axis};
    n.newAxes = {name};
    n.type = first;
    for (auto& a : n.type.axes)
      if (a.name == axis) a = {name, size};
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalBroadcast(Frame& f, const Expr& e) {
    NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "broadcast");
    Node n;
    n.op = Op::Broadcast;
    n.operands = {x};
    n.type = typeOf(x);
    for (size_t i = 1; i < e.args.size(); ++i) {
      std::string axis = axisArgument(f, *e.args[i]);
      if (n.type.has(axis))
        fail(e.args[i]->loc, fmt::format("broadcast along axis '{}' that the array already has", axis));
      n.newAxes.push_back(axis);
      n.type.axes.push_back({axis, f.axisSizes.at(axis)});
    }
    return arrayValue(add(std::move(n), e.loc));
  }

  Value evalScatterAdd(Frame& f, const Expr& e) {
    NodeId values = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "scatter_add's values");
    NodeId index = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scatter_add's index");
    const Type& tv = typeOf(values);
    const Type& ti = typeOf(index);
    if (!isInteger(ti.dtype))
      fail(e.args[1]->loc, fmt::format("scatter_add's index must be an integer array (i32 or u16), but it is {}",
                                       dtypeName(ti.dtype)));
    for (const auto& a : ti.axes)
      if (!tv.has(a.name))
        fail(e.args[1]->loc, fmt::format("scatter_add's index has axis '{}' that the values lack", a.name));
    std::string axis = axisArgument(f, *e.args[2]);
    if (tv.has(axis)) fail(e.args[2]->loc, fmt::format("scatter_add along axis '{}' that the values already have", axis));
    Node n;
    n.op = Op::ScatterAdd;
    n.operands = {values, index};
    n.newAxes = {axis};
    for (size_t i = 3; i < e.args.size(); ++i) {
      std::string summed = axisArgument(f, *e.args[i]);
      if (!ti.has(summed))
        fail(e.args[i]->loc, fmt::format("scatter_add sums over axis '{}' that the index lacks", summed));
      n.axes.push_back(summed);
    }
    n.type.dtype = tv.dtype;
    n.type.axes = {{axis, f.axisSizes.at(axis)}};
    for (const auto& a : tv.axes)
      if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) n.type.axes.push_back(a);
    return arrayValue(add(std::move(n), e.loc));
  }

  std::vector<Value> callDiagram(Frame& caller, const Expr& call) {
    const DiagramDecl* callee = program_.find(call.name);
    if (!callee) fail(call.loc, fmt::format("unknown box '{}'", call.name));
    Frame frame;
    frame.decl = callee;
    std::set<std::string> signatureAxes;
    for (const auto& port : callee->inputs)
      for (const auto& a : port.type.axes) signatureAxes.insert(a.name);
    std::vector<Value> args;
    std::vector<const Expr*> argExprs;
    for (const auto& a : call.args) {
      if (a->kind == Expr::Kind::Binding) {
        if (!signatureAxes.count(a->name)) {
          std::string known;
          for (const auto& name : signatureAxes) known += (known.empty() ? "" : " ") + name;
          fail(a->loc, fmt::format("'{}' has no axis '{}' to bind (the axes of its inputs: {})", callee->name,
                                   a->name, known.empty() ? "none" : known));
        }
        if (frame.axisNames.count(a->name)) fail(a->loc, fmt::format("axis '{}' is bound twice", a->name));
        frame.axisNames[a->name] = resolveAxis(caller, a->to[0].name, a->to[0].loc);
        continue;
      }
      args.push_back(eval(caller, *a));
      argExprs.push_back(a.get());
    }
    if (args.size() != callee->inputs.size())
      fail(call.loc, fmt::format("'{}' takes {} inputs, but {} were given", callee->name, callee->inputs.size(), args.size()));
    if (callStack_.size() >= kMaxCallDepth)
      fail(call.loc, fmt::format("composite calls nested more than {} deep", kMaxCallDepth));
    callStack_.push_back({callee->name, call.loc});
    origin_.push_back(callee->name);
    for (size_t i = 0; i < args.size(); ++i) {
      const Port& port = callee->inputs[i];
      if (args[i].isNumber) {
        if (!port.type.axes.empty())
          failAtArgument(argExprs[i]->loc, fmt::format("input '{}' of '{}' is an array with axes, but a number "
                                                       "was given", port.name, callee->name));
        args[i] = arrayValue(materialize(args[i], dtypeOf(port.type), argExprs[i]->loc));
      }
      matchInput(frame, port, args[i].node, argExprs[i]->loc);
    }
    std::vector<Value> outs = instantiateBody(frame, args, /*isEntry=*/false);
    origin_.pop_back();
    callStack_.pop_back();
    // Axes the composite made and returned (a split's parts, say) become
    // nameable by the caller.
    std::set<std::string> argumentAxes;
    for (const auto& a : args)
      for (const auto& axis : typeOf(a.node).axes) argumentAxes.insert(axis.name);
    for (const auto& out : outs)
      for (const auto& axis : typeOf(out.node).axes)
        if (!argumentAxes.count(axis.name) && !caller.axisNames.count(axis.name)) {
          caller.axisNames[axis.name] = axis.name;
          caller.axisSizes[axis.name] = axis.size;
        }
    return outs;
  }

  const Program& program_;
  const SizeBindings& global_;
  Graph graph_;
  std::vector<std::string> origin_;
  std::vector<std::pair<std::string, SourceLoc>> callStack_;
  std::map<std::string, int64_t> graphAxisSizes_;  // every axis name in the graph -> its size
  int64_t loopIterations_ = 0;                      // unrolled so far, in all loops
};

}  // namespace

std::string defaultEntry(const Program& program) {
  const auto& diagrams = program.main().diagrams;
  if (diagrams.empty())
    throw CompileError(SourceLoc{program.main().file, 0, 0}, "the file defines no diagram");
  return diagrams.back().name;
}

Graph elaborate(const Program& program, const std::string& entry, const SizeBindings& sizes) {
  return Elaborator(program, sizes).run(entry);
}

}  // namespace llmc
