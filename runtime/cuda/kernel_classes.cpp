#include "kernel_classes.h"

#include <fmt/format.h>

#include <unordered_map>

#include "canonical_kernel.h"

namespace llmc::cuda {

namespace {

// Each field with its length before it, so no two lists of fields make one text.
void addField(std::string& out, std::string_view field) { out += fmt::format("{}:{};", field.size(), field); }

}  // namespace

std::string compiledSourceForm(const KernelSource& kernel) {
  std::string form;
  if (std::optional<std::string> canonical = canonicalKernelSource(kernel.source, kernel.name)) {
    addField(form, "canonical");
    addField(form, *canonical);
  } else {
    addField(form, "verbatim");
    addField(form, kernel.name);
    addField(form, kernel.source);
  }
  return form;
}

KernelClasses classifyKernels(const std::vector<KernelSource>& kernels) {
  KernelClasses classes;
  classes.representative.resize(kernels.size());
  // Keyed by the whole text, not a hash of it: a collision would launch the
  // wrong program.
  std::unordered_map<std::string, size_t> first;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelSource& k = kernels[i];
    std::string key = compiledSourceForm(k);
    addField(key, k.arch);
    addField(key, std::to_string(k.options.size()));
    for (const std::string& option : k.options) addField(key, option);
    addField(key, k.launchSignature);
    const auto [it, added] = first.try_emplace(std::move(key), i);
    classes.representative[i] = it->second;
    classes.count += added;
  }
  return classes;
}

}  // namespace llmc::cuda
