// A program: the main diagram file and everything it imports, parsed, with
// every diagram findable by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/ast.h"

namespace llmc {

struct Program {
  std::vector<std::unique_ptr<Module>> modules;  // modules[0] is the main file
  std::map<std::string, const DiagramDecl*> diagrams;

  const Module& main() const { return *modules.front(); }
  const DiagramDecl* find(const std::string& name) const {
    auto it = diagrams.find(name);
    return it == diagrams.end() ? nullptr : it->second;
  }
};

// Sizes bound from outside the text (`--set T=1024`).
using SizeBindings = std::map<std::string, int64_t>;

// Parses `path` and, transitively, the files it imports (paths relative to the
// importing file). Refuses duplicate diagram names across all of them.
Program loadProgram(const std::string& path);

// The names of the built-in primitive boxes (exp, sum, contract, ...).
bool isBuiltinBox(const std::string& name);

// Checks every diagram, called or not, for what can be known without sizes:
// calls of known boxes with the right number of inputs, no recursion, every
// output assigned; and, in the diagrams `entry` uses, names defined before use.
void resolveProgram(const Program& program, const SizeBindings& sizes, const std::string& entry);

}  // namespace llmc
