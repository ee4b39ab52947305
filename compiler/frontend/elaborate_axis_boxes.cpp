// The boxes that reshape axes: split, merge, rename, slice, concat,
// broadcast, and scatter_add, which makes new axes of its values.
#include "frontend/elaborator.h"

namespace llmc::elaboration {

// The size given for a new axis in an axis map, or nullopt (to be inferred).
std::optional<int64_t> Elaborator::givenSize(Frame& f, const AxisSpec& spec) {
  if (auto it = f.axisNames.find(spec.name); it != f.axisNames.end()) {
    int64_t known = f.axisSizes.at(it->second);
    if (spec.size) matchSize(f, *spec.size, known, fmt::format("axis '{}'", spec.name));
    return known;
  }
  if (spec.size) return evalSize(f, *spec.size);
  return std::nullopt;
}

const Expr& Elaborator::axisMapArgument(const Expr& call, size_t i, size_t from, size_t to) {
  const Expr& m = *call.args[i];
  if (from && m.from.size() != from)
    fail(m.loc, fmt::format("'{}' takes {} ax{} before '->'", call.name, from, from == 1 ? "is" : "es"));
  if (to && m.to.size() != to)
    fail(m.to.back().loc, fmt::format("'{}' takes {} ax{} after '->'", call.name, to, to == 1 ? "is" : "es"));
  return m;
}

Value Elaborator::evalSplit(Frame& f, const Expr& e) {
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

Value Elaborator::evalMerge(Frame& f, const Expr& e) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "merge");
  const Expr& m = axisMapArgument(e, 1, 0, 1);
  if (m.from.size() < 2) fail(m.loc, "merge needs at least two axes before '->'");
  const Type t = typeOf(x);
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

Value Elaborator::evalRenameOrSlice(Frame& f, const Expr& e, bool isSlice) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, e.name);
  const Expr& m = axisMapArgument(e, 1, 1, 1);
  const Type t = typeOf(x);
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

Value Elaborator::evalConcat(Frame& f, const Expr& e) {
  const Expr& m = axisMapArgument(e, e.args.size() - 1, 1, 1);
  Node n;
  n.op = Op::Concat;
  for (size_t i = 0; i + 1 < e.args.size(); ++i)
    n.operands.push_back(requireArray(eval(f, *e.args[i]), e.args[i]->loc, "concat"));
  std::string axis = resolveAxis(f, m.from[0].name, m.from[0].loc);
  const Type first = typeOf(n.operands[0]);
  for (size_t i = 0; i < n.operands.size(); ++i) {
    const Type t = typeOf(n.operands[i]);
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

// stack(x, y, ..., a): the arrays side by side along a new last axis a, one
// position each (split's inverse: merge(stack(x, y, r), i r -> d)
// interleaves).
Value Elaborator::evalStack(Frame& f, const Expr& e) {
  const Expr& axisArg = *e.args.back();
  std::vector<NodeId> parts;
  for (size_t i = 0; i + 1 < e.args.size(); ++i)
    parts.push_back(requireArray(eval(f, *e.args[i]), e.args[i]->loc, "stack"));
  const Type first = typeOf(parts[0]);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Type t = typeOf(parts[i]);
    if (!t.sameAxisSet(first) || t.dtype != first.dtype)
      fail(e.args[i]->loc, fmt::format("stack of arrays of different types: {} and {}", first.str(), t.str()));
  }
  const std::string name = declareNewAxis(f, axisArg.name, static_cast<int64_t>(parts.size()), first, axisArg.loc);
  return arrayValue(stackAlong(f, parts, name, e.loc));
}

// Each array gets a one-position axis (a broadcast) and a concat joins them
// along it: views both, so no kernel copies anything. The parts share one
// type; `axis` is declared already, of their number's size. One part alone
// is that broadcast (a concat joins two or more).
NodeId Elaborator::stackAlong(Frame& f, const std::vector<NodeId>& parts, const std::string& axis, const SourceLoc& loc) {
  const Type first = typeOf(parts[0]);
  const std::string one = parts.size() == 1 ? axis : declareNewAxis(f, axis + "_part", 1, first, loc);
  Node joined;
  joined.op = Op::Concat;
  for (NodeId x : parts) {
    Node n;
    n.op = Op::Broadcast;
    n.operands = {x};
    n.type = typeOf(x);
    n.newAxes = {one};
    n.type.axes.push_back({one, 1});
    joined.operands.push_back(add(std::move(n), loc));
  }
  if (parts.size() == 1) return joined.operands[0];
  joined.axes = {one};
  joined.newAxes = {axis};
  joined.type = typeOf(joined.operands[0]);
  joined.type.axes.back() = {axis, static_cast<int64_t>(parts.size())};
  return add(std::move(joined), loc);
}

// pad(x, a -> e, before, after[, value]): x along a new axis e with
// `before` positions of value (0 unless given) ahead of a's and `after`
// behind: a slice of a concat of x between copies of the value, all of a's
// size (as many as the padding needs), so it is views only: a kernel reads
// x or the value by position, and the gradient is a slice of the padded one.
Value Elaborator::evalPad(Frame& f, const Expr& e) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "pad");
  const Expr& m = axisMapArgument(e, 1, 1, 1);
  const Type t = typeOf(x);
  const std::string axis = resolveAxis(f, m.from[0].name, m.from[0].loc);
  if (!t.has(axis)) fail(m.from[0].loc, fmt::format("pad of axis '{}' that the array lacks (its type is {})", axis, t.str()));
  const int64_t before = evalPosition(f, *e.args[2], "a padding"), after = evalPosition(f, *e.args[3], "a padding");
  if (before < 0 || after < 0)
    fail(e.args[before < 0 ? 2 : 3]->loc, fmt::format("padding {} is negative; pad takes counts of positions", before < 0 ? before : after));
  double value = 0;
  if (e.args.size() == 5) {
    const Value v = eval(f, *e.args[4]);
    if (!v.isNumber) fail(e.args[4]->loc, "pad's value is a number (the padding's every position)");
    value = v.number;
  }
  const int64_t n = t.find(axis)->size;
  // Each side's value is copies of x's size: a padding of more than 16 times
  // the axis is refused (a concat of that many parts is no view worth having).
  constexpr int64_t kMaxPadParts = 16;
  if (before > kMaxPadParts * n || after > kMaxPadParts * n)
    fail(e.args[before > kMaxPadParts * n ? 2 : 3]->loc,
         fmt::format("padding {} around axis '{}' of size {}: at most {} times the axis' size a side",
                     std::max(before, after), axis, n, kMaxPadParts));
  const int64_t partsBefore = (before + n - 1) / n, partsAfter = (after + n - 1) / n;
  const int64_t size = n + before + after;  // at most 33 * 2^40: no overflow; checked by add()
  Type rest = t;
  rest.axes.erase(std::find_if(rest.axes.begin(), rest.axes.end(), [&](const Axis& a) { return a.name == axis; }));
  if (auto given = givenSize(f, m.to[0]); given && *given != size)
    fail(m.to[0].loc, fmt::format("axis size mismatch: axis '{}' would have size {}, but it has size {}",
                                  m.to[0].name, size, *given));
  NodeId source = x;
  std::string sourceAxis = axis;
  if (partsBefore + partsAfter > 0) {
    Node fill;
    fill.op = Op::Broadcast;
    fill.operands = {constant(value, t.dtype, e.loc)};
    fill.type = t;
    for (const Axis& a : t.axes) fill.newAxes.push_back(a.name);
    const NodeId filler = add(std::move(fill), e.loc);
    Node joined;
    joined.op = Op::Concat;
    for (int64_t k = 0; k < partsBefore; ++k) joined.operands.push_back(filler);
    joined.operands.push_back(x);
    for (int64_t k = 0; k < partsAfter; ++k) joined.operands.push_back(filler);
    const int64_t whole = n * static_cast<int64_t>(joined.operands.size());
    sourceAxis = declareNewAxis(f, m.to[0].name + "_unpadded", whole, rest, m.to[0].loc);
    joined.axes = {axis};
    joined.newAxes = {sourceAxis};
    joined.type = t;
    for (auto& a : joined.type.axes)
      if (a.name == axis) a = {sourceAxis, whole};
    source = add(std::move(joined), e.loc);
  }
  Node cut;
  cut.op = Op::Slice;
  cut.operands = {source};
  cut.axes = {sourceAxis};
  cut.lo = partsBefore * n - before;
  cut.hi = cut.lo + size;
  const std::string name = declareNewAxis(f, m.to[0].name, size, rest, m.to[0].loc);
  cut.newAxes = {name};
  cut.type = typeOf(source);
  for (auto& a : cut.type.axes)
    if (a.name == sourceAxis) a = {name, size};
  return arrayValue(add(std::move(cut), e.loc));
}

Value Elaborator::evalBroadcast(Frame& f, const Expr& e) {
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

Value Elaborator::evalScatterAdd(Frame& f, const Expr& e) {
  NodeId values = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "scatter_add's values");
  NodeId index = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scatter_add's index");
  const Type tv = typeOf(values);
  const Type ti = typeOf(index);
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

}  // namespace llmc::elaboration
