#include "entry_wrapper.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <set>

#include "atomic_file.h"
#include "cache_folder.h"
#include "frontend/elaborate.h"
#include "frontend/program.h"
#include "kernel_cache.h"
#include "sha256.h"

namespace llmc::capi {

namespace fs = std::filesystem;

namespace {

// `import "PATH"`: the path is taken as written, without escapes (a quote
// or a newline in it cannot be imported).
std::string importLine(const std::string& path) {
  if (path.find_first_of("\"\n") != std::string::npos)
    throw ShapeError(fmt::format("the diagram's path cannot be imported by a generated diagram: {}", path));
  return fmt::format("import \"{}\"\n", path);
}

// `a, b = callee(x, y)`.
std::string callLine(const std::vector<std::string>& targets, const std::string& callee,
                     const std::vector<std::string>& arguments) {
  return fmt::format("  {} = {}({})\n", fmt::join(targets, ", "), callee, fmt::join(arguments, ", "));
}

// A declared type with its sizes left out (`f32[.. t d]`): the callee's
// output as the wrapper declares it, checked by the callee itself.
std::string unsizedType(const TypeSpec& type) {
  std::vector<std::string> axes;
  for (size_t i = 0; i <= type.axes.size(); ++i) {
    if (static_cast<int>(i) == type.ellipsisAt) axes.push_back("..");
    if (i < type.axes.size()) axes.push_back(type.axes[i].name);
  }
  return fmt::format("{}[{}]", type.dtype, fmt::join(axes, " "));
}

// Input `port` at `dims`: its named axes at their sizes, the dimensions its
// `..` stands for as batch0, batch1, ...
std::string shapedType(const Port& port, const std::vector<int64_t>& dims) {
  const TypeSpec& type = port.type;
  const size_t named = type.axes.size();
  const bool woven = type.ellipsisAt >= 0;
  if (dims.size() < named || (!woven && dims.size() != named))
    throw ShapeError(fmt::format("input '{}' has {} dimensions, but its type {} has {}{}", port.name, dims.size(),
                                 unsizedType(type), woven ? "at least " : "", named));
  const size_t batch = dims.size() - named;
  std::vector<std::string> axes;
  size_t d = 0;
  for (size_t i = 0; i <= named; ++i) {
    if (static_cast<int>(i) == type.ellipsisAt)
      for (size_t k = 0; k < batch; ++k) axes.push_back(fmt::format("{}:{}", batchAxisName(k), dims[d++]));
    if (i < named) axes.push_back(fmt::format("{}:{}", type.axes[i].name, dims[d++]));
  }
  for (int64_t n : dims)
    if (n <= 0) throw ShapeError(fmt::format("input '{}' has an empty dimension ({})", port.name, fmt::join(dims, ", ")));
  return fmt::format("{}[{}]", type.dtype, fmt::join(axes, " "));
}

}  // namespace

std::string batchAxisName(size_t k) { return fmt::format("batch{}", k); }

std::string seedName(const std::string& output) { return "llmc_seed_" + output; }

EntrySignature readEntrySignature(const std::string& path, const std::string& entry) {
  const Program program = loadProgram(path);
  const std::string name = entry.empty() ? defaultEntry(program) : entry;
  const DiagramDecl* diagram = program.find(name);
  if (!diagram) {
    std::vector<std::string> names;
    for (const auto& [n, d] : program.diagrams) names.push_back(n);
    throw CompileError({}, fmt::format("no diagram named '{}' in {} or its imports (its diagrams: {}){}", name, path,
                                       fmt::join(names, ", "), didYouMean(name, names)));
  }
  EntrySignature s{.name = name, .file = fs::absolute(path).lexically_normal().string(), .inputs = diagram->inputs,
                   .outputs = diagram->outputs};
  for (const Port& p : s.inputs) s.woven |= p.type.ellipsisAt >= 0;
  return s;
}

std::string shapedEntrySource(const EntrySignature& signature, const std::vector<InputShape>& shapes,
                              const std::string& wrapperName) {
  std::map<std::string, const InputShape*> byName;
  for (const InputShape& s : shapes) {
    const bool known = std::any_of(signature.inputs.begin(), signature.inputs.end(),
                                   [&](const Port& p) { return p.name == s.input; });
    if (!known) {
      std::vector<std::string> names;
      for (const Port& p : signature.inputs) names.push_back(p.name);
      throw ShapeError(fmt::format("'{}' has no input named '{}' (its inputs: {})", signature.name, s.input,
                                   fmt::join(names, ", ")));
    }
    if (!byName.emplace(s.input, &s).second) throw ShapeError(fmt::format("input '{}' is given two shapes", s.input));
  }
  std::vector<std::string> inputs, arguments, outputs, targets;
  for (const Port& p : signature.inputs) {
    const auto shape = byName.find(p.name);
    if (shape == byName.end()) throw ShapeError(fmt::format("no shape given for input '{}' of '{}'", p.name, signature.name));
    inputs.push_back(fmt::format("{}: {}", p.name, shapedType(p, shape->second->dims)));
    arguments.push_back(p.name);
  }
  for (const Port& p : signature.outputs) {
    outputs.push_back(fmt::format("{}: {}", p.name, unsizedType(p.type)));
    targets.push_back(p.name);
  }
  return fmt::format("# Generated by libllmc: '{}' at the shapes of the caller's arrays.\n{}diagram {}({}) -> ({})\n{}end\n",
                     signature.name, importLine(signature.file), wrapperName, fmt::join(inputs, ", "),
                     fmt::join(outputs, ", "), callLine(targets, signature.name, arguments));
}

std::string vjpSource(const Graph& forward, const std::string& callee, const std::string& calleeFile,
                      const std::vector<std::string>& wrt, const std::string& wrapperName) {
  std::set<std::string> names;
  std::vector<std::string> inputs, arguments, targets, terms;
  for (NodeId id : forward.inputs) {
    const Node& n = forward.node(id);
    inputs.push_back(fmt::format("{}: {}", n.name, n.type.str()));
    arguments.push_back(n.name);
    names.insert(n.name);
  }
  for (const GraphOutput& o : forward.outputs) {
    targets.push_back(o.name);
    names.insert(o.name);
  }
  for (const GraphOutput& o : forward.outputs) {
    const Type& type = forward.node(o.node).type;
    if (!isFloat(type.dtype)) continue;  // integers and masks have no gradient
    const std::string seed = seedName(o.name);
    if (!names.insert(seed).second) throw ShapeError(fmt::format("the name '{}' the backward needs is taken", seed));
    inputs.push_back(fmt::format("{}: {}", seed, type.str()));
    std::vector<std::string> axes;
    for (const Axis& a : type.axes) axes.push_back(a.name);
    terms.push_back(axes.empty() ? fmt::format("{} * {}", o.name, seed)
                                 : fmt::format("sum({} * {}, {})", o.name, seed, fmt::join(axes, ", ")));
  }
  if (terms.empty()) throw ShapeError(fmt::format("'{}' has no floating-point output to differentiate", callee));
  if (wrt.empty()) throw ShapeError(fmt::format("'{}' has no floating-point input to differentiate against", callee));
  if (names.count(kVjpLoss)) throw ShapeError(fmt::format("the name '{}' the backward needs is taken", kVjpLoss));
  return fmt::format(
      "# Generated by libllmc: the vector-Jacobian product of '{}' (differentiated with respect to {}).\n"
      "{}diagram {}({}) -> {}: f32[]\n{}  {} = {}\nend\n",
      callee, fmt::join(wrt, ", "), importLine(calleeFile), wrapperName, fmt::join(inputs, ", "), kVjpLoss,
      callLine(targets, callee, arguments), kVjpLoss, fmt::join(terms, " + "));
}

std::string writeWrapper(const std::string& source) {
  const fs::path folder = cuda::KernelCache::defaultDirectory() / "wrappers";
  if (!cuda::openCacheFolder(folder, "generated diagrams"))
    throw std::runtime_error(fmt::format("no private folder for libllmc's generated diagrams ({})", folder.string()));
  const fs::path file = folder / (sha256Hex(source).substr(0, 32) + ".dg");
  writeFileAtomically(file, source);
  return file.string();
}

}  // namespace llmc::capi
