#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "frontend/parser.h"
#include "frontend/program.h"
#include "frontend/resource_limits.h"

namespace llmc {

namespace fs = std::filesystem;

namespace {

// Refuses an import that is no diagram file (only .dg files are imported, so
// that an error in one never shows a line of some other file, a password file
// say) or that nests too deep (loading recurses once per level).
void checkImport(const ImportDecl& imp, int depth) {
  if (fs::path(imp.path).extension() != ".dg")
    throw CompileError(imp.loc, fmt::format("cannot import '{}': imports name diagram files, ending in .dg", imp.path));
  if (depth > kMaxImportDepth)
    throw CompileError(imp.loc, fmt::format("imports nested more than {} deep (a file importing a file importing ...)",
                                            kMaxImportDepth));
}

void load(Program& program, std::set<std::string>& seen, const std::string& path,
          const SourceLoc& from, int depth) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::path(path), ec);
  std::string key = ec ? path : canonical.string();
  if (!seen.insert(key).second) return;  // imported twice, or an import cycle: load once

  auto file = loadSourceFile(path, from);
  program.modules.push_back(std::make_unique<Module>(parseModule(file)));
  const Module& module = *program.modules.back();

  // Imports first, so that a diagram that clashes with an imported one is the
  // one blamed: the import comes first in the text.
  fs::path dir = fs::path(path).parent_path();
  for (const auto& imp : module.imports) {
    checkImport(imp, depth + 1);
    fs::path target = fs::path(imp.path).is_absolute() ? fs::path(imp.path) : dir / imp.path;
    load(program, seen, target.lexically_normal().string(), imp.loc, depth + 1);
  }
  for (const auto& d : module.diagrams) {
    auto [it, inserted] = program.diagrams.emplace(d.name, &d);
    if (!inserted)
      throw CompileError(d.loc, fmt::format("duplicate definition of diagram '{}'", d.name),
                         {fmt::format("{}: note: first defined here", it->second->loc.str())});
    if (isBuiltinBox(d.name))
      throw CompileError(d.loc, fmt::format("'{}' is a built-in box; give the diagram another name",
                                            d.name));
  }
}

}  // namespace

Program loadProgram(const std::string& path) {
  Program program;
  std::set<std::string> seen;
  load(program, seen, path, SourceLoc{}, 0);
  return program;
}

}  // namespace llmc
