#include "module_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "buffer_values.h"
#include "cuda_driver.h"

namespace llmc::cuda {

namespace {

// The norm of t's finite values (a score masked with -inf has a size).
double finiteNorm(const HostTensor& t) {
  double sum = 0;
  for (double x : t.data)
    if (std::isfinite(x)) sum += x * x;
  return std::sqrt(sum);
}

// The largest |a - b| over the elements, matched by axis name; equal values
// (equal infinities too) differ by nothing, a NaN by infinity.
double maxAbsDifference(const HostTensor& a, const HostTensor& b) {
  HostTensor laidOut = a;
  laidOut.type.dtype = b.type.dtype;
  if (laidOut.type != b.type) laidOut = permuteTo(laidOut, b.type);
  double largest = 0;
  for (size_t i = 0; i < b.data.size(); ++i) {
    const double x = laidOut.data[i], y = b.data[i];
    if (x == y) continue;
    const double d = std::fabs(x - y);
    largest = std::max(largest, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  }
  return largest;
}

// How far a GPU value is from the exact one, and how far it may be: the
// tolerance on the error's norm plus twice what rounding alone moves it. An
// output whose terms cancel exactly in the interpreter (x / x's gradient)
// keeps a rounding's worth on the GPU (an approximate divide): at least a
// thousandth of `largestScale`'s tolerance is allowed (the largest output;
// where that fails, the largest value the diagram computes).
Judgement judge(const HostTensor& got, const HostTensor& exact, const HostTensor& stored, const HostTensor& registers,
                bool lowPrecision, double largestScale, double conditioning = 0) {
  Judgement j;
  const double scale = finiteNorm(exact);
  j.rounding = std::max({differenceNorm(stored, exact), differenceNorm(registers, exact), conditioning});
  j.allowed = (lowPrecision ? 3e-2 : 1e-4) * std::max(scale, 1e-3 * largestScale) +
              2 * (std::isfinite(j.rounding) ? j.rounding : 0);
  j.error = differenceNorm(got, exact);
  j.unit = scale > 0 ? scale : largestScale > 0 ? largestScale : 1;  // for messages
  return j;
}

// The largest norm of any float value of the diagram (inputs included).
double largestValue(const Graph& graph, const std::map<std::string, HostTensor>& inputs, InterpreterOptions options) {
  for (const Node& n : graph.nodes)
    if (isFloat(n.type.dtype)) options.keep.insert(n.id);
  double largest = 0;
  for (const auto& [id, value] : interpretNodes(graph, inputs, options))
    largest = std::max(largest, finiteNorm(value));
  return largest;
}

// A buffer is held to bf16's tolerance where it is stored in bf16 or its
// value is: an f32 buffer gets f32's, plus the roundings the references show
// (stricter than the outputs', where any bf16 in the diagram loosens all).
bool lowPrecisionBuffer(const Graph& graph, const BufferDesc& b) {
  return b.dtype == "bf16" || graph.node(b.node).type.dtype == DType::BF16;
}

// The buffer that holds graph output `name`, if any.
std::optional<size_t> outputBuffer(const CudaModule& module, const std::string& name) {
  std::optional<size_t> buffer;
  for (size_t b = 0; b < module.buffers.size(); ++b)
    for (const std::string& o : module.buffers[b].graphOutputs)
      if (o == name) buffer = b;
  return buffer;
}

}  // namespace

Reference referenceFor(const Graph& graph, const CudaModule& module, bool bf16Storage) {
  Reference r;
  if (bf16Storage) {
    for (const BufferDesc& b : module.buffers)
      if (b.dtype == "bf16") r.stored.storedAsBf16.insert(b.node);
    r.stored.compareAtBf16 = true;
  } else {
    r.stored.precision = Precision::F32;
  }
  r.registers = r.stored;
  r.registers.roundLowPrecision = false;
  r.lowPrecision = bf16Storage;
  for (const Node& n : graph.nodes) r.lowPrecision |= n.type.dtype == DType::BF16;
  return r;
}

HostTensor readBuffer(const ModuleExecutor& executor, const Graph& graph, size_t b) {
  const BufferDesc& buffer = executor.module().buffers[b];
  std::vector<unsigned char> bytes(static_cast<size_t>(buffer.bytes));
  check(driver().memcpyDtoH(bytes.data(), executor.bufferAddress(b), bytes.size()), "cuMemcpyDtoH");
  return HostTensor{graph.node(buffer.node).type, bufferValues(buffer, bytes)};
}

void runPoisoned(ModuleExecutor& executor, const Graph& graph, const std::map<std::string, HostTensor>& inputs,
                 DeviceBuffer& arena, bool oneAtATime, const std::function<void(size_t)>& afterLaunch) {
  const CudaModule& module = executor.module();
  arena.fillBytes(0xFF);
  executor.setArena(arena.address(), arena.bytes());
  for (const BufferDesc& b : module.buffers) {
    if (!b.graphInput) continue;
    const HostTensor laidOut = permuteTo(inputs.at(graph.node(b.node).name), graph.node(b.node).type);
    const std::vector<unsigned char> bytes = bufferBytes(b, laidOut.data);
    check(driver().memcpyHtoD(executor.address(b.name), bytes.data(), bytes.size()), "cuMemcpyHtoD(input)");
  }
  if (oneAtATime || afterLaunch) {
    for (size_t i = 0; i < module.launches.size(); ++i) {
      executor.runLaunch(i, nullptr);
      check(driver().ctxSynchronize(), "cuCtxSynchronize");
      if (afterLaunch) afterLaunch(i);
    }
  } else {
    executor.run(nullptr);
  }
  check(driver().ctxSynchronize(), "cuCtxSynchronize");
}

std::optional<HostTensor> readOutput(const ModuleExecutor& executor, const Graph& graph, size_t i) {
  const std::optional<size_t> buffer = outputBuffer(executor.module(), graph.outputs.at(i).name);
  if (!buffer) return std::nullopt;
  // The buffer may be the array the output is a view of (the same bytes,
  // in the output's row-major order): read as the output.
  HostTensor got = readBuffer(executor, graph, *buffer);
  got.type = graph.node(graph.outputs[i].node).type;
  return got;
}

OutputChecks checkOutputs(const ModuleExecutor& executor, const Graph& graph,
                          const std::map<std::string, HostTensor>& inputs, const Reference& reference,
                          uint64_t perturbSeed) {
  const std::vector<HostTensor> expected = interpret(graph, inputs, reference.exact);
  const std::vector<HostTensor> rounded = interpret(graph, inputs, reference.stored);
  const std::vector<HostTensor> unrounded = interpret(graph, inputs, reference.registers);
  OutputChecks checks;
  for (const HostTensor& e : expected) checks.largestScale = std::max(checks.largestScale, finiteNorm(e));
  double& largestScale = checks.largestScale;
  std::optional<double> valuesScale;
  std::vector<HostTensor> perturbed;
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    OutputCheck& c = checks.outputs.emplace_back();
    c.name = graph.outputs[i].name;
    c.type = graph.node(graph.outputs[i].node).type;
    const std::optional<HostTensor> read = readOutput(executor, graph, i);
    if (!read) {
      c.hasBuffer = false;
      continue;
    }
    const HostTensor& got = *read;
    Judgement j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale);
    if (j.wrong() && !valuesScale) {
      // An output far smaller than the values it was made from (terms that
      // cancel, x - x exactly) keeps their roundings: the floor is taken
      // over every value the diagram computes.
      valuesScale = largestValue(graph, inputs, reference.exact);
      largestScale = std::max(largestScale, *valuesScale);
      j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale);
    }
    if (j.wrong() && perturbed.empty()) {
      InterpreterOptions perturbation = reference.exact;
      perturbation.storedAsBf16 = reference.stored.storedAsBf16;
      perturbation.compareAtBf16 = reference.stored.compareAtBf16;  // x == max(x) holds as on the GPU
      perturbation.roundLowPrecision = false;
      perturbation.perturb = std::ldexp(1.0, -22);
      perturbation.perturbSeed = perturbSeed;
      perturbed = interpret(graph, inputs, perturbation);
    }
    if (j.wrong())  // how far roundings anywhere move it (an ill-conditioned diagram)
      j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale,
                differenceNorm(perturbed[i], expected[i]));
    c.judgement = j;
    c.maxAbsError = maxAbsDifference(got, expected[i]);
    for (double x : got.data) c.finite = c.finite && std::isfinite(x);
  }
  return checks;
}

std::string firstWrongLaunch(ModuleExecutor& executor, const Graph& graph,
                             const std::map<std::string, HostTensor>& inputs, DeviceBuffer& arena,
                             const Reference& reference, double largestScale) {
  const CudaModule& module = executor.module();
  std::vector<int> lastWriter(module.buffers.size(), -1);
  for (size_t i = 0; i < module.launches.size(); ++i)
    for (const LaunchParam& p : module.launches[i].params)
      if (p.written && module.buffers[static_cast<size_t>(p.buffer)].node >= 0)  // not a staging copy
        lastWriter[static_cast<size_t>(p.buffer)] = static_cast<int>(i);
  Reference kept = reference;
  for (size_t b = 0; b < module.buffers.size(); ++b)
    if (lastWriter[b] >= 0) {
      kept.exact.keep.insert(module.buffers[b].node);
      kept.stored.keep.insert(module.buffers[b].node);
      kept.registers.keep.insert(module.buffers[b].node);
    }
  const auto exact = interpretNodes(graph, inputs, kept.exact);
  const auto stored = interpretNodes(graph, inputs, kept.stored);
  const auto registers = interpretNodes(graph, inputs, kept.registers);
  std::string found;
  runPoisoned(executor, graph, inputs, arena, true, [&](size_t i) {
    if (!found.empty()) return;
    for (size_t b = 0; b < module.buffers.size(); ++b) {
      if (lastWriter[b] != static_cast<int>(i)) continue;
      const NodeId node = module.buffers[b].node;
      const Judgement j = judge(readBuffer(executor, graph, b), exact.at(node), stored.at(node), registers.at(node),
                                lowPrecisionBuffer(graph, module.buffers[b]), largestScale);
      if (!j.wrong()) continue;
      found = fmt::format("first wrong buffer: {} ({}), written by launch {} {}, relative error {:.3g}, tolerance {:.3g}",
                          module.buffers[b].name, graph.node(node).type.str(), i, module.launches[i].name,
                          j.relativeError(), j.relativeTolerance());
      return;
    }
  });
  return found.empty() ? "every buffer matches when launches run one at a time" : found;
}

}  // namespace llmc::cuda
