// Scopes, values, loads, elementwise work and reductions: what every launch
// the CUDA writer makes is built from.
#include "codegen/cuda_writer.h"

#include "codegen/constant_bases.h"

namespace llmc::cuda_writer {

WrittenKernel CudaWriter::run() {
  WrittenKernel out;
  for (NodeId id : plan_.computed)
    for (NodeId o : g_.node(id).operands) readInLaunch_.insert(o);
  if (epilogue_) gemmEpilogue();
  else if (tcs_) tensorCoreStream(out);
  else switch (plan_.kind) {
    case LaunchPlan::Kind::Tile:
      if (isGridSum(g_, plan_)) gridSum(out);
      else tile(out);
      break;
    case LaunchPlan::Kind::Scatter: scatter(out); break;
    case LaunchPlan::Kind::Clear: clear(out); break;
    case LaunchPlan::Kind::Scan: scanLines(out); break;
  }
  for (const std::string& l : scopes_[0].lines) out.body += "  " + l + "\n";
  out.reads = reads_;
  out.epilogueInputs = epilogueInputs_;
  return out;
}

// ---- scopes: a block of code under a header (a loop, an if). Code that
// depends only on the indices of an outer scope is emitted there, ahead of
// the open inner scopes (which join their parent when closed).
int CudaWriter::open(int parent, std::string header) {
  scopes_.push_back({parent, scopes_[static_cast<size_t>(parent)].depth + 1, std::move(header), {}});
  return static_cast<int>(scopes_.size()) - 1;
}

int CudaWriter::openLanes(int parent, std::string header) {
  const int s = open(parent, std::move(header));
  laneScopes_.insert(s);
  return s;
}

bool CudaWriter::underLanes(int s) const {
  for (; s >= 0; s = scopes_[static_cast<size_t>(s)].parent)
    if (laneScopes_.count(s)) return true;
  return false;
}

void CudaWriter::close(int s) {
  Scope& sc = scopes_[static_cast<size_t>(s)];
  auto& out = scopes_[static_cast<size_t>(sc.parent)].lines;
  out.push_back(sc.header.empty() ? "{" : sc.header + " {");  // a bare block where there is no header
  for (const std::string& l : sc.lines) out.push_back("  " + l);
  out.push_back("}");
  sc.lines.clear();
  if (auto after = afterClose_.find(s); after != afterClose_.end())
    for (const std::string& l : after->second) out.push_back(l);
  if (auto span = spanOf_.find(s); span != spanOf_.end()) close(span->second);  // a lane loop's 8 positions, then its span
}

std::string CudaWriter::define(int s, const std::string& ctype, const std::string& base, const std::string& expr) {
  std::string name = fresh(base);
  emit(s, fmt::format("const {} {} = {};", ctype, name, expr));
  return name;
}

std::string CudaWriter::defineValue(int s, const std::string& ctype, const std::string& base, const std::string& expr) {
  auto [it, added] = valueDefined_.try_emplace({s, ctype, expr});
  if (added) it->second = define(s, ctype, base, expr);
  return it->second;
}

// A value's printed name without the node numbers it ends in (`hidden_2897`
// -> `hidden`): the functor's members are named so, since a name reached as
// a member is kept as it is where kernel classes compare sources
// (runtime/cuda/canonical_kernel.h): the same epilogue in every layer is
// then one source. fresh() numbers them within the kernel.
std::string CudaWriter::memberStem(const std::string& printed) {
  std::string stem = printed;
  for (;;) {
    const size_t underscore = stem.rfind('_');
    if (underscore == std::string::npos || underscore == 0 || underscore + 1 == stem.size() ||
        !std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(underscore) + 1, stem.end(), ::isdigit))
      break;
    stem.resize(underscore);
  }
  return stem.empty() ? std::string("v") : stem;
}

std::string CudaWriter::fresh(const std::string& base) {
  for (;;) {
    std::string name = fmt::format("{}_{}", base, counter_++);
    if (!axisVariable(name)) return name;
  }
}

// The writer's fixed names: a prefix and an axis name (i_AXIS the position,
// i8_AXIS the first of 8, t_AXIS a tile's origin, chunk_AXIS, split_AXIS).
bool CudaWriter::axisVariable(const std::string& name) {
  if (axisNames_.empty()) {
    auto add = [&](NodeId id) {
      const Node& n = g_.node(id);
      for (const Axis& a : n.type.axes) axisNames_.insert(a.name);
      for (NodeId o : n.operands)
        for (const Axis& a : g_.node(o).type.axes) axisNames_.insert(a.name);
    };
    for (NodeId id : plan_.computed) add(id);
    for (NodeId id : plan_.outputs) add(id);
    for (const Axis& a : plan_.groupAxes) axisNames_.insert(a.name);
    axisNames_.insert("");  // never empty after the first call
  }
  for (const char* prefix : {"i_", "i8_", "t_", "chunk_", "split_"}) {
    const std::string p = prefix;
    if (name.size() > p.size() && name.compare(0, p.size(), p) == 0 && axisNames_.count(name.substr(p.size()))) return true;
  }
  return false;
}

// A loop over a whole axis, binding it in env; over the block's share of
// an axis split across blocks.
int CudaWriter::loop(int parent, const Axis& axis, Env& env) {
  if (!heldRows_.empty() && axis.name == heldRows_.axis && laneLoop(axis.name, parent)) return heldRowsLoop(parent, axis, env);
  auto split = tcs_ ? plan_.splitTiles.end() : plan_.splitTiles.find(axis.name);
  // The lanes walk the block's share of a split lane axis (a split stream's
  // outputs along it, made after it), else the whole axis.
  const bool laneSplit = split != plan_.splitTiles.end() && laneLoop(axis.name, parent);
  const std::string laneStart = laneSplit ? fmt::format("split_{} + ", axis.name) : "";
  const std::string laneEnd = laneSplit ? fmt::format("min(split_{} + {}, {})", axis.name, split->second, axis.size)
                                        : std::to_string(axis.size);
  if (laneLoop(axis.name, parent) && lanesTake8(axis.size) && bf16ArrayAlong(axis.name) &&
      (!laneSplit || split->second % 8 == 0)) {
    // 8 adjacent positions a lane per span of 8 x lanes: bf16 arrays along the axis load 16 bytes at once (load).
    const std::string base = fresh("i_" + axis.name + "_8");
    const int span = openLanes(parent, fmt::format("for (int {0} = {3}lane * 8; {0} < {1}; {0} += {2})", base, laneEnd,
                                                   8 * lanes_, laneStart));
    return openSpanElements(span, axis.name, base, env);
  }
  std::string var = fresh("i_" + axis.name);
  // A block's share of a split axis that divides it has a count known here:
  // one position is no loop, more a loop of that count. A bound the compiler
  // cannot see (min(..)) would keep it from issuing the loads of the
  // unrolled positions around it together (a layernorm's column sums, split
  // one row of b a block, held one position's loads in flight).
  const bool whole = split != plan_.splitTiles.end() && axis.size % split->second == 0;
  int s = laneLoop(axis.name, parent) ? openLanes(parent, fmt::format("for (int {0} = {3}lane; {0} < {1}; {0} += {2})", var, laneEnd,
                                                                      lanes_, laneStart))
          : split == plan_.splitTiles.end()
              ? open(parent, fmt::format("for (int {0} = 0; {0} < {1}; ++{0})", var, axis.size))
          : whole && split->second == 1 ? open(parent, "")
          : whole ? open(parent, fmt::format("for (int {0} = split_{1}; {0} < split_{1} + {2}; ++{0})", var, axis.name,
                                             split->second))
                  : open(parent, fmt::format("for (int {0} = split_{2}; {0} < min(split_{2} + {3}, {1}); ++{0})", var,
                                             axis.size, axis.name, split->second));
  if (whole && split->second == 1 && !laneLoop(axis.name, parent)) emit(s, fmt::format("const int {} = split_{};", var, axis.name));
  env[axis.name] = {var, s};
  return s;
}

int CudaWriter::openSpanElements(int span, const std::string& axis, const std::string& base, Env& env) {
  const int elements = open(span, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
  const std::string var = define(elements, "int", "i_" + axis, base + " + e");
  spanOf_[elements] = span;
  vectorElements_[var] = {base, span, elements};
  env[axis] = {var, elements};
  return elements;
}

void CudaWriter::closeAll(std::vector<int>& opened) {
  for (auto it = opened.rbegin(); it != opened.rend(); ++it) close(*it);
  opened.clear();
}

int64_t CudaWriter::axisSize(NodeId id, const std::string& axis) const {
  const Axis* a = g_.node(id).type.find(axis);
  if (!a) throw std::logic_error(fmt::format("emit cuda: {} has no axis '{}'", names_[static_cast<size_t>(id)], axis));
  return a->size;
}

// ---- values
std::string CudaWriter::value(NodeId id, const Env& env) {
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
  if (std::optional<std::string> staged = stagedValue(id, own, target)) result = *staged;
  else if (std::optional<std::string> row = stagedRowValue(n, own, target)) result = *row;
  else if (std::optional<std::string> held = heldRowValue(n, own, target)) result = *held;
  else if (stream_.streamable && aggregateTerms().count(id)) result = aggregate(n, own, target);
  else if (stored_.count(id) && !plan_.computed.count(id)) result = load(n, own, target);
  else result = compute(n, own, target);
  // A value this launch stores in bf16 is that value wherever it is read:
  // here as in the launches that load it (a mean subtracted from the values
  // it was taken over cancels exactly; a mask finds the maximum stored).
  // One only stored is rounded by its store (round to nearest even, as
  // here), so it is left as it is: GELU's derivative GEMM rounded both its
  // outputs twice, 4 of its epilogue's 30 instructions an element.
  if (plan_.computed.count(id) && isFloat(n.type.dtype) && readInLaunch_.count(id))
    if (auto s = stored_.find(id); s != stored_.end() && s->second.ctype == "llmc_bf16")
      result = define(target, "float", names_[static_cast<size_t>(id)] + "_bf16", fmt::format("llmc_round_bf16({})", result));
  cache_[key] = result;
  return result;
}

// Row-major offset of a position of a stored array (Horner form).
std::string CudaWriter::offset(NodeId id, const Env& env) const {
  const Type& t = g_.node(id).type;
  if (t.axes.empty()) return "0";
  if (auto arr = stored_.find(id); arr != stored_.end() && !arr->second.strides.empty())
    return stridedOffset(id, arr->second, env);
  const bool wide = t.elementCount() > INT_MAX;
  std::string off;
  for (const Axis& a : t.axes) {
    std::string e = env.at(a.name).expr;
    if (off.empty() && t.axes.size() > 1 && !e.empty() && std::all_of(e.begin(), e.end(), ::isdigit))
      if (auto arr = stored_.find(id); arr != stored_.end())
        e = constantBaseMarker(arr->second.param, std::stoll(e), std::stoll(e) * (t.elementCount() / a.size));
    if (off.empty()) off = wide ? fmt::format("(long long)({})", e) : e;
    else off = fmt::format("({}) * {} + {}", off, a.size, e);
  }
  return off;
}

// An array interleaved in a concatenation: each axis' position times its
// stride there (axes of one position are always at 0).
std::string CudaWriter::stridedOffset(NodeId id, const StoredArray& arr, const Env& env) const {
  const Type& t = g_.node(id).type;
  int64_t last = 0;  // the offset of the last element
  for (size_t i = 0; i < t.axes.size(); ++i) last += (t.axes[i].size - 1) * arr.strides[i];
  const bool wide = last >= INT_MAX;
  std::string off;
  for (size_t i = 0; i < t.axes.size(); ++i) {
    if (t.axes[i].size == 1) continue;
    std::string e = env.at(t.axes[i].name).expr;
    if (i == 0 && !e.empty() && std::all_of(e.begin(), e.end(), ::isdigit))
      e = constantBaseMarker(arr.param, std::stoll(e), std::stoll(e) * arr.strides[0]);
    std::string term = wide ? fmt::format("(long long)({})", e) : fmt::format("({})", e);
    if (arr.strides[i] != 1) term += fmt::format(" * {}", arr.strides[i]);
    off = off.empty() ? term : off + " + " + term;
  }
  return off.empty() ? "0" : off;
}

bool CudaWriter::contiguousAlong(NodeId id, size_t innermost) const {
  const auto arr = stored_.find(id);
  if (arr == stored_.end() || arr->second.strides.empty()) return true;
  const Type& t = g_.node(id).type;
  int64_t dense = 1;
  for (size_t k = 0; k < innermost && k < t.axes.size(); ++k) {
    const size_t i = t.axes.size() - 1 - k;
    if (t.axes[i].size == 1) continue;
    if (arr->second.strides[i] != dense) return false;
    dense *= t.axes[i].size;
  }
  return true;
}

std::string CudaWriter::load(const Node& n, const Env& own, int target) {
  const StoredArray& arr = stored_.at(n.id);
  reads_.insert(n.id);
  if (std::optional<std::string> ahead = prefetchedValue(n, own)) return *ahead;
  if (const VectorSpan* span = vectorSpanOf(n, own); span && (arr.ctype == "llmc_bf16" || arr.ctype == "float")) {
    // A lane's 8 positions of a bf16 (f32) array along its innermost axis: one (two) 16-byte load(s) per
    // span, before them.
    const Env at = spanStart(n, *span, own);
    // Keyed by the span's scope too: a stream's tail opens a span of its own over the same positions, where
    // the body's array is out of scope.
    const std::string key = fmt::format("{}@{}@{}", n.id, offset(n.id, at), span->scope);
    auto [it, isNew] = vectorLoads_.emplace(key, "");
    if (isNew) {
      it->second = fresh(names_[static_cast<size_t>(n.id)] + "_8");
      emit(span->scope, fmt::format("float {}[8];", it->second));
      emit(span->scope, span->remaining.empty()
                            ? fmt::format("llmc_load_{}x8({} + {}, {});", arr.ctype == "float" ? "f32" : "bf16",
                                          arr.param, offset(n.id, at), it->second)
                            : fmt::format("llmc_load_{}x8_upto({} + {}, {}, {});", arr.ctype == "float" ? "f32" : "bf16",
                                          arr.param, offset(n.id, at), span->remaining, it->second));
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
      it->second = fresh(memberStem(names_[static_cast<size_t>(n.id)]));
      emit(0, fmt::format("float {}[8];", it->second));
      if (addressedByCoordinates(n, at)) {
        const std::string address = fmt::format("{} + {}", arr.param, offset(n.id, at));
        epilogueInputs_.push_back({"uint4 " + it->second, fmt::format("in.{} = llmc_load_raw16({});", it->second, address),
                                   fmt::format("llmc_copy16_async(&in.{}, {});", it->second, address),
                                   atEpilogueRows(n)});
        emit(0, fmt::format("llmc_unpack_bf16x8(in.{0}, {0});", it->second));
      } else {
        emit(0, fmt::format("llmc_load_bf16x8({} + {}, {});", arr.param, offset(n.id, at), it->second));
      }
    }
    return it->second + "[e]";
  }
  if (epilogue_ && isFloat(n.type.dtype) && (arr.ctype == "float" || arr.ctype == "llmc_bf16") &&
      std::all_of(own.begin(), own.end(), [](const auto& bound) { return bound.second.scope == 0; }) &&
      addressedByCoordinates(n, own)) {
    // A value the epilogue reads per row (a softmax's statistics): loaded by the functor's load(), with the
    // other calls' inputs, before the tile is staged; read in operator() after it. A load issued there
    // waited its latency once a call: the functor's pointers may alias the outputs it stores before.
    const std::string key = fmt::format("{}@{}", n.id, offset(n.id, own));
    auto [it, isNew] = vectorLoads_.emplace(key, "");
    if (isNew) {
      it->second = fresh(memberStem(names_[static_cast<size_t>(n.id)]) + "_in");
      const std::string read = fmt::format("{}[{}]", arr.param, offset(n.id, own));
      const std::string load =
          fmt::format("in.{} = {};", it->second, arr.ctype == "llmc_bf16" ? fmt::format("llmc_bf16_to_f32({})", read) : read);
      epilogueInputs_.push_back({"float " + it->second, load,
                                 arr.ctype == "float" ? fmt::format("llmc_copy4_async(&in.{}, &{});", it->second, read) : load,
                                 atEpilogueRows(n)});
    }
    return define(target, "float", names_[static_cast<size_t>(n.id)], "in." + it->second);
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
bool CudaWriter::alongColumns(const Node& n, const Env& own) const {
  const std::vector<Axis>& columns = epilogue_->columns;
  if (n.type.axes.size() < columns.size() || !contiguousAlong(n.id, columns.size())) return false;
  for (size_t i = 0; i < columns.size(); ++i) {
    const std::string& axis = n.type.axes[n.type.axes.size() - columns.size() + i].name;
    if (axis != columns[i].name || own.at(axis).expr != contractionAt_.at(axis).expr) return false;
  }
  for (size_t i = 0; i + columns.size() < n.type.axes.size(); ++i)
    if (own.at(n.type.axes[i].name).scope != 0) return false;
  return true;
}

bool CudaWriter::atEpilogueRows(const Node& n) const {
  return std::any_of(epilogue_->rows.begin(), epilogue_->rows.end(), [&](const Axis& r) { return n.type.has(r.name); });
}

// Whether the epilogue's read of `n` at `at` is addressed by the call's
// coordinates (batch, row, col) and constants alone: no value the functor
// computes (a gathered index) goes into it, so load() can issue it first.
bool CudaWriter::addressedByCoordinates(const Node& n, const Env& at) const {
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

std::string CudaWriter::storeConversion(const StoredArray& arr, const std::string& v) const {
  if (arr.ctype == "llmc_bf16") return fmt::format("llmc_f32_to_bf16({})", v);
  if (arr.ctype == "unsigned char") return fmt::format("(unsigned char)({} ? 1 : 0)", v);
  if (arr.ctype == "unsigned short") return fmt::format("(unsigned short)({})", v);
  return v;
}

std::string CudaWriter::compute(const Node& n, const Env& own, int target) {
  const std::string name = names_[static_cast<size_t>(n.id)];
  const char* ctype = valueType(n.type.dtype);
  const bool isF = isFloat(n.type.dtype);
  auto operand = [&](size_t k) { return value(n.operands[k], own); };
  auto def = [&](const std::string& expr) { return defineValue(target, ctype, name, expr); };
  switch (n.op) {
    case Op::Unary: {
      const std::string x = operand(0);
      // exp(a - b): a - b's rounding and exp's multiply by log2(e) become one fused multiply-add.
      const Node& arg = g_.node(n.operands[0]);
      if (n.unary == UnaryOp::Exp && approximate_ && arg.op == Op::Binary && arg.binary == BinaryOp::Sub)
        return def(fmt::format("llmc_fast_exp_difference({}, {})", value(arg.operands[0], own), value(arg.operands[1], own)));
      return def(unaryExpression(n.unary, x, isF));
    }
    case Op::Binary: {
      const std::string x = operand(0), y = operand(1);  // in this order: each may define what it reads
      if (n.binary == BinaryOp::Div && approximate_ && isF && g_.node(n.operands[1]).op != Op::Constant)
        return def(fmt::format("{} * {}", x, reciprocal(n.operands[1], own, y)));
      return def(binaryExpression(n.binary, x, y, isF));
    }
    case Op::Compare: {
      // With bf16 storage, floats are compared at bf16's precision: a value is
      // stored rounded or kept in an f32 register as fusion happens to decide, and
      // a maximum's gradient mask (x == max(x)) must hold at the maximum either way.
      // Rounding is monotone, so round(max) == max(round) and orders are kept.
      if (approximate_ && isFloat(g_.node(n.operands[0]).type.dtype))
        return def(fmt::format("llmc_round_bf16({}) {} llmc_round_bf16({})", operand(0), compareSymbol(n.compare),
                               operand(1)));
      return def(fmt::format("{} {} {}", operand(0), compareSymbol(n.compare), operand(1)));
    }
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
      e[n.axes[0]] = {n.newAxes.size() > 1 ? "(" + whole + ")" : whole, scope};  // a sum: parenthesised for what it joins
      return value(n.operands[0], e);
    }
    case Op::Merge: {
      Env e = own;
      const Binding merged = own.at(n.newAxes[0]);
      e.erase(n.newAxes[0]);
      // A span of 8 positions of the merged axis (from a multiple of 8) stays
      // inside one row of its innermost part where that part's length is a
      // multiple of 8: the innermost part's position is a span of its own,
      // the outer parts' are the span start's, so that the array under the
      // merge is read 16 bytes at a time too (qkv's bias gradient, a sum of
      // [b t s h d] over b and t read as [e], e = s h d).
      const auto span = vectorElements_.find(merged.expr);
      const bool spanned = span != vectorElements_.end() && span->second.axes.empty() &&
                           span->second.elementVars.empty() && n.axes.size() > 1 &&
                           axisSize(n.operands[0], n.axes.back()) % 8 == 0;
      const VectorSpan whole = spanned ? span->second : VectorSpan{};
      int64_t inner = 1;
      for (size_t k = n.axes.size(); k-- > 0;) {
        int64_t size = axisSize(n.operands[0], n.axes[k]);
        const bool outer = spanned && inner > 1;
        const std::string& from = outer ? whole.base : merged.expr;
        std::string expr = inner == 1 ? from : fmt::format("({}) / {}", from, inner);
        if (k > 0) expr = fmt::format("({}) % {}", expr, size);
        expr = "(" + expr + ")";
        if (spanned && inner == 1) {
          VectorSpan part = whole;
          part.base = fmt::format("(({}) % {})", whole.base, size);
          vectorElements_[expr] = part;
        }
        e[n.axes[k]] = {expr, outer ? whole.scope : merged.scope};
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
    case Op::ScatterAdd:
    case Op::Scan: break;
  }
  throw std::logic_error(fmt::format("emit cuda: {} ({}) cannot be computed in launch {}", name, opName(n.op),
                                     plan_.name));
}

// A sum, a max or a contraction over its axes, looped whole.
std::string CudaWriter::reduction(const Node& n, const Env& own, int target) {
  const bool isMax = n.op == Op::Reduce && n.reduce == ReduceOp::Max;
  const char* ctype = valueType(n.type.dtype);
  std::string acc = fresh(names_[static_cast<size_t>(n.id)]);
  std::string init = isMax ? (isFloat(n.type.dtype) ? "-LLMC_INF" : "LLMC_INT_MIN") : (isFloat(n.type.dtype) ? "0.0f" : "0");
  emit(target, fmt::format("{} {} = {};  // {} over {}", ctype, acc, init,
                           n.op == Op::Contract ? "contraction" : reduceName(n.reduce), joinAxes(n.axes)));
  Env e = own;
  std::vector<int> opened;
  int s = target;
  // Over the lanes only where they run in step; whole in each lane else.
  const bool acrossLanes = std::find(n.axes.begin(), n.axes.end(), laneAxis_) != n.axes.end() && !underLanes(target);
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
  if (acrossLanes) {
    // The lanes' partial results combined: every lane holds the whole
    // (a warp's by shuffles, then the warps' where a point takes several).
    const std::string combine = isMax ? (isFloat(n.type.dtype) ? "{0} = fmaxf({0}, {1})" : "{0} = max({0}, {1})") : "{0} += {1}";
    const std::string other = fmt::format("__shfl_xor_sync(0xffffffffu, {}, offset)", acc);
    emit(target, fmt::format("for (int offset = {}; offset > 0; offset /= 2) {};", std::min(lanes_, 32) / 2,
                             fmt::format(fmt::runtime(combine), acc, other)));
    if (lanes_ > 32) combineWarps(acc, ctype, combine, target);
  }
  return acc;
}

// table[a = index]; NaN (0 for integers) for an index out of range.
std::string CudaWriter::gather(const Node& n, const Env& own, int target) {
  if (std::optional<std::string> span = gatheredSpan(n, own, target)) return *span;
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

// A gathered row read 8 positions at once: where the table is a stored
// float array whose innermost axis (not the gathered one) is a span's, and
// the index and the table's other positions are the same for the span's 8,
// one bounds check and one 16-byte load (two for f32) a span instead of 8
// checks and 8 loads of 2 bytes (GPT-2's token embedding: 42 us where its
// bytes take 25, H200).
std::optional<std::string> CudaWriter::gatheredSpan(const Node& n, const Env& own, int target) {
  const Node& table = g_.node(n.operands[0]);
  const std::string& axis = n.axes[0];
  const auto stored = stored_.find(table.id);
  if (stored == stored_.end() || plan_.computed.count(table.id) || !isFloat(table.type.dtype) ||
      (stored->second.ctype != "llmc_bf16" && stored->second.ctype != "float") || table.type.axes.empty() ||
      table.type.axes.back().name == axis || !contiguousAlong(table.id, 1))
    return std::nullopt;
  const std::string& inner = table.type.axes.back().name;
  const auto element = vectorElements_.find(own.at(inner).expr);
  if (element == vectorElements_.end()) return std::nullopt;
  const VectorSpan& span = element->second;
  if (!span.elementVars.empty() || (!span.axes.empty() && span.axes != std::vector<std::string>{inner}))
    return std::nullopt;
  auto atSpan = [&](const std::string& a) { return depth(own.at(a).scope) <= depth(span.scope); };
  const Node& index = g_.node(n.operands[1]);
  Env indexAt;
  for (const Axis& a : index.type.axes) {
    if (!atSpan(a.name)) return std::nullopt;
    indexAt[a.name] = own.at(a.name);
  }
  for (const Axis& a : table.type.axes)
    if (a.name != axis && a.name != inner && !atSpan(a.name)) return std::nullopt;
  const std::string row = define(span.scope, "int", "row", value(index.id, indexAt));
  reads_.insert(table.id);
  Env start = own;
  start[axis] = {row, span.scope};
  start[inner] = {span.base, span.scope};
  const std::string at = fmt::format("{} + {}", stored->second.param, offset(table.id, start));
  const std::string key = fmt::format("{}@gather@{}@{}", n.id, at, span.scope);
  auto [it, isNew] = vectorLoads_.emplace(key, "");
  if (isNew) {
    it->second = fresh(names_[static_cast<size_t>(n.id)] + "_8");
    emit(span.scope, fmt::format("float {}[8];", it->second));
    emit(span.scope, fmt::format("if ({0} >= 0 && {0} < {1}) llmc_load_{2}x8({3}, {4});", row, axisSize(table.id, axis),
                                 stored->second.ctype == "float" ? "f32" : "bf16", at, it->second));
    emit(span.scope, fmt::format("else for (int q = 0; q < 8; ++q) {}[q] = LLMC_NAN;", it->second));
  }
  return define(target, "float", names_[static_cast<size_t>(n.id)], it->second + "[e]");
}

std::string CudaWriter::joinAxes(const std::vector<std::string>& axes) {
  std::string out;
  for (const auto& a : axes) out += (out.empty() ? "" : " ") + a;
  return out;
}

// The span of 8 positions a value of `n` at `env` is read or written in:
// where its innermost axis is a lane's (or thread's) element position and
// its other indices are known at the span (bound in it or outside), outside
// any branch taken per element; else null.
const CudaWriter::VectorSpan* CudaWriter::vectorSpanOf(const Node& n, const Env& env) const {
  if (n.type.axes.empty()) return nullptr;
  auto element = vectorElements_.find(env.at(n.type.axes.back().name).expr);
  // Not from inside a branch among the 8 (a concatenation's part): its loads stay in the branch.
  if (element == vectorElements_.end() || depth(floor_) > depth(element->second.elements)) return nullptr;
  const std::vector<std::string>& spanned = element->second.axes;
  if (!contiguousAlong(n.id, std::max<size_t>(1, spanned.size()))) return nullptr;
  if (!element->second.elementVars.empty()) {  // flat: exactly the spanned axes, each at its element's position
    if (n.type.axes.size() != spanned.size()) return nullptr;
    for (size_t k = 0; k < spanned.size(); ++k)
      if (n.type.axes[k].name != spanned[k] || env.at(spanned[k]).expr != element->second.elementVars[k]) return nullptr;
    return &element->second;
  }
  const size_t inner = std::max<size_t>(1, spanned.size());
  if (n.type.axes.size() < inner) return nullptr;
  const auto outer = n.type.axes.end() - static_cast<std::ptrdiff_t>(inner);
  if (!spanned.empty() && !std::equal(spanned.begin(), spanned.end(), outer,
                                      [](const std::string& name, const Axis& a) { return name == a.name; }))
    return nullptr;
  for (auto a = n.type.axes.begin(); a != outer; ++a)
    if (depth(env.at(a->name).scope) > depth(element->second.scope)) return nullptr;
  return &element->second;
}

// The position of the span's first element: `env` with the spanned axes at
// their first positions.
Env CudaWriter::spanStart(const Node& n, const VectorSpan& span, const Env& env) const {
  Env at = env;
  if (!span.startVars.empty()) {
    for (size_t k = 0; k < span.axes.size(); ++k) at[span.axes[k]] = {span.startVars[k], span.scope};
    return at;
  }
  if (span.axes.empty()) {
    at[n.type.axes.back().name] = {span.base, span.scope};
    return at;
  }
  for (size_t k = 0; k < span.axes.size(); ++k) at[span.axes[k]] = {k == 0 ? span.base : std::string("0"), span.scope};
  return at;
}

std::string CudaWriter::unaryExpression(UnaryOp op, const std::string& x, bool isF) const {
  switch (op) {
    case UnaryOp::Neg: return fmt::format("-{}", x);
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return fmt::format("logf({})", x);
    case UnaryOp::Tanh: return fmt::format(fmt::runtime(approximate_ ? "llmc_fast_tanh({})" : "tanhf({})"), x);
    case UnaryOp::Sqrt: return fmt::format("sqrtf({})", x);
    case UnaryOp::Rsqrt: return reciprocalSqrt(x);
    case UnaryOp::Abs: return fmt::format(fmt::runtime(isF ? "fabsf({})" : "abs({})"), x);
    case UnaryOp::Not: return fmt::format("!{}", x);
  }
  throw std::logic_error("emit cuda: unknown unary operation");
}

std::string CudaWriter::binaryExpression(BinaryOp op, const std::string& x, const std::string& y, bool isF) const {
  switch (op) {
    case BinaryOp::Add: return fmt::format("{} + {}", x, y);
    case BinaryOp::Sub: return fmt::format("{} - {}", x, y);
    case BinaryOp::Mul: return fmt::format("{} * {}", x, y);
    case BinaryOp::Div: return divide(x, y);
    case BinaryOp::Maximum: return fmt::format(fmt::runtime(isF ? "fmaxf({}, {})" : "max({}, {})"), x, y);
    case BinaryOp::Minimum: return fmt::format(fmt::runtime(isF ? "fminf({}, {})" : "min({}, {})"), x, y);
    case BinaryOp::And: return fmt::format("{} && {}", x, y);
    case BinaryOp::Or: return fmt::format("{} || {}", x, y);
  }
  throw std::logic_error("emit cuda: unknown binary operation");
}

std::string CudaWriter::exp(const std::string& x) const {
  return approximate_ ? fmt::format("llmc_fast_exp({})", x) : fmt::format("expf({})", x);
}

std::string CudaWriter::divide(const std::string& x, const std::string& y) const {
  return approximate_ ? fmt::format("llmc_fast_divide({}, {})", x, y) : fmt::format("{} / {}", x, y);
}

// 1 / y for the approximate division x * (1 / y), which is how div.approx.f32 is defined (PTX ISA):
// the same result, with the reciprocal taken once where y is defined rather than once a quotient.
// ptxas shares one divisor's MUFU.RCP among the div.approx it sees together, not across loops that
// are not unrolled or the masked and unmasked copies of a step: attention's dQ stream, dividing each
// score by its row's sum, went from 4 MUFU.RCP and 1008 instructions to 2 and 944 (cuobjdump, H100,
// 2026-12-06); a softmax held per row takes one reciprocal a row.
std::string CudaWriter::reciprocal(NodeId divisor, const Env& env, const std::string& y) {
  // A value staged along a tensor-core stream with its reciprocal: read that.
  for (const auto& [id, ahead] : prefetched_)
    if (!ahead.reciprocal.empty() && y == stagedRead(ahead.name)) return stagedRead(ahead.reciprocal);
  int target = floor_;
  for (const Axis& a : g_.node(divisor).type.axes) target = deeper(target, env.at(a.name).scope);
  return defineValue(target, "float", names_[static_cast<size_t>(divisor)] + "_rcp", fmt::format("llmc_fast_reciprocal({})", y));
}

std::string CudaWriter::reciprocalSqrt(const std::string& x) const {
  return approximate_ ? fmt::format("llmc_fast_rsqrt({})", x) : fmt::format("1.0f / sqrtf({})", x);
}

}  // namespace llmc::cuda_writer
