// Checks the autodiff pass against central finite differences in fp64.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "interpreter.h"
#include "ir/ir.h"

namespace llmc::testing {

struct GradientCheck {
  std::string input;
  double relativeError;  // ||autodiff - finite differences|| / ||finite differences||
  int64_t elementsChecked;
};

// Differentiates the scalar output of `forward` with respect to `wrt` and
// compares each gradient with central differences on at most `maxElements`
// elements per input (a seeded random sample of them).
std::vector<GradientCheck> checkGradients(const Graph& forward, const std::vector<std::string>& wrt,
                                          const std::map<std::string, HostTensor>& inputs,
                                          int64_t maxElements = 64, double step = 1e-6);

}  // namespace llmc::testing
