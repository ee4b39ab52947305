#include "checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "frontend/source.h"
#include "low_precision.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace llmc::fuzz {

std::string Config::str() const {
  return fmt::format("{} {} {}{}", arch, storage, grad ? "backward" : "forward", scansAlways ? ", scans always" : "");
}

std::vector<Config> configsFor(const DiagramSpec& spec, const CheckOptions& options) {
  std::vector<Config> all;
  for (const std::string& arch : options.archs)
    for (const std::string& storage : options.storages)
      for (bool grad : {false, true})
        if (grad ? options.backward : options.forward) all.push_back({arch, storage, grad, spec.seed % 2 == 1});
  if (!options.sampleConfigs || all.empty()) return all;
  return {all[static_cast<size_t>(spec.seed % all.size())]};
}

DiagramFile::DiagramFile(const DiagramSpec& spec, const std::string& dir) {
  static std::atomic<int> counter = 0;
  path = fmt::format("{}/llmc_fuzz_{}_{}_{}.dg", dir, getpid(), spec.seed, counter++);
  std::ofstream(path) << printDiagram(spec);
}

DiagramFile::~DiagramFile() { std::filesystem::remove(path); }

namespace {

// A message without what varies between a diagram and its shrunk versions:
// the file's place, numbers, value and kernel names.
std::string normalise(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  static const std::regex place(R"(^\S+\.dg:\d+:\d+: )"), names(R"(\b(v|in|ix|k)\d+\w*)"), numbers(R"(\d+)");
  line = std::regex_replace(line, place, "");
  line = std::regex_replace(line, names, "X");
  line = std::regex_replace(line, numbers, "N");
  return line.substr(0, 160);
}

}  // namespace

Failure failureFrom(const std::string& check, const std::string& where, const std::exception& e) {
  std::string kind = dynamic_cast<const CompileError*>(&e) ? "rejected" : dynamic_cast<const std::logic_error*>(&e)
                                                                               ? "internal compiler error"
                                                                               : "error";
  if (dynamic_cast<const cuda::KernelCompileError*>(&e)) kind = "NVRTC refused";
  const std::string prefix = where.empty() ? check : check + " " + where;
  return {check, fmt::format("{}: {}: {}", prefix, kind, normalise(e.what())),
          fmt::format("{}: {}: {}", prefix, kind, e.what())};
}

Graph compileGraph(const DiagramFile& file, const DiagramSpec& spec, bool grad, const Target* target, int storageBytes,
                   bool scansAlways) {
  PipelineOptions o;
  o.path = file.path;
  o.grad = grad;
  if (grad) {
    o.loss = "loss";
    o.wrt = spec.wrt();
  }
  o.target = target;
  o.cost.storageBytes = storageBytes;
  o.cost.scansAlways = scansAlways;
  return compileToIR(o);
}

namespace {

// Positions an integer input can name where no `# fuzz-input: NAME index N` says: the shortest axis
// a gather looks it up along (a hand-written diagram's token ids or targets), else 2.
int64_t integerInputBound(const Graph& graph, NodeId input) {
  int64_t bound = 0;
  for (const Node& n : graph.nodes)
    if (n.op == Op::Gather && n.operands.size() == 2 && n.operands[1] == input)
      if (const Axis* a = graph.node(n.operands[0]).type.find(n.axes.at(0)); a && (bound == 0 || a->size < bound))
        bound = a->size;
  return bound > 0 ? bound : 2;
}

}  // namespace

std::map<std::string, HostTensor> randomInputs(const Graph& graph, const DiagramSpec& spec, uint64_t seed,
                                               bool roundToBf16) {
  std::map<std::string, HostTensor> inputs;
  for (NodeId id : graph.inputs) {
    const Node& n = graph.node(id);
    const Value* v = nullptr;
    for (const Value& x : spec.values)
      if (x.input && x.name == n.name) v = &x;
    const uint64_t s = seed * 1000003 + static_cast<uint64_t>(id);
    HostTensor t;
    if (v && (!v->indexAxis.empty() || v->indexBound > 0))
      t = randomUniform(n.type, s, 0, double(v->indexBound > 0 ? v->indexBound : spec.sizeOf(v->indexAxis).value_or(1)));
    else if (isInteger(n.type.dtype))
      t = randomUniform(n.type, s, 0, double(integerInputBound(graph, id)));
    else if (v && v->lo > 0) t = randomUniform(n.type, s, std::max(v->lo, 0.5), std::max(std::max(v->lo, 0.5), std::min(v->bound, 2.0)));
    else t = randomNormal(n.type, s, 0, 1);
    // A bf16 input holds bf16 values whatever the storage (f32 storage keeps them in f32).
    if (isLowPrecision(n.type.dtype))
      for (double& x : t.data) x = roundToDType(x, n.type.dtype);
    if (roundToBf16 && isFloat(n.type.dtype))
      for (double& x : t.data) x = roundToDType(x, DType::BF16);
    inputs[n.name] = t;
  }
  return inputs;
}

namespace {

size_t outputIndex(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.outputs[i].name == name) return i;
  throw std::runtime_error(fmt::format("the diagram has no output '{}' (llmc-fuzz checks a diagram 'fuzz' with the outputs "
                                       "y and loss: tools/fuzz/README.md)", name));
}

bool allFinite(const HostTensor& t) {
  for (double x : t.data)
    if (!std::isfinite(x)) return false;
  return true;
}

// The forward graph with every stop_gradient's value frozen: each becomes an
// input named `frozen<id>`, added to `inputs` with its value at `inputs`.
// Finite differences of that graph are what autodiff computes: nothing
// flows back through a stop_gradient.
Graph freezeStopGradients(const Graph& forward, std::map<std::string, HostTensor>& inputs,
                          const InterpreterOptions& options) {
  Graph probe = forward;
  std::vector<NodeId> stops;
  for (const Node& n : forward.nodes)
    if (n.op == Op::StopGradient) {
      stops.push_back(n.id);
      probe.outputs.push_back({fmt::format("frozen{}", n.id), n.id});
    }
  if (stops.empty()) return forward;
  const std::vector<HostTensor> values = interpret(probe, inputs, options);
  Graph frozen = forward;
  for (size_t k = 0; k < stops.size(); ++k) {
    Node& n = frozen.node(stops[k]);
    n.op = Op::Input;
    n.operands.clear();
    n.name = fmt::format("frozen{}", n.id);
    frozen.inputs.push_back(n.id);
    inputs[n.name] = values[forward.outputs.size() + k];
  }
  return frozen;
}

// Whether a maximum, minimum or comparison of `g` has equal operands at
// some element at these inputs: the loss has a kink at the point whatever
// the differences around it show. maximum(minimum(c, x), x), with c a
// stop_gradient of x frozen at x, is smooth in x (slope 1 on both sides),
// yet every choice of side at the two ties gives a gradient other than 1.
bool hasExactTie(const Graph& g, const std::map<std::string, HostTensor>& inputs, InterpreterOptions options) {
  std::vector<NodeId> choices;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    const bool choosing = (n.op == Op::Binary && (n.binary == BinaryOp::Maximum || n.binary == BinaryOp::Minimum)) ||
                          n.op == Op::Compare;
    if (!choosing || n.operands.size() != 2) continue;
    choices.push_back(static_cast<NodeId>(id));
    options.keep.insert(n.operands.begin(), n.operands.end());
  }
  if (choices.empty()) return false;
  const std::map<NodeId, HostTensor> values = interpretNodes(g, inputs, options);
  for (NodeId id : choices) {
    const Node& n = g.node(id);
    const HostTensor &a = values.at(n.operands[0]), &b = values.at(n.operands[1]);
    // Each element of the result, its operands' elements by axis name (an
    // operand without an axis is broadcast along it).
    const std::vector<Axis>& axes = n.type.axes;
    AxisIndex index;
    for (const Axis& axis : axes) index[axis.name] = 0;
    for (int64_t e = 0; e < n.type.elementCount(); ++e) {
      int64_t rest = e;
      for (size_t k = axes.size(); k-- > 0;) index[axes[k].name] = rest % axes[k].size, rest /= axes[k].size;
      auto valueOf = [&](const HostTensor& t) {
        AxisIndex own;
        for (const Axis& axis : t.type.axes) own[axis.name] = index.at(axis.name);
        return t.data[static_cast<size_t>(flatIndex(t.type, own))];
      };
      if (valueOf(a) == valueOf(b)) return true;
    }
  }
  return false;
}

// The interpreter's gradients against central differences in f64, bf16
// values not rounded (so that a step of 1e-6 is seen). Each coordinate is
// differenced with two steps, 1e-5 and 1e-6 (relative to the value): where
// they disagree, or where the one-sided differences of the finer step do,
// the loss is not smooth there (a kink of max, abs, maximum or a comparison
// within the step, or a tie right at the point) and the coordinate proves
// nothing; where they agree with each other but not with the gradient,
// autodiff is wrong, unless a maximum, minimum or comparison has equal
// operands at the point (hasExactTie).
// Tolerance per coordinate: 1e-4 relative, plus 1e-8 times the sum of the
// loss's terms' magnitudes (what rounding in the loss leaves in a difference).
std::optional<Failure> checkGradients(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options) {
  const Graph backward = compileGraph(file, spec, true, nullptr, 4);
  InterpreterOptions exact;
  exact.roundLowPrecision = false;
  std::map<std::string, HostTensor> inputs = randomInputs(backward, spec, spec.seed, false);
  const std::vector<HostTensor> outputs = interpret(backward, inputs, exact);
  const Graph forward = freezeStopGradients(compileGraph(file, spec, false, nullptr, 4), inputs, exact);
  const std::vector<HostTensor> fwd = interpret(forward, inputs, exact);
  const size_t lossAt = outputIndex(forward, "loss"), yAt = outputIndex(forward, "y");
  const double loss = fwd[lossAt].data.at(0);
  if (!std::isfinite(loss))
    return Failure{"grad", "grad: the interpreter's loss is not finite (a generator bug)", fmt::format("loss = {}", loss)};
  // sum |y * wy|, the generator's loss; a hand-written diagram's (--file) may be any other: |loss|.
  double terms = std::abs(loss);
  if (inputs.count("wy")) {
    terms = 0;
    const HostTensor weights = permuteTo(inputs.at("wy"), fwd[yAt].type);
    for (size_t i = 0; i < weights.data.size(); ++i) terms += std::abs(fwd[yAt].data[i] * weights.data[i]);
  }
  const std::vector<std::string> wrt = spec.wrt();
  std::mt19937_64 rng(spec.seed);
  std::optional<bool> tied;  // hasExactTie, asked once where a coordinate disagrees
  for (size_t k = 0; k < wrt.size(); ++k) {
    const HostTensor& gradient = outputs.at(k + 1);
    if (!allFinite(gradient))
      return Failure{"grad", "grad: the interpreter's gradient is not finite",
                     fmt::format("gradient of {} has a non-finite element (loss {})", wrt[k], loss)};
    const HostTensor& x = inputs.at(wrt[k]);
    for (int c = 0; c < options.fdCoordinates && x.elementCount() > 0; ++c) {
      const size_t e = std::uniform_int_distribution<size_t>(0, x.data.size() - 1)(rng);
      // Central and one-sided differences with a step relative to the value.
      struct Differences {
        double central, left, right;
      };
      auto difference = [&](double relativeStep) {
        auto perturbed = inputs;
        double& value = perturbed.at(wrt[k]).data[e];
        const double h = relativeStep * std::max(1.0, std::abs(value));
        const double original = value;
        value = original + h;
        const double plus = interpret(forward, perturbed, exact)[lossAt].data[0];
        value = original - h;
        const double minus = interpret(forward, perturbed, exact)[lossAt].data[0];
        return Differences{(plus - minus) / (2 * h), (loss - minus) / h, (plus - loss) / h};
      };
      const Differences coarse = difference(1e-5), fine = difference(1e-6);
      const double analytic = gradient.data[e];
      const double tolerance = 1e-4 * std::max(std::abs(coarse.central), std::abs(analytic)) + 1e-8 * (1 + terms);
      // Not smooth here: a kink within the step, or right at the point (a
      // tie of maximum(x, x), where autodiff's choice of side is as good).
      if (std::abs(coarse.central - fine.central) > tolerance || std::abs(fine.left - fine.right) > tolerance) continue;
      if (std::abs(analytic - fine.central) <= tolerance || std::abs(analytic - coarse.central) <= tolerance) continue;
      // A tie right at the point that the differences cannot see.
      if (!tied) tied = hasExactTie(forward, inputs, exact);
      if (!*tied)
        return Failure{"grad", "grad: gradient differs from finite differences",
                       fmt::format("d loss / d {}[{}]: autodiff {:.10g}, finite differences {:.10g} (step 1e-6) and "
                                   "{:.10g} (step 1e-5), tolerance {:.3g}",
                                   wrt[k], e, analytic, fine.central, coarse.central, tolerance)};
    }
  }
  return std::nullopt;
}

// The passes that rewrite the IR for a target (one-hot gathers, recompute)
// change how values are computed, never what: the graphs planned for each
// architecture, forward and training step, give the target-free graph's
// outputs in the interpreter, in f64, up to the rounding of summing in
// another order (1e-9 of the output's largest magnitude, and of 1).
std::optional<Failure> checkPasses(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options) {
  InterpreterOptions exact;
  exact.roundLowPrecision = false;
  for (bool grad : {false, true}) {
    const Graph plain = compileGraph(file, spec, grad, nullptr, 4);
    const std::map<std::string, HostTensor> inputs = randomInputs(plain, spec, spec.seed + 104729, false);
    const std::vector<HostTensor> expected = interpret(plain, inputs, exact);
    for (const std::string& arch : options.archs)
      for (bool scansAlways : {false, true}) {
        const Target target = loadTarget(arch);
        const Graph planned = compileGraph(file, spec, grad, &target, 2, scansAlways);
        const std::vector<HostTensor> got = interpret(planned, inputs, exact);
        const std::string where = fmt::format("{} {}{}", arch, grad ? "backward" : "forward", scansAlways ? ", scans always" : "");
        for (size_t i = 0; i < plain.outputs.size(); ++i) {
          const std::string& name = plain.outputs[i].name;
          const HostTensor value = permuteTo(got.at(outputIndex(planned, name)), expected[i].type);
          double scale = 1;
          for (double x : expected[i].data)
            if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
          for (size_t e = 0; e < value.data.size(); ++e)
            if (!std::isfinite(expected[i].data[e]) && !std::isfinite(value.data[e])) continue;
            else if (!(std::abs(value.data[e] - expected[i].data[e]) <= 1e-9 * scale))
              return Failure{"passes", fmt::format("passes {}: a target's passes change an output", where),
                             fmt::format("passes {}: output {}[{}] is {:.12g} planned for the target, {:.12g} without one",
                                         where, name, e, value.data[e], expected[i].data[e])};
        }
      }
  }
  return std::nullopt;
}

// Plans every configuration and compiles every launch with NVRTC.
std::optional<Failure> checkNvrtc(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options) {
  for (const Config& c : configsFor(spec, options)) {
    try {
      const Target target = loadTarget(c.arch);
      const int bytes = c.storage == "bf16" ? 2 : 4;
      const Graph graph = compileGraph(file, spec, c.grad, &target, bytes, c.scansAlways);
      CostOptions cost;
      cost.storageBytes = bytes;
      cost.rowProducts = options.rowProducts;
      // Lowered as llmc-compile and llmc-train lower it (lowering.h).
      const EmitOptions emit{.storage = bytes == 2 ? StorageType::BF16 : StorageType::F32};
      const CudaModule module = emitCuda(graph, lowerKernels(graph, target, cost, emit), target, emit);
      for (const cuda::KernelSource& source : cuda::kernelSources(module, c.arch)) cuda::compileWithNvrtc(source);
    } catch (const std::exception& e) {
      return failureFrom("nvrtc", c.str(), e);
    }
  }
  return std::nullopt;
}

bool wants(const CheckOptions& o, const std::string& check) {
  return std::find(o.checks.begin(), o.checks.end(), check) != o.checks.end();
}

}  // namespace

std::optional<Failure> runChecks(const DiagramSpec& spec, const CheckOptions& options,
                                 const std::function<void(const std::string&)>& progress) {
  auto step = [&](const std::string& check) {
    if (progress) progress(check);
  };
  DiagramFile file(spec, options.tempDir);
  // The front end: both graphs compile (every other check compiles them too).
  step("front");
  for (bool grad : {false, true}) {
    try {
      compileGraph(file, spec, grad, nullptr, 4);
    } catch (const std::exception& e) {
      return failureFrom("front", grad ? "--grad" : "", e);
    }
  }
  if (wants(options, "grad")) {
    step("grad");
    try {
      if (auto f = checkGradients(spec, file, options)) return f;
    } catch (const std::exception& e) {
      return failureFrom("grad", "", e);
    }
  }
  if (wants(options, "passes")) {
    step("passes");
    try {
      if (auto f = checkPasses(spec, file, options)) return f;
    } catch (const std::exception& e) {
      return failureFrom("passes", "", e);
    }
  }
  if (wants(options, "nvrtc")) {
    step("nvrtc");
    if (auto f = checkNvrtc(spec, file, options)) return f;
  }
  if (wants(options, "gpu")) {
    step("gpu");
    if (auto f = checkGpu(spec, file, options)) return f;
  }
  return std::nullopt;
}

}  // namespace llmc::fuzz
