#include "interpreter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <type_traits>

#include "batched_matmul.h"
#include "ir/scalar_function.h"
#include "low_precision.h"
#include "interpreter_arrays.h"
#include "interpreter_axis_boxes.h"
#include "strided_loop.h"

namespace llmc {

namespace {

using namespace interpreter_detail;

// ---------------------------------------------------------------------------
// Elementwise boxes (mapElementwise broadcasts their operands by axis name)

template <class T>
std::vector<T> unary(const Node& node, const Arg<T>& x) {
  auto map = [&](auto f) { return mapElementwise<T, 1>(node, {x}, f); };
  switch (node.unary) {
    case UnaryOp::Neg:
      return map([](T v) { return -v; });
    case UnaryOp::Exp:
      return map([](T v) { return std::exp(v); });
    case UnaryOp::Log:
      return map([](T v) { return std::log(v); });
    case UnaryOp::Tanh:
      return map([](T v) { return std::tanh(v); });
    case UnaryOp::Sqrt:
      return map([](T v) { return std::sqrt(v); });
    case UnaryOp::Rsqrt:
      return map([](T v) { return T(1) / std::sqrt(v); });
    case UnaryOp::Abs:
      return map([](T v) { return std::abs(v); });
    case UnaryOp::Not:
      return map([](T v) { return T(v == T(0) ? 1 : 0); });
  }
  fail(node, "unknown unary operation");
}

template <class T>
std::vector<T> binary(const Node& node, const Arg<T>& x, const Arg<T>& y) {
  auto map = [&](auto f) { return mapElementwise<T, 2>(node, {x, y}, f); };
  switch (node.binary) {
    case BinaryOp::Add:
      return map([](T a, T b) { return a + b; });
    case BinaryOp::Sub:
      return map([](T a, T b) { return a - b; });
    case BinaryOp::Mul:
      return map([](T a, T b) { return a * b; });
    case BinaryOp::And:
      return map([](T a, T b) { return T(a != T(0) && b != T(0) ? 1 : 0); });
    case BinaryOp::Or:
      return map([](T a, T b) { return T(a != T(0) || b != T(0) ? 1 : 0); });
    case BinaryOp::Div:
      if (isInteger(node.type.dtype)) {
        // Integer division truncates toward zero; done in int64 because a
        // float quotient may round across an integer.
        return map([&node](T a, T b) {
          if (b == 0) fail(node, fmt::format("integer division of {} by zero", a));
          return static_cast<T>(static_cast<int64_t>(a) / static_cast<int64_t>(b));
        });
      }
      return map([](T a, T b) { return a / b; });
    case BinaryOp::Maximum:
      return map([](T a, T b) { return std::max(a, b); });
    case BinaryOp::Minimum:
      return map([](T a, T b) { return std::min(a, b); });
  }
  fail(node, "unknown binary operation");
}

template <class T>
std::vector<T> compare(const Node& node, const Arg<T>& x, const Arg<T>& y, bool atBf16) {
  auto map = [&](auto f) {
    if (!atBf16) return mapElementwise<T, 2>(node, {x, y}, f);
    return mapElementwise<T, 2>(node, {x, y}, [&](T a, T b) {
      return f(static_cast<T>(roundToDType(static_cast<double>(a), DType::BF16)),
               static_cast<T>(roundToDType(static_cast<double>(b), DType::BF16)));
    });
  };
  switch (node.compare) {
    case CompareOp::Lt:
      return map([](T a, T b) { return T(a < b); });
    case CompareOp::Le:
      return map([](T a, T b) { return T(a <= b); });
    case CompareOp::Gt:
      return map([](T a, T b) { return T(a > b); });
    case CompareOp::Ge:
      return map([](T a, T b) { return T(a >= b); });
    case CompareOp::Eq:
      return map([](T a, T b) { return T(a == b); });
    case CompareOp::Ne:
      return map([](T a, T b) { return T(a != b); });
  }
  fail(node, "unknown comparison");
}

template <class T>
std::vector<T> selectWhere(const Node& node, const Arg<T>& cond, const Arg<T>& x, const Arg<T>& y) {
  return mapElementwise<T, 3>(node, {cond, x, y}, [](T c, T a, T b) { return c != 0 ? a : b; });
}

// Rounding to bf16/f16 is not done here: every low-precision node is rounded
// after it is computed.
template <class T>
std::vector<T> cast(const Node& node, const Arg<T>& x) {
  auto map = [&](auto f) { return mapElementwise<T, 1>(node, {x}, f); };
  const DType to = node.type.dtype;
  if (to == DType::Bool) return map([](T v) { return T(v != 0); });
  if (isInteger(to)) return map([](T v) { return std::trunc(v); });
  return map([](T v) { return v; });
}

// ---------------------------------------------------------------------------
// Reductions, contraction, gather and its adjoint

template <class T>
std::vector<T> reduce(const Node& node, const Arg<T>& x) {
  for (const std::string& axis : node.axes) axisOf(node, *x.type, axis);
  const bool isSum = node.reduce == ReduceOp::Sum;
  // Sums accumulate in double whatever T: an fp32 running sum over 1e5 values
  // drifts by about 1e-5 relative, more than the oracle may.
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  const Acc init = isSum ? Acc(0) : -std::numeric_limits<Acc>::infinity();
  std::vector<Acc> acc(static_cast<size_t>(node.type.elementCount()), init);
  Acc* out = acc.data();
  // Walk the input; the output's stride is 0 along the reduced axes, so each
  // input element lands on the output element it reduces into.
  auto accumulate = [&](auto combine) {
    forEachRow<2>(shapeOf(*x.type),
                  {stridesOver(node, node.type, *x.type), rowMajorStrides(*x.type)},
                  [&](const Offsets<2>& at, int64_t n, const Offsets<2>& step) {
                    Acc* o = out + at[0];
                    const T* in = x.data + at[1];
                    if (step[0] == 0) {  // the row is reduced: keep the accumulator in a register
                      Acc a = *o;
                      for (int64_t i = 0; i < n; ++i) a = combine(a, static_cast<Acc>(in[i * step[1]]));
                      *o = a;
                    } else {
                      for (int64_t i = 0; i < n; ++i)
                        o[i * step[0]] = combine(o[i * step[0]], static_cast<Acc>(in[i * step[1]]));
                    }
                  });
  };
  if (isSum)
    accumulate([](Acc a, Acc v) { return a + v; });
  else
    accumulate([](Acc a, Acc v) { return v > a ? v : a; });
  return std::vector<T>(acc.begin(), acc.end());
}

// The running sum or maximum of x along node.axes[0], which the result calls
// node.newAxes[0]: each line of the result along that axis walked in order
// (from the end where node.hi is set), each position taking the aggregate
// with its own element (inclusive) or before it (exclusive, node.lo).
template <class T>
std::vector<T> scanAlong(const Node& node, const Arg<T>& x, const Arg<T>* coefficient) {
  const std::string& along = node.axes.at(0);
  const std::string& to = node.newAxes.at(0);
  const Type& out = node.type;
  Type renamed = *x.type;
  for (Axis& a : renamed.axes)
    if (a.name == along) a.name = to;
  const std::vector<int64_t> read = stridesOver(node, renamed, out);
  std::vector<int64_t> readCoefficient;
  if (coefficient) {
    if (!(*coefficient->type == *x.type)) fail(node, fmt::format("coefficient {} for values {}", coefficient->type->str(), x.type->str()));
    readCoefficient = read;
  }
  const std::vector<int64_t> write = rowMajorStrides(out);
  size_t at = 0;
  while (at < out.axes.size() && out.axes[at].name != to) ++at;
  if (at == out.axes.size()) fail(node, fmt::format("{} has no axis '{}'", out.str(), to));
  const int64_t n = out.axes[at].size;
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;  // as reduce sums
  const bool isSum = node.reduce == ReduceOp::Sum;
  const Acc identity = isSum ? Acc(0) : -std::numeric_limits<Acc>::infinity();
  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  std::vector<int64_t> index(out.axes.size(), 0);  // the line's position along the other axes
  for (int64_t line = 0, lines = n == 0 ? 0 : out.elementCount() / n; line < lines; ++line) {
    int64_t from = 0, into = 0;
    for (size_t i = 0; i < index.size(); ++i) from += index[i] * read[i], into += index[i] * write[i];
    // A user's operator has no identity: an exclusive scan starts from the
    // value it gives for the first position, and the fold from the first element.
    Acc acc = node.combine ? static_cast<Acc>(node.value) : identity;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t p = node.hi ? n - 1 - k : k;
      const Acc v = static_cast<Acc>(x.data[from + p * read[at]]);
      if (node.lo) result[static_cast<size_t>(into + p * write[at])] = static_cast<T>(acc);
      if (coefficient) {
        // h = a * h + x, a read at the position stepped from where lagged;
        // the first step's a multiplies nothing (h starts at 0).
        const int64_t stepped = !node.lagged ? p : node.hi ? p + 1 : p - 1;
        acc = k == 0 ? v : static_cast<Acc>(coefficient->data[from + stepped * read[at]]) * acc + v;
      } else if (node.combine) {  // a user's monoid: a fold from the first element
        acc = k == 0 ? v : static_cast<Acc>(evaluateScalarFunction(*node.combine, acc, v));
      } else {
        acc = isSum ? acc + v : (v > acc ? v : acc);
      }
      if (!node.lo) result[static_cast<size_t>(into + p * write[at])] = static_cast<T>(acc);
    }
    for (size_t i = index.size(); i-- > 0;) {  // the next line: odometer over the axes but `at`
      if (i == at) continue;
      if (++index[i] < out.axes[i].size) break;
      index[i] = 0;
    }
  }
  return result;
}

// Lays src out as the axes `order` (a permutation of its axes) and returns a
// pointer to it: src itself when it already is, else `buffer`.
template <class T>
const T* packed(const Node& node, const Arg<T>& src, const std::vector<Axis>& order,
                std::vector<T>& buffer) {
  if (src.type->axes == order) return src.data;
  const Type packedType{src.type->dtype, order};
  buffer.resize(static_cast<size_t>(packedType.elementCount()));
  copyByName(node, src, packedType, buffer.data());
  return buffer.data();
}


// out = sum over the contracted axes of A * B, as a batched matrix product
// C[batch, m, n] = A[batch, m, k] . B[batch, k, n]: batch axes are the output
// axes in both operands, m those only in A, n those only in B.
template <class T>
std::vector<T> contract(const Node& node, const Arg<T>& a, const Arg<T>& b) {
  const Type& out = node.type;
  std::vector<Axis> batchAxes, mAxes, nAxes, kAxes;
  for (const Axis& axis : out.axes) {
    const bool inA = a.type->has(axis.name), inB = b.type->has(axis.name);
    if (inA && inB)
      batchAxes.push_back(axis);
    else if (inA)
      mAxes.push_back(axis);
    else if (inB)
      nAxes.push_back(axis);
    else
      fail(node, fmt::format("output axis '{}' is in neither operand", axis.name));
  }
  for (const Axis& axis : a.type->axes) {
    if (std::find(node.axes.begin(), node.axes.end(), axis.name) == node.axes.end()) continue;
    if (axisOf(node, *b.type, axis.name).size != axis.size)
      fail(node, fmt::format("contracted axis '{}' differs: {} against {}", axis.name,
                             a.type->str(), b.type->str()));
    kAxes.push_back(axis);
  }
  if (kAxes.size() != node.axes.size())
    fail(node, fmt::format("{} lacks a contracted axis", a.type->str()));

  auto concat = [](std::initializer_list<const std::vector<Axis>*> parts) {
    std::vector<Axis> all;
    for (const auto* part : parts) all.insert(all.end(), part->begin(), part->end());
    return all;
  };
  std::vector<T> aBuffer, bBuffer;
  const T* aPacked = packed(node, a, concat({&batchAxes, &mAxes, &kAxes}), aBuffer);
  const T* bPacked = packed(node, b, concat({&batchAxes, &kAxes, &nAxes}), bBuffer);

  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  const Type cType{out.dtype, concat({&batchAxes, &mAxes, &nAxes})};
  const bool outIsC = cType.axes == out.axes;
  std::vector<T> cBuffer(outIsC ? 0 : result.size());
  T* c = outIsC ? result.data() : cBuffer.data();
  batchedMatmul(aPacked, bPacked, c, product(batchAxes), product(mAxes), product(kAxes),
                product(nAxes));
  if (!outIsC) copyByName(node, Arg<T>{&cType, c}, out, result.data());
  return result;
}

// out = table[a = index] woven over the index's axes; table axes other than a
// that the index also has are matched (batched gather), the rest carried along.
template <class T>
std::vector<T> gather(const Node& node, const Arg<T>& table, const Arg<T>& index) {
  const std::string& indexed = node.axes.at(0);
  const int64_t rows = axisOf(node, *table.type, indexed).size;
  const int64_t rowStride = strideOf(*table.type, rowMajorStrides(*table.type), indexed);
  const Type& out = node.type;
  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  T* base = result.data();
  forEachRow<3>(shapeOf(out),
                {rowMajorStrides(out), stridesOver(node, *table.type, out, {indexed}),
                 stridesOver(node, *index.type, out)},
                [&](const Offsets<3>& at, int64_t n, const Offsets<3>& step) {
                  T* o = base + at[0];
                  const T* t = table.data + at[1];
                  const T* idx = index.data + at[2];
                  for (int64_t i = 0; i < n; ++i) {
                    const T position = idx[i * step[2]];
                    if (!(position >= 0 && position < T(rows)))
                      fail(node, fmt::format("index {} is out of range for axis {}:{}", position,
                                             indexed, rows));
                    o[i] = t[i * step[1] + static_cast<int64_t>(position) * rowStride];
                  }
                });
  return result;
}

// Gather's adjoint: out[a = index[p], rest] += values[p] for every position p
// of the values; the values' axes in `node.axes` (index axes) are summed over.
template <class T>
std::vector<T> scatterAdd(const Node& node, const Arg<T>& values, const Arg<T>& index) {
  const std::string& scattered = node.newAxes.at(0);
  const Type& out = node.type;
  const int64_t rows = axisOf(node, out, scattered).size;
  const int64_t rowStride = strideOf(out, rowMajorStrides(out), scattered);
  for (const std::string& summed : node.axes)
    if (out.has(summed))
      fail(node, fmt::format("sums over axis '{}' that the output keeps", summed));
  std::vector<T> result(static_cast<size_t>(out.elementCount()), T(0));
  T* base = result.data();
  // Walk the values; the output's stride is 0 along the summed axes.
  forEachRow<3>(shapeOf(*values.type),
                {stridesOver(node, out, *values.type, {scattered}), rowMajorStrides(*values.type),
                 stridesOver(node, *index.type, *values.type)},
                [&](const Offsets<3>& at, int64_t n, const Offsets<3>& step) {
                  T* o = base + at[0];
                  const T* v = values.data + at[1];
                  const T* idx = index.data + at[2];
                  for (int64_t i = 0; i < n; ++i) {
                    const T position = idx[i * step[2]];
                    if (!(position >= 0 && position < T(rows)))
                      fail(node, fmt::format("index {} is out of range for axis {}:{}", position,
                                             scattered, rows));
                    o[i * step[0] + static_cast<int64_t>(position) * rowStride] += v[i * step[1]];
                  }
                });
  return result;
}

// ---------------------------------------------------------------------------
// The graph walk

template <class T>
class Evaluator {
 public:
  Evaluator(const Graph& graph, const InterpreterOptions& options)
      : graph_(graph), options_(options), values_(graph.nodes.size()) {}

  std::vector<HostTensor> run(const std::map<std::string, HostTensor>& inputs) {
    const std::vector<size_t> lastUse = lastUses();
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const Node& node = graph_.nodes[i];
      values_[i] = evaluate(node, inputs);
      if (options_.roundLowPrecision && isLowPrecision(node.type.dtype))
        for (T& v : values_[i])
          v = static_cast<T>(roundToDType(static_cast<double>(v), node.type.dtype));
      if (isFloat(node.type.dtype) && options_.storedAsBf16.count(node.id))
        for (T& v : values_[i]) v = static_cast<T>(roundToDType(static_cast<double>(v), DType::BF16));
      if (options_.perturb > 0 && isFloat(node.type.dtype) && !copiesOperandValues(node)) perturb(node, values_[i]);
      // Free what no later node reads, to bound memory on large graphs.
      if (lastUse[i] == kUnused) std::vector<T>().swap(values_[i]);
      for (NodeId operand : node.operands)
        if (lastUse[static_cast<size_t>(operand)] == i)
          std::vector<T>().swap(values_[static_cast<size_t>(operand)]);
    }
    std::vector<HostTensor> outputs;
    for (const GraphOutput& output : graph_.outputs) outputs.push_back(value(output.node));
    return outputs;
  }

  HostTensor value(NodeId id) const {
    const std::vector<T>& values = values_.at(static_cast<size_t>(id));
    return {graph_.node(id).type, std::vector<double>(values.begin(), values.end())};
  }

 private:
  // No node reads it and it is not an output (node 0 cannot read anything).
  static constexpr size_t kUnused = 0;

  // The index of the last node reading each node; outputs are read at the end.
  std::vector<size_t> lastUses() const {
    std::vector<size_t> last(graph_.nodes.size(), kUnused);
    for (size_t i = 0; i < graph_.nodes.size(); ++i)
      for (NodeId operand : graph_.nodes[i].operands) {
        if (operand < 0 || static_cast<size_t>(operand) >= i)
          fail(graph_.nodes[i], fmt::format("operand {} is not an earlier node", operand));
        last[static_cast<size_t>(operand)] = i;
      }
    for (const GraphOutput& output : graph_.outputs)
      last.at(static_cast<size_t>(output.node)) = graph_.nodes.size();
    for (NodeId kept : options_.keep) last.at(static_cast<size_t>(kept)) = graph_.nodes.size();
    return last;
  }

  // Whether each value of the node is exactly a value of an operand (a
  // maximum, a view, a selection): it has no rounding of its own, and moving
  // it apart from its source would break what compares them (a maximum's
  // gradient routed to the elements equal to it).
  static bool copiesOperandValues(const Node& node) {
    switch (node.op) {
      case Op::Unary: return node.unary == UnaryOp::Neg || node.unary == UnaryOp::Abs;
      case Op::Binary: return node.binary == BinaryOp::Maximum || node.binary == BinaryOp::Minimum;
      case Op::Reduce: return node.reduce == ReduceOp::Max;
      case Op::Select: case Op::Gather: case Op::Split: case Op::Merge: case Op::Slice: case Op::Concat:
      case Op::Rename: case Op::Index: case Op::Transpose: case Op::Broadcast: case Op::StopGradient:
        return true;
      default: return false;
    }
  }

  // InterpreterOptions::perturb.
  void perturb(const Node& node, std::vector<T>& values) const {
    const bool low = isLowPrecision(node.type.dtype) || options_.storedAsBf16.count(node.id);
    const double relative = low ? std::max(options_.perturb, std::ldexp(1.0, -8)) : options_.perturb;
    std::vector<T> magnitudes;
    const bool sum = (node.op == Op::Reduce && node.reduce == ReduceOp::Sum) || node.op == Op::Contract;
    if (sum) {
      std::vector<std::vector<T>> absolute(node.operands.size());
      std::vector<Arg<T>> args;
      for (size_t k = 0; k < node.operands.size(); ++k) {
        const Arg<T> a = arg(node, k);
        absolute[k].assign(a.data, a.data + a.type->elementCount());
        for (T& x : absolute[k]) x = std::abs(x);
        args.push_back({a.type, absolute[k].data()});
      }
      magnitudes = node.op == Op::Contract ? contract(node, args[0], args[1]) : reduce(node, args[0]);
    }
    std::mt19937_64 rng(options_.perturbSeed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(node.id + 1)));
    std::uniform_real_distribution<double> unit(-1, 1);
    for (size_t k = 0; k < values.size(); ++k) {
      const double v = static_cast<double>(values[k]);
      if (!std::isfinite(v)) continue;
      const double scale = sum ? static_cast<double>(magnitudes[k]) : std::abs(v);
      values[k] = static_cast<T>(v + relative * unit(rng) * scale);
    }
  }

  Arg<T> arg(const Node& node, size_t k) const {
    const NodeId id = node.operands.at(k);
    return {&graph_.node(id).type, values_[static_cast<size_t>(id)].data()};
  }

  void requireOperands(const Node& node, size_t count) const {
    if (node.operands.size() != count)
      fail(node, fmt::format("expects {} operands, has {}", count, node.operands.size()));
  }

  std::vector<T> input(const Node& node, const std::map<std::string, HostTensor>& inputs) const {
    auto it = inputs.find(node.name);
    if (it == inputs.end()) fail(node, fmt::format("no value was given for input '{}'", node.name));
    const HostTensor& given = it->second;
    if (!given.type.sameAxisSet(node.type))
      fail(node, fmt::format("input '{}' expects {} but was given {}", node.name, node.type.str(),
                             given.type.str()));
    if (given.data.size() != static_cast<size_t>(given.elementCount()))
      fail(node, fmt::format("input '{}' of type {} holds {} values", node.name, given.type.str(),
                             given.data.size()));
    if (given.type == node.type) return std::vector<T>(given.data.begin(), given.data.end());
    const HostTensor laidOut = permuteTo(given, node.type);
    return std::vector<T>(laidOut.data.begin(), laidOut.data.end());
  }

  std::vector<T> evaluate(const Node& node, const std::map<std::string, HostTensor>& inputs) const {
    switch (node.op) {
      case Op::Input:
        return input(node, inputs);
      case Op::Constant:
        if (!node.type.axes.empty()) fail(node, "a constant must be a scalar");
        return {static_cast<T>(node.value)};
      case Op::Pos: {
        if (node.type.axes.size() != 1)
          fail(node, fmt::format("positions of type {}", node.type.str()));
        std::vector<T> positions(
            static_cast<size_t>(axisOf(node, node.type, node.axes.at(0)).size));
        for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<T>(i);
        return positions;
      }
      case Op::Unary:
        requireOperands(node, 1);
        return unary(node, arg(node, 0));
      case Op::Binary:
        requireOperands(node, 2);
        return binary(node, arg(node, 0), arg(node, 1));
      case Op::Compare:
        requireOperands(node, 2);
        return compare(node, arg(node, 0), arg(node, 1),
                       options_.compareAtBf16 && isFloat(graph_.node(node.operands[0]).type.dtype));
      case Op::Select:
        requireOperands(node, 3);
        return selectWhere(node, arg(node, 0), arg(node, 1), arg(node, 2));
      case Op::Cast:
        requireOperands(node, 1);
        return cast(node, arg(node, 0));
      case Op::Reduce:
        requireOperands(node, 1);
        return reduce(node, arg(node, 0));
      case Op::Contract:
        requireOperands(node, 2);
        return contract(node, arg(node, 0), arg(node, 1));
      case Op::Scan: {
        if (node.operands.size() == 2) {
          const Arg<T> coefficient = arg(node, 1);
          return scanAlong(node, arg(node, 0), &coefficient);
        }
        requireOperands(node, 1);
        return scanAlong<T>(node, arg(node, 0), nullptr);
      }
      case Op::Gather:
        requireOperands(node, 2);
        return gather(node, arg(node, 0), arg(node, 1));
      case Op::Split:
        requireOperands(node, 1);
        return split(node, arg(node, 0));
      case Op::Merge:
        requireOperands(node, 1);
        return merge(node, arg(node, 0));
      case Op::Slice:
        requireOperands(node, 1);
        return slice(node, arg(node, 0));
      case Op::Rename:
        requireOperands(node, 1);
        return renameAxis(node, arg(node, 0));
      case Op::Index:
        requireOperands(node, 1);
        return indexAt(node, arg(node, 0));
      case Op::Transpose:
        requireOperands(node, 1);
        return transpose(node, arg(node, 0));
      case Op::Broadcast:
        requireOperands(node, 1);
        return broadcast(node, arg(node, 0));
      case Op::ScatterAdd:
        requireOperands(node, 2);
        return scatterAdd(node, arg(node, 0), arg(node, 1));
      case Op::StopGradient: {  // only autodiff tells it from its operand
        requireOperands(node, 1);
        const Arg<T> x = arg(node, 0);
        if (*x.type != node.type) fail(node, fmt::format("stop_gradient of {} is typed {}", x.type->str(), node.type.str()));
        return std::vector<T>(x.data, x.data + node.type.elementCount());
      }
      case Op::Concat: {
        std::vector<Arg<T>> parts;
        for (size_t k = 0; k < node.operands.size(); ++k) parts.push_back(arg(node, k));
        return concatenate(node, parts);
      }
    }
    fail(node, "unknown operation");
  }

  const Graph& graph_;
  const InterpreterOptions& options_;
  std::vector<std::vector<T>> values_;  // per node; emptied after its last use
};

}  // namespace

std::vector<HostTensor> interpret(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                  const InterpreterOptions& options) {
  if (options.precision == Precision::F32) return Evaluator<float>(g, options).run(inputs);
  return Evaluator<double>(g, options).run(inputs);
}

template <class T>
std::map<NodeId, HostTensor> keptValues(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                        const InterpreterOptions& options) {
  Evaluator<T> evaluator(g, options);
  evaluator.run(inputs);
  std::map<NodeId, HostTensor> kept;
  for (NodeId id : options.keep) kept.emplace(id, evaluator.value(id));
  return kept;
}

std::map<NodeId, HostTensor> interpretNodes(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                            const InterpreterOptions& options) {
  if (options.precision == Precision::F32) return keptValues<float>(g, inputs, options);
  return keptValues<double>(g, inputs, options);
}

}  // namespace llmc
