#include "kernel_classes.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>
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
  // Each kernel's key on a pool of threads (the canonical form rewrites every
  // source: d48's 2586 kernels took most of a warm start's half second on one
  // thread), then the classes in order, so the first kernel of each is its
  // representative whatever the threads' timing.
  std::vector<std::string> keys(kernels.size());
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      const KernelSource& k = kernels[i];
      std::string key = compiledSourceForm(k);
      addField(key, k.arch);
      addField(key, std::to_string(k.options.size()));
      for (const std::string& option : k.options) addField(key, option);
      addField(key, k.launchSignature);
      keys[i] = std::move(key);
    }
  };
  {
    const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), (kernels.size() + 63) / 64);
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  KernelClasses classes;
  classes.representative.resize(kernels.size());
  // Keyed by the whole text, not a hash of it: a collision would launch the
  // wrong program.
  std::unordered_map<std::string, size_t> first;
  first.reserve(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto [it, added] = first.try_emplace(std::move(keys[i]), i);
    classes.representative[i] = it->second;
    classes.count += added;
  }
  return classes;
}

}  // namespace llmc::cuda
