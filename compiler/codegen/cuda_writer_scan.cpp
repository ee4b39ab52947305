// A scan launch (planning/scan_layout.h): a pass along the scanned axis in
// rounds, each line's aggregate carried from one round to the next.
//
// The scan's elements are those of a monoid, held in registers: one float
// for a sum or a maximum; for a linear recurrence (ir.h, isLinearScan) the
// pair (a, b) standing for the step h -> a h + b, two steps composing to
// (a1 a2, a2 b1 + b2); for a user's operator f (ir.h, isMonoidScan) the
// pair (present, x), the empty element (0, 0) standing in for an identity f
// need not have: f applies where both are present, else the present one
// passes. Every combination below keeps the earlier element on the left, as
// the recurrence's composition (and a user's f) need not commute.
#include "codegen/cuda_writer.h"

#include <stdexcept>

namespace llmc::cuda_writer {

namespace {

using Element = std::vector<std::string>;  // one expression per part

struct ScanMonoid {
  bool linear = false;
  bool isSum = true;
  std::string userOp;  // the lambda spelling a user's operator, "" for the built-in ones
  std::string first;   // an exclusive scan over it: the value where nothing precedes, else 
  size_t parts() const { return linear || !userOp.empty() ? 2 : 1; }
  Element identity() const {
    if (linear) return {"1.0f", "0.0f"};
    if (!userOp.empty()) return {"0.0f", "0.0f"};
    return {isSum ? "0.0f" : "(-LLMC_INF)"};
  }
  // The earlier element, then the later.
  Element combine(const Element& e, const Element& l) const {
    if (linear) return {fmt::format("({}) * ({})", e[0], l[0]), fmt::format("fmaf({}, {}, {})", l[0], e[1], l[1])};
    if (!userOp.empty())
      return {fmt::format("fmaxf({}, {})", e[0], l[0]),
              fmt::format("{} == 0.0f ? ({}) : {} == 0.0f ? ({}) : {}({}, {})", e[0], l[1], l[0], e[1], userOp, e[1], l[1])};
    return {isSum ? fmt::format("({}) + ({})", e[0], l[0]) : fmt::format("fmaxf({}, {})", e[0], l[0])};
  }
  // The value an element leaves: the sum or maximum, h after the steps
  // (from h = 0), or the fold of the user's operator.
  std::string result(const Element& e) const {
    if (!first.empty()) return fmt::format("{} == 0.0f ? {} : {}", e[0], first, e[1]);
    return linear || !userOp.empty() ? e[1] : e[0];
  }
};

}  // namespace

// A user's operator as a device lambda of two floats: one statement a node
// of its graph (ir/scalar_function.h), in float as the scan's elements are.
std::string CudaWriter::operatorLambda(const Graph& f) const {
  std::vector<std::string> v(f.nodes.size());
  std::string body;
  for (const Node& n : f.nodes) {
    const auto in = [&](size_t k) { return v[static_cast<size_t>(n.operands.at(k))]; };
    std::string expr;
    switch (n.op) {
      case Op::Input: v[static_cast<size_t>(n.id)] = n.id == f.inputs[0] ? "a" : "b"; continue;
      case Op::Constant:
        v[static_cast<size_t>(n.id)] = n.type.dtype == DType::Bool ? (n.value != 0 ? "true" : "false")
                                       : isInteger(n.type.dtype)   ? fmt::format("{}", static_cast<int64_t>(n.value))
                                                                   : floatLiteral(n.value);
        continue;
      case Op::StopGradient: v[static_cast<size_t>(n.id)] = in(0); continue;
      case Op::Unary: expr = unaryExpression(n.unary, in(0), isFloat(n.type.dtype)); break;
      case Op::Binary: expr = binaryExpression(n.binary, in(0), in(1), isFloat(n.type.dtype)); break;  // (in() defines nothing)
      case Op::Compare: expr = fmt::format("{} {} {}", in(0), compareSymbol(n.compare), in(1)); break;
      case Op::Select: expr = fmt::format("{} ? {} : {}", in(0), in(1), in(2)); break;
      case Op::Cast:
        expr = n.type.dtype == DType::Bool   ? fmt::format("{} != 0", in(0))
               : isInteger(n.type.dtype)     ? fmt::format("(int)({})", in(0))
                                             : fmt::format("(float)({})", in(0));
        break;
      default: throw std::logic_error(fmt::format("scan operator '{}' uses {}", f.name, opName(n.op)));
    }
    const std::string name = fmt::format("v{}", n.id);
    body += fmt::format(" const {} {} = {};", valueType(n.type.dtype), name, expr);
    v[static_cast<size_t>(n.id)] = name;
  }
  return fmt::format("[](float a, float b) -> float {{{} return {}; }}", body, v[static_cast<size_t>(f.outputs.at(0).node)]);
}

void CudaWriter::scanLines(WrittenKernel& out) {
  const ScanLayout& l = plan_.scan.value();
  const Node& scan = g_.node(l.scan);
  ScanMonoid monoid;
  monoid.linear = isLinearScan(scan);
  monoid.isSum = scan.reduce == ReduceOp::Sum;
  if (scan.combine) {
    monoid.userOp = fresh(scan.combine->name);
    if (scan.lo) monoid.first = floatLiteral(scan.value);
    emit(0, fmt::format("const auto {} = {};  // scan's operator '{}'", monoid.userOp, operatorLambda(*scan.combine),
                        scan.combine->name));
  }
  const size_t P = monoid.parts();
  if (P != static_cast<size_t>(l.parts))
    throw std::logic_error(fmt::format("scan launch: the layout priced {} parts an element, the monoid has {}", l.parts, P));
  const Element identity = monoid.identity();
  const bool exclusive = scan.lo != 0, reverse = scan.hi != 0;
  out.grid = l.blocks;
  out.block = l.threads();
  const int S = l.slices, L = l.linesPerBlock, K = l.perSlice;
  const int64_t T = l.positions;
  // Which line and slice a thread takes: adjacent threads along the line's
  // positions where they are innermost, else across lines.
  const int sliceStride = l.positionsInnermost ? 1 : L;
  emit(0, l.positionsInnermost ? fmt::format("const int slice = threadIdx.x % {0}, lineInBlock = threadIdx.x / {0};", S)
                               : fmt::format("const int slice = threadIdx.x / {0}, lineInBlock = threadIdx.x % {0};", L));
  const char* itype = l.lineCount > INT_MAX ? "long long" : "int";
  emit(0, fmt::format("const {0} line = ({0})blockIdx.x * {1} + lineInBlock;", itype, L));
  emit(0, fmt::format("const bool live = line < {};", l.lineCount));
  // A thread past the last line reads the last (its loads stay inside the
  // arrays) and stores nothing; it still takes part in the barriers.
  emit(0, fmt::format("const {} lineAt = live ? line : {};", itype, l.lineCount - 1));
  Env env;
  bindDigits(l.lines, "lineAt", 0, env);
  std::vector<std::string> totals(P);
  for (size_t p = 0; p < P; ++p) {
    totals[p] = P == 1 ? "totals" : fmt::format("totals{}", p);
    if (S > 1) emit(0, fmt::format("__shared__ float {}[{}];", totals[p], l.threads()));
  }
  // Declares an element's parts as fresh registers holding `value`
  // (assignable where `assigned`).
  auto held = [&](int scope, const std::string& base, const Element& value, bool assigned = false) {
    Element e(P);
    for (size_t p = 0; p < P; ++p) {
      e[p] = fresh(base);
      emit(scope, fmt::format("{}float {} = {};", assigned ? "" : "const ", e[p], value[p]));
    }
    return e;
  };
  const Element carry = held(0, "carry", identity, true);
  // The K positions from `first` in scan order, clamped into the axis (past
  // the end they are read at the last and count as the identity): the scan
  // order's index and the position along the axis.
  auto positionsFrom = [&](int scope, const std::string& first) {
    std::vector<std::string> step, at;
    for (int k = 0; k < K; ++k) {
      step.push_back(define(scope, "int", "at", fmt::format("min({} + {}, {})", first, k, T - 1)));
      at.push_back(reverse ? define(scope, "int", "at", fmt::format("{} - {}", T - 1, step.back())) : step.back());
    }
    return std::pair{step, at};
  };
  auto readAt = [&](int scope, NodeId id, const std::string& position) {
    Env e = env;
    e[scan.axes[0]] = {position, scope};
    return value(id, e);
  };
  // The elements at those positions, into the registers `into`. A lagged
  // recurrence's coefficient is read at the position stepped from; the
  // first step's coefficient multiplies nothing (h starts at 0) and is 0.
  auto readInto = [&](int scope, const std::pair<std::vector<std::string>, std::vector<std::string>>& positions,
                      const std::vector<Element>& into, bool declare) {
    const auto& [step, at] = positions;
    for (size_t k = 0; k < static_cast<size_t>(K); ++k) {
      const std::string decl = declare ? "float " : "";
      if (monoid.linear) {
        std::string from = at[k];
        if (scan.lagged) from = define(scope, "int", "from", reverse ? fmt::format("min({} + 1, {})", at[k], T - 1)
                                                                      : fmt::format("max({} - 1, 0)", at[k]));
        emit(scope, fmt::format("{}{} = {} == 0 ? 0.0f : (float)({});", decl, into[k][0], step[k],
                                readAt(scope, scan.operands[1], from)));
        emit(scope, fmt::format("{}{} = (float)({});", decl, into[k][1], readAt(scope, scan.operands[0], at[k])));
      } else if (!monoid.userOp.empty()) {
        emit(scope, fmt::format("{}{} = 1.0f;", decl, into[k][0]));
        emit(scope, fmt::format("{}{} = (float)({});", decl, into[k][1], readAt(scope, scan.operands[0], at[k])));
      } else {
        emit(scope, fmt::format("{}{} = (float)({});", decl, into[k][0], readAt(scope, scan.operands[0], at[k])));
      }
    }
  };
  // Each round's loads are issued one round ahead (into `next`), before the
  // barriers of the round before: their latency overlaps its scan.
  std::vector<Element> next(static_cast<size_t>(K), Element(P)), v(static_cast<size_t>(K));
  for (auto& e : next)
    for (auto& part : e) part = fresh("next");
  readInto(0, positionsFrom(0, fmt::format("slice * {}", K)), next, true);
  const int round = open(0, fmt::format("for (int round = 0; round < {}; ++round)", l.rounds));
  emit(round, fmt::format("const int first = round * {} + slice * {};", int64_t{S} * K, K));
  std::vector<std::string> inside(static_cast<size_t>(K));
  const auto positions = positionsFrom(round, "first");
  const std::vector<std::string>& at = positions.second;
  for (size_t k = 0; k < static_cast<size_t>(K); ++k) {
    inside[k] = define(round, "bool", "inside", fmt::format("first + {} < {}", k, T));
    Element taken(P);
    for (size_t p = 0; p < P; ++p)
      taken[p] = fmt::format("live && {} ? {} : {}", inside[k], next[k][p], identity[p]);
    v[k] = held(round, "v", taken);
  }
  if (l.rounds > 1) {
    const int ahead = open(round, fmt::format("if (round + 1 < {})", l.rounds));
    readInto(ahead, positionsFrom(ahead, fmt::format("first + {}", int64_t{S} * K)), next, false);
    close(ahead);
  }
  // The thread's running aggregate over its K positions, in registers.
  for (size_t k = 1; k < static_cast<size_t>(K); ++k) v[k] = held(round, "v", monoid.combine(v[k - 1], v[k]));
  const Element& own = v.back();
  const Element before = held(round, "before", identity, true), total = held(round, "total", own, true);
  if (S > 1) {
    // The slices' totals scanned across the line (Hillis-Steele, in place:
    // each step reads, waits, then writes).
    for (size_t p = 0; p < P; ++p) emit(round, fmt::format("{}[threadIdx.x] = {};", totals[p], own[p]));
    emit(round, "__syncthreads();");
    const int step = open(round, fmt::format("for (int d = 1; d < {}; d *= 2)", S));
    Element other(P), mine(P);
    for (size_t p = 0; p < P; ++p) {
      other[p] = define(step, "float", "other",
                        fmt::format("slice >= d ? {}[threadIdx.x - d * {}] : {}", totals[p], sliceStride, identity[p]));
      mine[p] = define(step, "float", "mine", fmt::format("{}[threadIdx.x]", totals[p]));
    }
    emit(step, "__syncthreads();");
    const Element joined = monoid.combine(other, mine);
    for (size_t p = 0; p < P; ++p) emit(step, fmt::format("{}[threadIdx.x] = {};", totals[p], joined[p]));
    emit(step, "__syncthreads();");
    close(step);
    const int after = open(round, "if (slice > 0)");
    for (size_t p = 0; p < P; ++p)
      emit(after, fmt::format("{} = {}[threadIdx.x - {}];", before[p], totals[p], sliceStride));
    close(after);
    for (size_t p = 0; p < P; ++p)
      emit(round, fmt::format("{} = {}[threadIdx.x + ({} - slice) * {}];", total[p], totals[p], S - 1, sliceStride));
    emit(round, "__syncthreads();");  // every total read before the next round writes them
  }
  const StoredArray& arr = stored_.at(scan.id);
  // Everything before the thread's run, combined once (associativity): a
  // position then takes one combination more, of it and the run up to it.
  const Element prefix = held(round, "prefix", monoid.combine(carry, before));
  for (size_t k = 0; k < static_cast<size_t>(K); ++k) {
    const Element taken = exclusive ? (k == 0 ? prefix : monoid.combine(prefix, v[k - 1])) : monoid.combine(prefix, v[k]);
    const int guarded = open(round, fmt::format("if (live && {})", inside[k]));
    Env e = env;
    e[scan.newAxes[0]] = {at[k], round};
    emit(guarded, fmt::format("{}[{}] = {};", arr.param, offset(scan.id, e),
                              storeConversion(arr, monoid.result(taken))));
    close(guarded);
  }
  // The carry takes the round's total (through temporaries: its parts read each other).
  const Element carried = held(round, "carried", monoid.combine(carry, total));
  for (size_t p = 0; p < P; ++p) emit(round, fmt::format("{} = {};", carry[p], carried[p]));
  close(round);
  out.streamNote = fmt::format("a pass along {} in {} rounds of {} slices x {} positions a line, the line's {} "
                               "carried",
                               l.along, l.rounds, S, K,
                               monoid.linear ? "recurrence" : scan.combine ? scan.combine->name + " fold" : "aggregate");
}

}  // namespace llmc::cuda_writer
