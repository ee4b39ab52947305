#include "gradient_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ir/autodiff.h"
#include "ir/canonicalize.h"
#include "ir/verify.h"

namespace llmc::testing {

std::vector<GradientCheck> checkGradients(const Graph& forward, const std::vector<std::string>& wrt,
                                          const std::map<std::string, HostTensor>& inputs, int64_t maxElements,
                                          double step) {
  Graph backward = canonicalize(differentiate(forward, {"", wrt}));
  verifyGraph(backward);
  std::vector<HostTensor> outputs = interpret(backward, inputs);
  auto lossAt = [&](const std::map<std::string, HostTensor>& in) { return interpret(forward, in).at(0).data.at(0); };

  std::vector<GradientCheck> results;
  for (size_t k = 0; k < wrt.size(); ++k) {
    const HostTensor& x = inputs.at(wrt[k]);
    // The gradient output has the input's type, so elements line up.
    const HostTensor& gradient = outputs.at(k + 1);
    std::vector<int64_t> elements(static_cast<size_t>(x.elementCount()));
    std::iota(elements.begin(), elements.end(), 0);
    std::mt19937_64 rng(k + 1);
    std::shuffle(elements.begin(), elements.end(), rng);
    if (static_cast<int64_t>(elements.size()) > maxElements) elements.resize(static_cast<size_t>(maxElements));

    double diff = 0, norm = 0;
    for (int64_t e : elements) {
      auto perturbed = inputs;
      double& value = perturbed.at(wrt[k]).data[static_cast<size_t>(e)];
      const double original = value;
      const double h = step * std::max(1.0, std::abs(original));
      value = original + h;
      double plus = lossAt(perturbed);
      value = original - h;
      double minus = lossAt(perturbed);
      double numeric = (plus - minus) / (2 * h);
      double analytic = gradient.data[static_cast<size_t>(e)];
      diff += (analytic - numeric) * (analytic - numeric);
      norm += numeric * numeric;
    }
    double relative = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    results.push_back({wrt[k], relative, static_cast<int64_t>(elements.size())});
  }
  return results;
}

}  // namespace llmc::testing
