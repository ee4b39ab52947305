#include "frontend/builtins.h"

#include "frontend/program.h"

namespace llmc {

namespace {
using K = BuiltinKind;
const BuiltinInfo kBuiltins[] = {
    {"exp", K::Unary, 1, 1, "exp(x)", UnaryOp::Exp},
    {"log", K::Unary, 1, 1, "log(x)", UnaryOp::Log},
    {"tanh", K::Unary, 1, 1, "tanh(x)", UnaryOp::Tanh},
    {"sqrt", K::Unary, 1, 1, "sqrt(x)", UnaryOp::Sqrt},
    {"rsqrt", K::Unary, 1, 1, "rsqrt(x)", UnaryOp::Rsqrt},
    {"abs", K::Unary, 1, 1, "abs(x)", UnaryOp::Abs},
    {"maximum", K::Binary, 2, 2, "maximum(x, y)", UnaryOp::Neg, BinaryOp::Maximum},
    {"minimum", K::Binary, 2, 2, "minimum(x, y)", UnaryOp::Neg, BinaryOp::Minimum},
    {"where", K::Where, 3, 3, "where(condition, x, y)"},
    {"bool", K::Cast, 1, 1, "bool(x)"},
    {"i32", K::Cast, 1, 1, "i32(x)"},
    {"u16", K::Cast, 1, 1, "u16(x)"},
    {"f16", K::Cast, 1, 1, "f16(x)"},
    {"bf16", K::Cast, 1, 1, "bf16(x)"},
    {"f32", K::Cast, 1, 1, "f32(x)"},
    {"f64", K::Cast, 1, 1, "f64(x)"},
    {"sum", K::Reduce, 2, -1, "sum(x, axis...)", UnaryOp::Neg, BinaryOp::Add, ReduceOp::Sum},
    {"max", K::Reduce, 2, -1, "max(x, axis...)", UnaryOp::Neg, BinaryOp::Add, ReduceOp::Max},
    {"contract", K::Contract, 3, -1, "contract(x, y, axis...)"},
    {"gather", K::Gather, 3, 3, "gather(table, index, axis)"},
    {"pos", K::Pos, 1, 1, "pos(axis)"},
    {"size", K::Size, 1, 1, "size(axis)"},
    {"split", K::Split, 2, 2, "split(x, a -> p q)"},
    {"merge", K::Merge, 2, 2, "merge(x, p q -> a)"},
    {"rename", K::Rename, 2, 2, "rename(x, a -> b)"},
    {"slice", K::Slice, 4, 4, "slice(x, a -> b, lo, hi)"},
    {"concat", K::Concat, 3, -1, "concat(x, y, ..., a -> e)"},
    {"stack", K::Stack, 2, -1, "stack(x, y, ..., a)"},
    {"pad", K::Pad, 4, 5, "pad(x, a -> e, before, after[, value])"},
    {"broadcast", K::Broadcast, 2, -1, "broadcast(x, axis...)"},
    {"scatter_add", K::ScatterAdd, 3, -1, "scatter_add(values, index, axis, summed axis...)"},
    {"stop_gradient", K::StopGradient, 1, 1, "stop_gradient(x)"},
    {"argmax", K::Argmax, 2, 2, "argmax(x, a)"},
    {"argmin", K::Argmax, 2, 2, "argmin(x, a)"},
    {"topk", K::Topk, 3, 3, "topk(x, a -> k, K)"},
    {"scan", K::Scan, 3, 6, "scan(sum|max|prod, x, a[, exclusive]), scan(linear, c, x, a[, exclusive]) or scan(f, x, a[, exclusive, v])"},
};
}  // namespace

const BuiltinInfo* findBuiltin(const std::string& name) {
  for (const auto& b : kBuiltins)
    if (name == b.name) return &b;
  return nullptr;
}

std::vector<std::string> builtinNames() {
  std::vector<std::string> names;
  for (const auto& b : kBuiltins) names.push_back(b.name);
  return names;
}

bool isBuiltinBox(const std::string& name) { return findBuiltin(name) != nullptr; }

}  // namespace llmc
