// Which kernels of a batch are one program (canonical_kernel.h): the JIT
// compiles one kernel of each class and launches the others through its
// compilation. For GPT-2 d12's training step that is 207 compiles for 600
// launches: the layers' kernels differ only in the names the emitter numbers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nvrtc_compiler.h"

namespace llmc::cuda {

// What NVRTC's output for `kernel` depends on in its source: the canonical
// form where there is one, else the name and source as they are (tagged so
// the two never meet). Equal for two kernels of one arch and options: NVRTC
// makes the same program of both, each with its own entry point's name.
std::string compiledSourceForm(const KernelSource& kernel);

struct KernelClasses {
  // Per kernel, the first kernel of its class (its own index for that one).
  std::vector<size_t> representative;
  size_t count = 0;  // the classes: the kernels that are their own representative
};

// Kernels are of one class when their compiledSourceForm, arch, options and
// launchSignature are all equal: the same program, compiled alike, and
// launched with the same arguments in the same positions.
KernelClasses classifyKernels(const std::vector<KernelSource>& kernels);

}  // namespace llmc::cuda
