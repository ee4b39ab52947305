// The syntax tree of a diagram file, as written; the elaborator turns it into IR.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/source.h"

namespace llmc {

// A size: an integer, a size symbol (T, C, ...) or arithmetic on them.
struct SizeExpr {
  enum class Kind { Int, Symbol, Binary } kind = Kind::Int;
  int64_t value = 0;
  std::string symbol;
  char op = '+';  // Binary: + - * /
  std::shared_ptr<SizeExpr> lhs, rhs;
  SourceLoc loc;
};

// One axis in a type: `t`, or `t:T` with its size.
struct AxisSpec {
  std::string name;
  std::optional<SizeExpr> size;
  SourceLoc loc;
};

// `f32[.. t c:C]`. `..` stands for any further axes, which are woven over.
struct TypeSpec {
  std::string dtype;
  std::vector<AxisSpec> axes;
  int ellipsisAt = -1;  // index into axes where `..` stands, or -1
  SourceLoc loc;
};

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

struct Expr {
  enum class Kind {
    Name,     // a value, a size symbol, or (as a call argument) an axis
    Number,   // 0.5, 3, 1e-5
    Unary,    // -x
    Binary,   // x + y, x < y, ...
    Call,     // f(args)
    Index,    // x[l=i]
    AxisMap,  // a b -> c d   (inside calls: split, merge, rename, ...)
    Binding,  // x=v          (inside calls of composites: formal axis = actual axis)
  } kind = Kind::Name;
  SourceLoc loc;
  std::string name;            // Name, Call (callee), Index (axis), Binding (formal)
  std::string op;              // Unary/Binary operator text
  double number = 0;
  bool isInteger = false;      // Number written without '.' or exponent
  std::vector<ExprPtr> args;   // Unary/Binary operands, Call arguments, Index base+position
  std::vector<AxisSpec> from, to;  // AxisMap sides; Binding: to[0] is the actual axis
};

struct Statement {
  enum class Kind { Assign, For, Require } kind = Kind::Assign;
  SourceLoc loc;
  // Assign: targets = value (several targets for a diagram with several outputs)
  struct Target {
    std::string name;
    std::optional<TypeSpec> annotation;
    SourceLoc loc;
  };
  std::vector<Target> targets;
  ExprPtr value;  // Assign: the value; Require: the condition on sizes (`require V <= Vp`)
  // For: `for i in l ... end` runs the body once per position of axis l.
  std::string loopVar;
  AxisSpec loopAxis;
  std::vector<Statement> body;
};

struct Port {
  std::string name;
  TypeSpec type;
  bool isParam = false;
  SourceLoc loc;
};

struct DiagramDecl {
  std::string name;
  std::vector<Port> inputs;
  std::vector<Port> outputs;
  std::vector<Statement> body;
  SourceLoc loc;
  SourceLoc endLoc;
};

struct ImportDecl {
  std::string path;  // as written
  SourceLoc loc;
};

struct Module {
  std::shared_ptr<const SourceFile> file;
  std::vector<ImportDecl> imports;
  std::vector<DiagramDecl> diagrams;
};

}  // namespace llmc
