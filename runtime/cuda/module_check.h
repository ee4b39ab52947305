// A module's run on the GPU judged against the reference interpreter: the
// comparison llmc-fuzz's gpu check and llmc-run --check make. The module runs
// on one arena placed by the memory plan and poisoned with NaN bytes, its
// inputs copied in; every output is read back and compared with the f64
// interpreter's.
//
// Tolerance, on the norm of each output's error: 1e-4 of the output's norm
// with f32 storage and 3e-2 with bf16 (or bf16 arrays in the diagram), plus
// twice the error that rounding alone causes: the interpreter run again with
// every array the module stores in bf16 rounded to bf16 and compared at bf16
// (f32 storage: the interpreter in f32), or with the diagram's own bf16
// values unrounded, as registers keep them (the larger of the two). A
// diagram whose outputs bf16 rounding moves by 10% is ill-conditioned, not
// wrong. Where an output is still off, it is judged again by what roundings
// anywhere can do: every value of the interpreter's exact run moved by a
// rounding's worth at random (InterpreterOptions::perturb; a sum by its
// terms' magnitudes). An ill-conditioned diagram is not wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "interpreter.h"
#include "ir/ir.h"
#include "module_executor.h"
#include "tensor.h"

namespace llmc::cuda {

// The interpreter's three runs a GPU result is judged by: exact (f64), as
// stored (bf16 storage's rounding, or f32 arithmetic), and with the
// diagram's own bf16 values kept unrounded, as registers keep them.
struct Reference {
  InterpreterOptions exact, stored, registers;
  bool lowPrecision = false;  // bf16 storage or bf16 arrays in the diagram: bf16's tolerance
};

Reference referenceFor(const Graph& graph, const CudaModule& module, bool bf16Storage);

// How far a GPU value is from the exact one (norms of the error), and how far
// it may be. `unit` turns them into relative figures: the exact value's norm
// (or the scale the floor was taken from, where that is 0).
struct Judgement {
  double error = 0, allowed = 0, rounding = 0, unit = 1;
  bool wrong() const { return !(error <= allowed); }  // true for NaN
  double relativeError() const { return error / unit; }
  double relativeTolerance() const { return allowed / unit; }
  double relativeRounding() const { return rounding / unit; }
};

// One output of the graph as the GPU left it, judged.
struct OutputCheck {
  std::string name;
  Type type;
  bool hasBuffer = true;    // false: no buffer of the module holds it (a bug in the emitter)
  Judgement judgement;
  double maxAbsError = 0;   // the largest |gpu - exact| over its elements (inf for NaN)
  bool finite = true;       // every value the GPU wrote is finite
};

struct OutputChecks {
  std::vector<OutputCheck> outputs;  // in graph.outputs order
  // The scale the tolerance's floor was taken from (the largest output, or
  // the largest value the diagram computes where that was needed).
  double largestScale = 0;
};

// Runs the executor's module on `arena` (at least its memory plan's bytes)
// poisoned with NaN (0xFF bytes), `inputs` (by graph input name, any axis
// order) copied in, and waits for it. `afterLaunch` (if set) runs after each
// launch, the launches then enqueued one at a time, as with `oneAtATime`.
void runPoisoned(ModuleExecutor& executor, const Graph& graph, const std::map<std::string, HostTensor>& inputs,
                 DeviceBuffer& arena, bool oneAtATime, const std::function<void(size_t)>& afterLaunch = {});

// Buffer `b` of the executor's module read back, with the type of its graph value.
HostTensor readBuffer(const ModuleExecutor& executor, const Graph& graph, size_t b);

// Graph output `i` as the run left it, in the output's type; nothing where no
// buffer of the module holds it (a bug in the emitter).
std::optional<HostTensor> readOutput(const ModuleExecutor& executor, const Graph& graph, size_t i);

// Every output of `graph` read back from a run of runPoisoned and judged
// against `reference` on the same inputs; `perturbSeed` seeds the
// ill-conditioning measure (taken only where an output is off).
OutputChecks checkOutputs(const ModuleExecutor& executor, const Graph& graph,
                          const std::map<std::string, HostTensor>& inputs, const Reference& reference,
                          uint64_t perturbSeed);

// Where a wrong output comes from: the module run again one launch at a
// time, each buffer compared with its graph value after the last launch that
// writes it. Names the first launch whose buffer is wrong.
std::string firstWrongLaunch(ModuleExecutor& executor, const Graph& graph,
                             const std::map<std::string, HostTensor>& inputs, DeviceBuffer& arena,
                             const Reference& reference, double largestScale);

}  // namespace llmc::cuda
