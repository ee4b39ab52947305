// The checks of one random diagram: the front end accepts it; the
// interpreter's gradients match finite differences; the IR planned for a
// target computes what the target-free IR does; every kernel planned for
// each architecture and storage compiles with NVRTC; on a GPU, the module
// matches the f64 interpreter forward and backward.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diagram_spec.h"
#include "interpreter.h"
#include "ir/ir.h"
#include "planning/target.h"
#include "tensor.h"

namespace llmc::fuzz {

// One way of planning the module: an architecture, a storage type, and the
// forward graph (outputs y and loss) or the training step (--grad).
struct Config {
  std::string arch = "sm_90a";
  std::string storage = "f32";
  bool grad = false;
  // Running sums planned as blocked scans whatever their price
  // (CostOptions::scansAlways): the diagrams of odd seeds.
  bool scansAlways = false;
  std::string str() const;  // "sm_90a f32 forward", ", scans always"
};

struct CheckOptions {
  std::vector<std::string> checks = {"front", "grad", "passes", "nvrtc"};
  std::vector<std::string> archs = {"sm_90a", "sm_80"};
  std::vector<std::string> storages = {"f32", "bf16"};
  bool forward = true, backward = true;  // which graphs nvrtc and gpu plan
  // Only one (arch, storage, graph) per diagram, drawn by its seed: a cheaper
  // NVRTC check for CI that still covers every combination over many seeds.
  bool sampleConfigs = false;
  int fdCoordinates = 4;            // per differentiated input
  bool sanitizerFriendly = false;   // gpu: one launch at a time, synchronised
  unsigned compileThreads = 0;      // gpu: NVRTC's threads per diagram (0: one per hardware thread)
  bool rowProducts = false;         // nvrtc, gpu: planned with CostOptions::rowProducts
  std::string tempDir = "/tmp";     // where the diagram file is written for the front end
};

// The configurations a diagram is planned in, under the options.
std::vector<Config> configsFor(const DiagramSpec& spec, const CheckOptions& options);

// A failed check. `signature` names the check and the kind of failure without
// the diagram's names and numbers: the shrinker keeps a smaller diagram only
// while it fails with the same signature.
struct Failure {
  std::string check;      // front, grad, passes, nvrtc, gpu
  std::string signature;  // "nvrtc sm_80 bf16 backward: NVRTC refused"
  std::string detail;     // the full message
};

// The diagram as a file the front end reads; removed when it goes.
struct DiagramFile {
  std::string path;
  DiagramFile(const DiagramSpec& spec, const std::string& dir);
  ~DiagramFile();
  DiagramFile(const DiagramFile&) = delete;
  DiagramFile& operator=(const DiagramFile&) = delete;
};

// Runs the checks in order and returns the first failure. `progress`, if
// given, is called with the name of each check before it runs (so that a
// crash can be blamed on it).
std::optional<Failure> runChecks(const DiagramSpec& spec, const CheckOptions& options,
                                 const std::function<void(const std::string&)>& progress = {});

// --- pieces the GPU check shares

// Random inputs for a graph compiled from `spec`: N(0, 1) floats, positive
// ones uniform in [0.5, 2], indices in range. Rounded to bf16 where asked.
std::map<std::string, HostTensor> randomInputs(const Graph& graph, const DiagramSpec& spec, uint64_t seed,
                                               bool roundToBf16);
// The graph of `file` planned as llmc-compile plans it (the target's recompute pass with grad).
Graph compileGraph(const DiagramFile& file, const DiagramSpec& spec, bool grad, const Target* target, int storageBytes,
                   bool scansAlways = false);
// Turns an exception from the compiler into a failure of `check`.
Failure failureFrom(const std::string& check, const std::string& where, const std::exception& e);

// The GPU check (gpu_check.cpp): every configuration run on GPU 0 against the
// f64 interpreter. Throws if no GPU can be used.
std::optional<Failure> checkGpu(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options);
bool gpuAvailable(std::string* why);

}  // namespace llmc::fuzz
