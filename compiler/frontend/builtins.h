// The built-in primitive boxes as they are spelled in diagrams.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

enum class BuiltinKind {
  Unary,     // exp(x), log(x), ...
  Binary,    // maximum(x, y), minimum(x, y)
  Where,     // where(cond, x, y)
  Cast,      // f32(x), bf16(x), ...
  Reduce,    // sum(x, a...), max(x, a...)
  Contract,  // contract(x, y, a...)
  Gather,    // gather(table, index, a)
  Pos,       // pos(a)
  Size,      // size(a): a number
  Split,     // split(x, a -> p q)
  Merge,     // merge(x, p q -> a)
  Rename,    // rename(x, a -> b)
  Slice,     // slice(x, a -> b, lo, hi)
  Concat,    // concat(x, y, ..., a -> e)
  Stack,     // stack(x, y, ..., a)
  Pad,       // pad(x, a -> e, before, after[, value])
  Broadcast, // broadcast(x, a...)
  ScatterAdd,// scatter_add(values, index, a, summed...)
  StopGradient, // stop_gradient(x)
  Argmax,    // argmax(x, a), argmin(x, a)
  Topk,      // topk(x, a -> k, K)
  Scan,      // scan(op, x, a[, exclusive]), scan(linear, c, x, a[, exclusive])
};

struct BuiltinInfo {
  const char* name;
  BuiltinKind kind;
  int minArgs, maxArgs;  // maxArgs < 0: no limit
  const char* usage;
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  ReduceOp reduce = ReduceOp::Sum;
};

const BuiltinInfo* findBuiltin(const std::string& name);
std::vector<std::string> builtinNames();

}  // namespace llmc
