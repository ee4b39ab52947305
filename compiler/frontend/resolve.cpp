// Name resolution over the syntax tree of every diagram, called or not.
#include <fmt/format.h>

#include <functional>
#include <set>

#include "frontend/builtins.h"
#include "frontend/program.h"

namespace llmc {

namespace {

// Names that are always numbers.
bool isBuiltinConstant(const std::string& name) { return name == "inf" || name == "pi"; }

void collectSymbols(const SizeExpr& e, std::set<std::string>& out) {
  if (e.kind == SizeExpr::Kind::Symbol) out.insert(e.symbol);
  if (e.lhs) collectSymbols(*e.lhs, out);
  if (e.rhs) collectSymbols(*e.rhs, out);
}

struct CallEdge {
  std::string callee;
  SourceLoc loc;
};

class Resolver {
 public:
  Resolver(const Program& program, const SizeBindings& sizes) : program_(program), sizes_(sizes) {}

  void run(const std::string& entry) {
    for (const auto& module : program_.modules)
      for (const auto& d : module->diagrams) checkDiagram(d);
    checkRecursion();
    // A name that is neither a value nor a known size may be a size the
    // command line binds for another entry: it is an error only in a diagram
    // the entry uses.
    std::set<std::string> reachable;
    std::vector<std::string> todo = {entry};
    while (!todo.empty()) {
      std::string name = todo.back();
      todo.pop_back();
      if (!reachable.insert(name).second) continue;
      for (const auto& edge : calls_[name]) todo.push_back(edge.callee);
    }
    for (const auto& module : program_.modules)
      for (const auto& d : module->diagrams)
        if (auto it = unknownNames_.find(d.name); it != unknownNames_.end() && reachable.count(d.name))
          throw it->second;
  }

 private:
  struct Scope {
    std::set<std::string> values, indices, symbols;
  };

  void checkDiagram(const DiagramDecl& d) {
    Scope scope;
    current_ = &d;
    for (const auto& port : d.inputs) {
      if (!scope.values.insert(port.name).second)
        throw CompileError(port.loc, fmt::format("duplicate input '{}'", port.name));
      for (const auto& a : port.type.axes)
        if (a.size) collectSymbols(*a.size, scope.symbols);
    }
    std::set<std::string> outputs;
    for (const auto& port : d.outputs) {
      if (scope.values.count(port.name))
        throw CompileError(port.loc, fmt::format("output '{}' has the same name as an input", port.name));
      if (!outputs.insert(port.name).second)
        throw CompileError(port.loc, fmt::format("duplicate output '{}'", port.name));
      for (const auto& a : port.type.axes)
        if (a.size) collectSymbols(*a.size, scope.symbols);
    }
    std::set<std::string> assigned;
    checkBody(d.body, scope, assigned);
    for (const auto& port : d.outputs)
      if (!assigned.count(port.name))
        throw CompileError(port.loc, fmt::format("output '{}' of diagram '{}' is never assigned",
                                                 port.name, d.name));
  }

  void checkBody(const std::vector<Statement>& body, Scope& scope, std::set<std::string>& assigned) {
    for (const auto& s : body) {
      if (s.kind == Statement::Kind::For) {
        Scope inner = scope;
        inner.indices.insert(s.loopVar);
        checkBody(s.body, inner, assigned);
        scope.values.insert(inner.values.begin(), inner.values.end());
        continue;
      }
      checkExpr(*s.value, scope);
      if (s.kind == Statement::Kind::Require) continue;
      for (const auto& t : s.targets) {
        if (scope.indices.count(t.name))
          throw CompileError(t.loc, fmt::format("cannot assign to loop variable '{}'", t.name));
        scope.values.insert(t.name);
        assigned.insert(t.name);
      }
    }
  }

  void checkName(const Expr& e, const Scope& scope) {
    if (scope.values.count(e.name) || scope.indices.count(e.name) || scope.symbols.count(e.name) ||
        sizes_.count(e.name) || isBuiltinConstant(e.name))
      return;
    std::vector<std::string> known(scope.values.begin(), scope.values.end());
    known.insert(known.end(), scope.indices.begin(), scope.indices.end());
    unknownNames_.emplace(current_->name,
                          CompileError(e.loc, fmt::format("unknown name '{}'{}", e.name, didYouMean(e.name, known))));
  }

  // Which arguments of a built-in are axes or other names that are no
  // values (not checked as values here).
  static bool isAxisArgument(BuiltinKind kind, size_t i) {
    switch (kind) {
      case BuiltinKind::Reduce: return i >= 1;
      case BuiltinKind::Contract: return i >= 2;
      case BuiltinKind::Gather: return i == 2;
      case BuiltinKind::Pos:
      case BuiltinKind::Size: return true;
      case BuiltinKind::Broadcast: return i >= 1;
      case BuiltinKind::ScatterAdd: return i >= 2;
      case BuiltinKind::Argmax: return i == 1;
      case BuiltinKind::Scan: return i != 1;  // scan(op, x, a[, exclusive]): op and the form are names too (but see linear)
      default: return false;
    }
  }

  void checkExpr(const Expr& e, const Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Name: checkName(e, scope); return;
      case Expr::Kind::Number: return;
      case Expr::Kind::Unary:
      case Expr::Kind::Binary:
        for (const auto& a : e.args) checkExpr(*a, scope);
        return;
      case Expr::Kind::Index:
        checkExpr(*e.args[0], scope);
        checkExpr(*e.args[1], scope);
        return;
      case Expr::Kind::AxisMap:
        throw CompileError(e.loc, "an axis map 'a -> b' is only allowed as an argument of split, merge, rename, slice, concat, pad or topk");
      case Expr::Kind::Binding:
        throw CompileError(e.loc, fmt::format("an axis binding '{}={}' is only allowed as an argument of a diagram call", e.name, e.to[0].name));
      case Expr::Kind::Call: checkCall(e, scope); return;
    }
  }

  void checkCall(const Expr& call, const Scope& scope) {
    if (const BuiltinInfo* b = findBuiltin(call.name)) {
      int n = static_cast<int>(call.args.size());
      if (n < b->minArgs || (b->maxArgs >= 0 && n > b->maxArgs)) {
        std::string count = b->minArgs == b->maxArgs ? fmt::format("{}", b->minArgs)
                            : b->maxArgs < 0        ? fmt::format("at least {}", b->minArgs)
                                                    : fmt::format("{} to {}", b->minArgs, b->maxArgs);
        throw CompileError(call.loc, fmt::format("'{}' takes {} argument{}, but {} {} given: {}",
                                                 call.name, count, b->maxArgs == 1 ? "" : "s", n,
                                                 n == 1 ? "was" : "were", b->usage));
      }
      for (size_t i = 0; i < call.args.size(); ++i) {
        const Expr& a = *call.args[i];
        bool axisMapExpected = (b->kind == BuiltinKind::Split || b->kind == BuiltinKind::Merge ||
                                b->kind == BuiltinKind::Rename || b->kind == BuiltinKind::Slice ||
                                b->kind == BuiltinKind::Pad || b->kind == BuiltinKind::Topk)
                                   ? i == 1
                                   : b->kind == BuiltinKind::Concat && i + 1 == call.args.size();
        if (axisMapExpected) {
          if (a.kind != Expr::Kind::AxisMap)
            throw CompileError(a.loc, fmt::format("expected an axis map such as 'a -> b' here: {}", b->usage));
          continue;
        }
        // scan(linear, c, x, a): its coefficient is a value too.
        const bool linearScan = b->kind == BuiltinKind::Scan && call.args[0]->kind == Expr::Kind::Name &&
                                call.args[0]->name == "linear";
        if (b->kind == BuiltinKind::Scan && a.kind == Expr::Kind::AxisMap) continue;  // scan(sum, x, s -> t): printed IR
        // scan(f, x, a, exclusive, v) over a user's operator f: v, the value before the first position.
        const bool userScanValue = b->kind == BuiltinKind::Scan && call.args[0]->kind == Expr::Kind::Name &&
                                   program_.find(call.args[0]->name) && i >= 3 && i + 1 == call.args.size() &&
                                   a.kind != Expr::Kind::Name;
        if (userScanValue) {
          checkExpr(a, scope);
          continue;
        }
        if ((isAxisArgument(b->kind, i) && !(linearScan && i == 2)) ||
            (b->kind == BuiltinKind::Stack && i + 1 == call.args.size())) {
          if (a.kind != Expr::Kind::Name)
            throw CompileError(a.loc, fmt::format("expected an axis name here: {}", b->usage));
          continue;
        }
        checkExpr(a, scope);
      }
      return;
    }
    const DiagramDecl* callee = program_.find(call.name);
    if (!callee) {
      std::vector<std::string> known = builtinNames();
      for (const auto& [name, d] : program_.diagrams) known.push_back(name);
      throw CompileError(call.loc, fmt::format("unknown box '{}'{}", call.name, didYouMean(call.name, known)));
    }
    size_t arrays = 0;
    for (const auto& a : call.args) {
      if (a->kind == Expr::Kind::Binding) continue;
      ++arrays;
      checkExpr(*a, scope);
    }
    if (arrays != callee->inputs.size())
      throw CompileError(call.loc, fmt::format("'{}' takes {} input{}, but {} {} given", call.name,
                                               callee->inputs.size(),
                                               callee->inputs.size() == 1 ? "" : "s", arrays,
                                               arrays == 1 ? "was" : "were"));
    calls_[current_->name].push_back({call.name, call.loc});
  }

  void checkRecursion() {
    std::map<std::string, int> state;  // 0 unvisited, 1 on the stack, 2 done
    // Depth first, with a stack of its own (a long chain of calls must not
    // overflow the machine's): each diagram on it with how many calls are done.
    std::vector<std::pair<std::string, size_t>> stack;
    for (const auto& module : program_.modules) {
      for (const auto& d : module->diagrams) {
        if (state[d.name] != 0) continue;
        state[d.name] = 1;
        stack.push_back({d.name, 0});
        while (!stack.empty()) {
          const std::vector<CallEdge>& edges = calls_[stack.back().first];
          if (stack.back().second == edges.size()) {
            state[stack.back().first] = 2;
            stack.pop_back();
            continue;
          }
          const CallEdge& edge = edges[stack.back().second++];
          if (state[edge.callee] == 1) {
            std::string cycle;
            auto from = std::find_if(stack.begin(), stack.end(), [&](const auto& s) { return s.first == edge.callee; });
            for (auto it = from; it != stack.end(); ++it) cycle += "'" + it->first + "' -> ";
            cycle += "'" + edge.callee + "'";
            throw CompileError(edge.loc, fmt::format("recursive call: {}; a diagram cannot call itself", cycle));
          }
          if (state[edge.callee] == 0) {
            state[edge.callee] = 1;
            stack.push_back({edge.callee, 0});
          }
        }
      }
    }
  }

  const Program& program_;
  const SizeBindings& sizes_;
  const DiagramDecl* current_ = nullptr;
  std::map<std::string, std::vector<CallEdge>> calls_;
  std::map<std::string, CompileError> unknownNames_;  // the first per diagram
};

}  // namespace

void resolveProgram(const Program& program, const SizeBindings& sizes, const std::string& entry) {
  Resolver(program, sizes).run(entry);
}

}  // namespace llmc
