#include "frontend/elaborate.h"

#include "frontend/elaborator.h"

namespace llmc::elaboration {

Graph Elaborator::run(const std::string& entryName) {
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

// ---------------------------------------------------------------- errors
[[noreturn]] void Elaborator::fail(const SourceLoc& loc, const std::string& message) {
  std::vector<std::string> notes;
  for (auto it = callStack_.rbegin(); it != callStack_.rend(); ++it)
    notes.push_back(fmt::format("{}: note: in diagram '{}' called from here", it->second.str(), it->first));
  throw CompileError(loc, message, notes);
}

// An error at an argument of the call being instantiated: the argument is in
// the caller, so that call is no note. (Nothing catches the error, so the
// call stack may be cut.)
[[noreturn]] void Elaborator::failAtArgument(const SourceLoc& loc, const std::string& message) {
  callStack_.pop_back();
  fail(loc, message);
}

// ---------------------------------------------------------------- sizes
std::optional<int64_t> Elaborator::lookupSymbol(const Frame& f, const std::string& name) const {
  if (auto it = f.symbols.find(name); it != f.symbols.end()) return it->second;
  if (auto it = global_.find(name); it != global_.end()) {
    usedGlobals_.insert(name);
    return it->second;
  }
  return std::nullopt;
}

// Evaluates a size; nullopt when it names a symbol that is not bound yet.
std::optional<int64_t> Elaborator::evalSize(const Frame& f, const SizeExpr& e) {
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

std::string Elaborator::sizeText(const SizeExpr& e) {
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
void Elaborator::matchSize(Frame& f, const SizeExpr& spec, int64_t actual, const std::string& what) {
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

DType Elaborator::dtypeOf(const TypeSpec& spec) {
  auto d = dtypeFromName(spec.dtype);
  if (!d) fail(spec.loc, fmt::format("unknown dtype '{}' (known: bool i32 u16 f16 bf16 f32 f64)", spec.dtype));
  return *d;
}

// ---------------------------------------------------------------- axes
std::string Elaborator::resolveAxis(const Frame& f, const std::string& name, const SourceLoc& loc) {
  auto it = f.axisNames.find(name);
  if (it == f.axisNames.end() && f.decl)
    for (const auto& port : f.decl->outputs)
      for (const auto& a : port.type.axes)
        if (a.name == name)
          fail(loc, a.size ? fmt::format("axis '{}' of output '{}' has size {}, which is unbound here; bind its "
                                         "names with --set NAME=N", name, port.name, sizeText(*a.size))
                           : fmt::format("axis '{}' of output '{}' has no size to make it with here; write {}:N "
                                         "or {}:SIZE in the output type", name, port.name, name, name));
  if (it == f.axisNames.end()) {
    std::vector<std::string> known;
    for (const auto& [written, actual] : f.axisNames) known.push_back(written);
    fail(loc, fmt::format("unknown axis '{}'{}", name, didYouMean(name, known)));
  }
  return it->second;
}

// Declares an axis created in the body (split, merge, rename, ...).
std::string Elaborator::declareNewAxis(Frame& f, const std::string& name, int64_t size, const Type& within,
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
void Elaborator::checkSizeLimits(const Type& t, const std::string& what, const SourceLoc& loc) {
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
NodeId Elaborator::add(Node n, const SourceLoc& loc) {
  if (graph_.nodes.size() >= kMaxNodes)
    fail(loc, fmt::format("the program unrolls to more than {} primitive boxes; loops are unrolled and "
                          "composites inlined, so loop only over short axes such as the layers", kMaxNodes));
  checkSizeLimits(n.type, "this array", loc);
  n.loc = loc;
  n.origin = origin_;
  return graph_.add(std::move(n));
}

NodeId Elaborator::constant(double v, DType dtype, const SourceLoc& loc) {
  Node n;
  n.op = Op::Constant;
  n.type.dtype = dtype;
  n.value = v;
  return add(std::move(n), loc);
}

// A number becomes a constant of the dtype it meets.
NodeId Elaborator::materialize(const Value& v, DType dtype, const SourceLoc& loc) {
  if (!v.isNumber) return v.node;
  if (std::isnan(v.number)) fail(loc, "this number is not a number (NaN), as log(-1) or 0/0 would give");
  if (!isFloat(dtype) && !v.isInteger)
    fail(loc, fmt::format("dtype mismatch: the number {} is not a whole number, but the array is {}",
                          v.number, dtypeName(dtype)));
  if (dtype == DType::Bool) fail(loc, "a number cannot be used as a bool; write a comparison");
  return constant(v.number, dtype, loc);
}

NodeId Elaborator::requireArray(const Value& v, const SourceLoc& loc, const std::string& what) {
  if (v.isNumber) fail(loc, fmt::format("expected an array for {}, found a number", what));
  return v.node;
}

// The axes of an elementwise result: those of the operand with the most axes
// (the first such), then any others in operand order. Same-named axes must
// have the same size.
std::vector<Axis> Elaborator::unifyAxes(const std::vector<NodeId>& operands, const SourceLoc& loc) {
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
DType Elaborator::commonDType(const std::vector<Value>& vals, const SourceLoc& loc, const char* opText) {
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

Value Elaborator::elementwise(Node n, const std::vector<Value>& vals, const SourceLoc& loc, const char* opText,
                              std::optional<DType> resultDType) {
  DType common = commonDType(vals, loc, opText);
  const bool logical = (n.op == Op::Unary && isLogical(n.unary)) || (n.op == Op::Binary && isLogical(n.binary));
  if (common == DType::Bool && n.op != Op::Select && n.op != Op::Compare && !logical)
    fail(loc, fmt::format("'{}' needs numbers, not a bool array; cast it with f32(...)", opText));
  for (const auto& v : vals) n.operands.push_back(materialize(v, common, loc));
  n.type.axes = unifyAxes(n.operands, loc);
  n.type.dtype = resultDType.value_or(common);
  return arrayValue(add(std::move(n), loc));
}

// ---------------------------------------------------------------- diagrams
Type Elaborator::entryInputType(Frame& f, const Port& port) {
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

std::string Elaborator::firstUnboundSymbol(const Frame& f, const SizeExpr& e) {
  if (e.kind == SizeExpr::Kind::Symbol) return lookupSymbol(f, e.symbol) ? "" : e.symbol;
  if (e.kind == SizeExpr::Kind::Binary) {
    std::string l = firstUnboundSymbol(f, *e.lhs);
    return l.empty() ? firstUnboundSymbol(f, *e.rhs) : l;
  }
  return "";
}

// Checks an argument against an input port of a composite and binds the
// port's axes and size symbols.
void Elaborator::matchInput(Frame& f, const Port& port, NodeId arg, const SourceLoc& argLoc) {
  const Type t = typeOf(arg);
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

std::string Elaborator::typeSpecText(const TypeSpec& s) {
  std::string out = s.dtype + "[";
  for (size_t i = 0; i <= s.axes.size(); ++i) {
    if (static_cast<int>(i) == s.ellipsisAt) out += (out.back() == '[' ? "" : " ") + std::string("..");
    if (i < s.axes.size()) out += (out.back() == '[' ? "" : " ") + s.axes[i].name;
  }
  return out + "]";
}

// Checks a value against an output port (or an annotation) and returns it,
// transposed to the declared order when `reorder` is set.
NodeId Elaborator::checkDeclared(Frame& f, const TypeSpec& spec, NodeId value, const std::string& what,
                                 const SourceLoc& loc, bool reorder) {
  const Type t = typeOf(value);
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

// The signature's axes are known everywhere in the body: an axis that only
// an output type names (`-> y: f32[t:T c]`, the body making t with
// `broadcast` or `pos`) is declared with its size, where the size is known
// by now (a number, or names bound by the inputs or --set). A bare size
// name still unbound stays for the output to bind.
void Elaborator::declareOutputAxes(Frame& f) {
  for (const auto& port : f.decl->outputs) declareTypeAxes(f, port.type);
}

// The axes of `type` not known yet, where their sizes are: an annotated
// statement (`y: f32[t c r:1] = broadcast(x, r)`, as the IR prints) names
// the axes its expression makes.
void Elaborator::declareTypeAxes(Frame& f, const TypeSpec& type) {
  for (const auto& a : type.axes) {
    if (f.axisNames.count(a.name) || !a.size) continue;
    if (const std::optional<int64_t> size = evalSize(f, *a.size)) declareNewAxis(f, a.name, *size, Type{}, a.loc);
  }
}

std::vector<Value> Elaborator::instantiateBody(Frame& f, const std::vector<Value>& args, bool isEntry) {
  const DiagramDecl& d = *f.decl;
  for (size_t i = 0; i < d.inputs.size(); ++i) f.values[d.inputs[i].name] = args[i];
  declareOutputAxes(f);
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

void Elaborator::runStatements(Frame& f, const std::vector<Statement>& body) {
  for (const auto& s : body) {
    if (s.kind == Statement::Kind::For) {
      runFor(f, s);
      continue;
    }
    if (s.kind == Statement::Kind::Require) {
      std::string shown;
      if (!requirementHolds(f, *s.value, shown)) fail(s.value->loc, fmt::format("requirement does not hold: {}", shown));
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
    if (s.targets[0].annotation) declareTypeAxes(f, *s.targets[0].annotation);
    size_t before = graph_.nodes.size();
    Value v = eval(f, *s.value);
    // Nodes made by this statement and not named inside a composite take the
    // name of what the statement assigns: readable IR.
    for (size_t i = before; i < graph_.nodes.size(); ++i)
      if (graph_.nodes[i].name.empty()) graph_.nodes[i].name = s.targets[0].name;
    assign(f, s.targets[0], v);
  }
}

// A `require` condition: comparisons of numbers (sizes, size(a), arithmetic on
// them) joined by and, or, not; `shown` is the condition with its numbers.
bool Elaborator::requirementHolds(Frame& f, const Expr& e, std::string& shown) {
  if (e.kind == Expr::Kind::Unary && e.op == "not") {
    std::string inner;
    const bool holds = !requirementHolds(f, *e.args[0], inner);
    shown = fmt::format("not ({})", inner);
    return holds;
  }
  if (e.kind == Expr::Kind::Binary && (e.op == "and" || e.op == "or")) {
    std::string l, r;
    const bool a = requirementHolds(f, *e.args[0], l), b = requirementHolds(f, *e.args[1], r);
    shown = fmt::format("{} {} {}", l, e.op, r);
    return e.op == "and" ? a && b : a || b;
  }
  static const std::set<std::string> comparisons = {"<", "<=", ">", ">=", "==", "!="};
  if (e.kind != Expr::Kind::Binary || !comparisons.count(e.op))
    fail(e.loc, "a requirement compares sizes (require V <= Vp), several joined by and, or, not");
  double sides[2];
  for (int i = 0; i < 2; ++i) {
    const Value v = eval(f, *e.args[static_cast<size_t>(i)]);
    if (!v.isNumber) fail(e.args[static_cast<size_t>(i)]->loc, "a requirement compares numbers (sizes), not arrays");
    sides[i] = v.number;
  }
  shown = fmt::format("{} {} {}", sides[0], e.op, sides[1]);
  const double a = sides[0], b = sides[1];
  return e.op == "<" ? a < b : e.op == "<=" ? a <= b : e.op == ">" ? a > b : e.op == ">=" ? a >= b : e.op == "==" ? a == b : a != b;
}

void Elaborator::assign(Frame& f, const Statement::Target& target, Value v) {
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

void Elaborator::runFor(Frame& f, const Statement& s) {
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

std::vector<Value> Elaborator::callDiagram(Frame& caller, const Expr& call) {
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

}  // namespace llmc::elaboration

namespace llmc {

std::string defaultEntry(const Program& program) {
  const auto& diagrams = program.main().diagrams;
  if (diagrams.empty())
    throw CompileError(SourceLoc{program.main().file, 0, 0}, "the file defines no diagram");
  return diagrams.back().name;
}

Graph elaborate(const Program& program, const std::string& entry, const SizeBindings& sizes,
                std::set<std::string>* usedSizes) {
  elaboration::Elaborator elaborator(program, sizes);
  Graph graph = elaborator.run(entry);
  if (usedSizes) usedSizes->insert(elaborator.usedSizes().begin(), elaborator.usedSizes().end());
  return graph;
}

}  // namespace llmc
