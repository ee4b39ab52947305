#include "gpu_trainer.h"

#include "codegen/emit_cuda.h"
#include "lowering/lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>

#include "cuda_driver.h"
#include "cuda_event.h"
#include "device_start.h"
#include "loaded_kernels.h"
#include "driver/pipeline.h"
#include "jit.h"
#include "kernel_cache.h"
#include "module_cache.h"
#include "planning/memory_plan.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace llmc {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// Each parameter starts on a 128-element boundary of the packed arrays (256
// bytes of bf16): TMA and 16-byte vector accesses need aligned rows.
constexpr int64_t kParameterAlignment = 128;

// The scalar slots, 16 bytes apart (bindings are 16-byte aligned).
enum Slot : int {
  kStepLoss, kEvalLoss, kGradNorm, kLearningRate, kBeta1, kBeta2, kEps, kWeightDecay, kStepNumber, kMaxNorm,
  kAccumulateScale, kGradSquares, kSlotCount
};

CUdeviceptr at(const cuda::DeviceBuffer& buffer, int64_t elements, int64_t elementBytes) {
  return buffer.address() + static_cast<CUdeviceptr>(elements * elementBytes);
}

}  // namespace

// One emitted module and its executor.
struct GpuTrainer::Module {
  CudaModule code;
  std::unique_ptr<cuda::ModuleExecutor> executor;
};

GpuTrainer::Module& GpuTrainer::module(const std::string& name) { return *modules_.at(name); }

GpuTrainer::~GpuTrainer() = default;

GpuTrainer::GpuTrainer(const std::string& diagramsDir, const Gpt2Weights& weights, int64_t B, int64_t T,
                       GpuTrainerOptions options)
    : GpuTrainer(diagramsDir, weights.config, [&weights]() -> const Gpt2Weights& { return weights; }, B, T,
                 std::move(options)) {}

GpuTrainer::GpuTrainer(const std::string& diagramsDir, const Gpt2Config& config,
                       const std::function<const Gpt2Weights&()>& model, int64_t B, int64_t T, GpuTrainerOptions options)
    : config_(config), B_(B), T_(T), options_(std::move(options)), started_(Clock::now()), context_(options_.gpu) {
  if (T > config_.T)
    throw std::invalid_argument(fmt::format("sequence length {} exceeds the model's maximum {}", T, config_.T));
  stream_ = std::make_unique<cuda::Stream>();
  const int processes = options_.dataParallel ? options_.dataParallel->processes : 1;
  const bool sharded = options_.dataParallel && options_.dataParallel->zeroStage == 1;
  if (options_.dataParallel)
    communicator_ = std::make_unique<cuda::NcclCommunicator>(options_.dataParallel->id, options_.dataParallel->rank,
                                                             processes);
  startup_.contextSeconds = secondsSince(started_);
  const Target target = loadTargetFor(context_.arch(), context_.name());
  peakFlops_ = target.unit("tensor_bf16").peak;
  try {
    powerMeter_ = std::make_unique<cuda::PowerMeter>(context_.device());
  } catch (const cuda::NvmlUnavailable&) {
    // No energy column then: the step runs the same.
  }
  startup_.device = context_.name();
  startup_.arch = context_.arch();

  // The packed layout: parameter order, each aligned.
  for (const Gpt2Parameter& p : gpt2Parameters(config_)) {
    const int64_t count = p.type.elementCount();
    // The matrices decay: parameters with an in and an out axis, as the CPU path.
    const bool matrix = p.type.axes.size() >= 2 && !(p.type.axes.size() == 2 && p.type.axes[0].name == "l");
    slices_.push_back({p.name, p.member, packedCount_, count, matrix});
    parameterCount_ += count;
    packedCount_ += (count + kParameterAlignment - 1) / kParameterAlignment * kParameterAlignment;
  }
  // Whole aligned shards, one per process.
  const int64_t shardUnit = kParameterAlignment * processes;
  packedCount_ = (packedCount_ + shardUnit - 1) / shardUnit * shardUnit;
  shardCount_ = sharded ? packedCount_ / processes : packedCount_;
  shardOffset_ = sharded ? options_.dataParallel->rank * shardCount_ : 0;

  // The master weights are packed on the host from the model beside the
  // planning (d48's 1.56B parameters took 5.5 s packed after the compiling);
  // uploaded once the device memory is there.
  // A fresh model is made on the device instead (device_start.h).
  std::future<std::unique_ptr<float[]>> packing;
  if (!options_.startSeed) packing = std::async(std::launch::async, [this, &model] { return packedMaster(model()); });

  std::set<std::string> gradients;
  for (const Slice& s : slices_) gradients.insert("grad_" + s.name);
  planModules(diagramsDir, target, B, T, sharded, gradients);
  const int64_t evalRows = options_.tokenLossRows;
  startup_.stepLaunches = static_cast<int64_t>(module("step").code.launches.size());

  // Device memory: the packed arrays, then the arena. Checked against what
  // is free first, so that a model too big says so with the sizes.
  const int64_t storageBytes = options_.bf16 ? 2 : 4;
  const int64_t packedF32 = packedCount_ * 4, shardF32 = shardCount_ * 4;
  const int64_t tokenBytes = B * T * 4, evalTokenBytes = evalRows * T * 4;
  // The optimizer's state (master weights, moments) updated in place where
  // its plan lets each next value take the present one's memory (one launch
  // reads each element before it writes it): one copy each, else two, used
  // in turns.
  {
    const CudaModule& optimizer = module("optimizer").code;
    const MemoryPlan plan = planMemory(optimizer, graphInputsAndOutputs(optimizer));
    stateInPlace_ = callerMayShare(optimizer, plan, "w_next", "w") && callerMayShare(optimizer, plan, "m_next", "m") &&
                    callerMayShare(optimizer, plan, "v_next", "v");
  }
  const int stateCopies = stateInPlace_ ? 1 : 2;
  const int64_t fixedBytes = packedCount_ * storageBytes + 3 * stateCopies * shardF32 /* master, moments */ +
                             shardCount_ /* the decay mask, a byte each */ +
                             packedF32 /* gradient */ + 2 * tokenBytes + 2 * evalTokenBytes + T * 4 + kSlotCount * 16;
  startup_.gradientBytes = packedF32;

  auto allocate = [&](int64_t bytes, const char* what) {
    try {
      return cuda::DeviceBuffer(static_cast<size_t>(bytes));
    } catch (const cuda::CudaError& e) {
      if (e.result() != CUDA_ERROR_OUT_OF_MEMORY) throw;
      size_t free = 0, total = 0;
      cuda::driver().memGetInfo(&free, &total);
      throw std::runtime_error(fmt::format(
          "out of device memory allocating {} ({:.2f} GiB): {:.2f} GiB free of {:.2f} GiB on {}. Try a smaller "
          "micro-batch (-b {}, with -d keeping the tokens per step), a shorter sequence (-t), or a smaller model",
          what, gib(bytes), gib(static_cast<int64_t>(free)), gib(static_cast<int64_t>(total)), context_.name(),
          std::max<int64_t>(1, B / 2)));
    }
  };

  auto allocateStart = Clock::now();
  params_ = allocate(packedCount_ * storageBytes, "the step's parameters");
  for (int i = 0; i < stateCopies; ++i) {
    master_[i] = allocate(shardF32, "master weights");
    m_[i] = allocate(shardF32, "AdamW's first moments");
    v_[i] = allocate(shardF32, "AdamW's second moments");
  }
  gradient_ = allocate(packedF32, "gradients");
  decayMask_ = allocate(shardCount_, "the weight-decay mask");
  tokens_ = allocate(tokenBytes, "tokens");
  targets_ = allocate(tokenBytes, "targets");
  sampleTokens_ = allocate(T * 4, "the sampler's tokens");
  evalTokens_ = allocate(evalTokenBytes, "HellaSwag's tokens");
  evalTargets_ = allocate(evalTokenBytes, "HellaSwag's targets");
  scalars_ = allocate(kSlotCount * 16, "scalars");
  // Packing pads stay zero: zero gradients, zero moments, zero weights.
  for (cuda::DeviceBuffer* b : {&params_, &master_[0], &master_[1], &m_[0], &m_[1], &v_[0], &v_[1], &gradient_,
                                &tokens_, &targets_, &sampleTokens_, &evalTokens_, &evalTargets_, &scalars_})
    if (b->bytes() > 0) b->fillBytes(0);
  startup_.allocateSeconds = secondsSince(allocateStart);

  const auto executorsStart = Clock::now();
  auto slot = [&](int s) { return scalars_.address() + static_cast<CUdeviceptr>(16 * s); };
  auto parameterBindings = [&](std::map<std::string, CUdeviceptr>& b) {
    for (const Slice& s : slices_) b[s.name] = at(params_, s.offset, storageBytes);
  };
  {
    std::map<std::string, CUdeviceptr> b = {{"tokens", tokens_.address()}, {"targets", targets_.address()},
                                            {"loss", slot(kStepLoss)}};
    parameterBindings(b);
    for (const Slice& s : slices_) b["grad_" + s.name] = at(gradient_, s.offset, 4);
    module("step").executor = std::make_unique<cuda::ModuleExecutor>(module("step").code, b);
  }
  {
    std::map<std::string, CUdeviceptr> b = {{"tokens", tokens_.address()}, {"targets", targets_.address()},
                                            {"loss", slot(kEvalLoss)}};
    parameterBindings(b);
    module("eval").executor = std::make_unique<cuda::ModuleExecutor>(module("eval").code, b);
  }
  {
    std::map<std::string, CUdeviceptr> b = {{"tokens", sampleTokens_.address()}};
    parameterBindings(b);
    module("logits").executor = std::make_unique<cuda::ModuleExecutor>(module("logits").code, b);
  }
  if (evalRows > 0) {
    std::map<std::string, CUdeviceptr> b = {{"tokens", evalTokens_.address()}, {"targets", evalTargets_.address()}};
    parameterBindings(b);
    module("token_losses").executor = std::make_unique<cuda::ModuleExecutor>(module("token_losses").code, b);
  }
  // The optimizer reads its share of the gradient; the sharded one reads the
  // sum of the squares the processes' shards add up to.
  const CUdeviceptr gradientShard = at(gradient_, shardOffset_, 4);
  std::map<std::string, CUdeviceptr> optimizerBindings = {
      {"w", master_[0].address()}, {"g", gradientShard}, {"m", m_[0].address()}, {"v", v_[0].address()},
      {"decay_mask", decayMask_.address()}, {"lr", slot(kLearningRate)}, {"beta1", slot(kBeta1)},
      {"beta2", slot(kBeta2)}, {"eps", slot(kEps)}, {"weight_decay", slot(kWeightDecay)}, {"t", slot(kStepNumber)},
      {"max_norm", slot(kMaxNorm)}, {"w_next", master_[stateCopies - 1].address()},
      {"m_next", m_[stateCopies - 1].address()}, {"v_next", v_[stateCopies - 1].address()}, {"grad_norm", slot(kGradNorm)}};
  if (sharded) {
    optimizerBindings["squares"] = slot(kGradSquares);
    module("squares").executor = std::make_unique<cuda::ModuleExecutor>(
        module("squares").code,
        std::map<std::string, CUdeviceptr>{{"g", gradientShard}, {"squares", slot(kGradSquares)}});
  }
  module("optimizer").executor = std::make_unique<cuda::ModuleExecutor>(module("optimizer").code, optimizerBindings);
  module("to_params").executor = std::make_unique<cuda::ModuleExecutor>(
      module("to_params").code,
      std::map<std::string, CUdeviceptr>{{"w", master_[0].address()}, {"p", at(params_, shardOffset_, storageBytes)}});
  // The accumulator's arrays are bound when first used (allocated then).
  module("accumulate").executor = std::make_unique<cuda::ModuleExecutor>(
      module("accumulate").code,
      std::map<std::string, CUdeviceptr>{{"acc", gradient_.address()}, {"g", gradient_.address()},
                                         {"scale", slot(kAccumulateScale)}, {"acc_next", gradient_.address()}});

  int64_t arenaBytes = 0;
  for (const auto& [name, m] : modules_) {
    arenaBytes = std::max(arenaBytes, m->executor->memoryPlan().arenaBytes);
    startup_.arenaSeparateBytes = std::max(startup_.arenaSeparateBytes, m->executor->memoryPlan().separateBytes);
  }
  startup_.executorsSeconds = secondsSince(executorsStart);
  allocateStart = Clock::now();
  arena_ = allocate(arenaBytes, fmt::format("the activations' arena (B={}, T={})", B, T).c_str());
  startup_.allocateSeconds += secondsSince(allocateStart);
  startup_.arenaBytes = arenaBytes;
  startup_.deviceBytes = fixedBytes + arenaBytes;

  // Compile (or find in the cache) every launch of every module at once, then
  // load each module's kernels.
  auto compileStart = Clock::now();
  std::vector<cuda::KernelSource> sources;
  std::vector<std::pair<std::string, size_t>> ranges;  // module, first source
  for (const auto& [name, m] : modules_) {
    ranges.push_back({name, sources.size()});
    for (cuda::KernelSource& s : cuda::kernelSources(m->code, context_.arch())) sources.push_back(std::move(s));
  }
  const size_t modulesEnd = sources.size();
  if (options_.startSeed) sources.push_back(deviceStartSource(context_.arch()));
  const cuda::KernelCache cache(options_.kernelCache.empty() ? cuda::KernelCache::defaultDirectory() : options_.kernelCache);
  cuda::JitResult jit = cuda::compileKernels(sources, &cache, options_.compileThreads, cuda::jitWorkersFromEnvironment());
  const auto loadStart = Clock::now();
  for (size_t i = 0; i < ranges.size(); ++i) {
    const size_t from = ranges[i].second, to = i + 1 < ranges.size() ? ranges[i + 1].second : modulesEnd;
    Module& m = module(ranges[i].first);
    m.executor->load(std::vector<cuda::JitKernel>(jit.kernels.begin() + static_cast<long>(from),
                                                  jit.kernels.begin() + static_cast<long>(to)));
    m.executor->setArena(arena_.address(), arena_.bytes());
  }
  startup_.jit = jit.summary;
  if (communicator_ && !sharded && options_.dataParallel->overlap) {
    overlappedReduction_ = std::make_unique<OverlappedReduction>(*module("step").executor, gradients, *communicator_);
    startup_.reductionBuckets = static_cast<int>(overlappedReduction_->plan().buckets.size());
    startup_.overlappedBytes = overlappedReduction_->plan().overlappedBytes;
  }
  startup_.loadSeconds = secondsSince(loadStart);
  startup_.compileSeconds = secondsSince(compileStart);
  const auto weightsStart = Clock::now();

  // The state: master weights made on the device from the seed, or from the
  // model (packed beside the planning); moments zero, the decay mask.
  if (options_.startSeed) {
    std::vector<PackedStart> starts;
    for (const Gpt2ParameterStart& s : gpt2Start(config_, *options_.startSeed))
      for (const Slice& slice : slices_)
        if (slice.member == s.parameter.member) starts.push_back({s, slice.offset});
    cuda::LoadedKernels start({jit.kernels.back()});
    fillStart(start["llmc_gpt2_start"], master_[0].address(), shardOffset_, shardCount_, starts, stream_->get());
    stream_->synchronize();
    checkStart(master_[0].address(), shardOffset_, shardCount_, starts);
    startup_.weightsMadeOnDevice = true;
  } else {
    const std::unique_ptr<float[]> master = packing.get();
    startup_.packWaitSeconds = secondsSince(weightsStart);
    master_[0].copyFromHost(master.get() + shardOffset_, static_cast<size_t>(shardF32));
  }
  setDecayMask();
  module("to_params").executor->run(stream_->get());
  gatherParameters();
  stream_->synchronize();
  startup_.weightsSeconds = secondsSince(weightsStart);
}

// Every module planned and emitted from its diagram, or read back from the
// module cache when the same diagrams, sizes and options were planned before.
void GpuTrainer::planModules(const std::string& diagramsDir, const Target& target, int64_t B, int64_t T,
                             bool sharded, const std::set<std::string>& gradients) {
  auto planStart = Clock::now();
  const StorageType storage = options_.bf16 ? StorageType::BF16 : StorageType::F32;
  CostOptions cost;
  cost.storageBytes = options_.bf16 ? 2 : 4;
  CostOptions costF32;
  costF32.storageBytes = 4;
  const cuda::ModuleCache plans(options_.kernelCache.empty() ? cuda::ModuleCache::defaultDirectory()
                                                             : options_.kernelCache / "plans");
  struct ModulePlan {
    std::string name, file, entry;
    SizeBindings sizes;
    bool grad;
    StorageType storage;
    CostOptions cost;
    std::set<std::string> f32Values;
  };
  auto emit = [&](const ModulePlan& plan, bool& hit) {
    std::string description = fmt::format("{} {} device={} grad={} storage={} cost={} recompute={} hold-less={}",
                                          plan.file, plan.entry, target.device, plan.grad,
                                          plan.storage == StorageType::BF16 ? "bf16" : "f32", plan.cost.storageBytes,
                                          options_.recompute, options_.holdLess);
    for (const auto& [name, size] : plan.sizes) description += fmt::format(" {}={}", name, size);
    for (const std::string& v : plan.f32Values) description += " f32:" + v;
    auto m = std::make_unique<Module>();
    m->code = plans.findOrPlan(
        cuda::moduleCacheKey(diagramsDir, description, target.file),
        [&] {
          PipelineOptions p;
          p.path = diagramsDir + "/" + plan.file;
          p.entry = plan.entry;
          p.sizes = plan.sizes;
          p.grad = plan.grad;
          p.target = &target;
          p.cost = plan.cost;
          p.recompute = options_.recompute;
          p.remaking.holdLess = options_.holdLess;
          const Graph graph = compileToIR(p);
          EmitOptions e;
          e.storage = plan.storage;
          e.f32Values = plan.f32Values;
          return emitCuda(graph, lowerKernels(graph, target, plan.cost, e), target, e);
        },
        &hit);
    return m;
  };
  const SizeBindings packedSize = {{"N", packedCount_}}, shardSize = {{"N", shardCount_}};
  std::vector<ModulePlan> toPlan = {
      {"step", "gpt2/model.dg", "gpt2", config_.sizes(B, T), true, storage, cost, gradients},
      {"eval", "gpt2/model.dg", "gpt2", config_.sizes(B, T), false, storage, cost, {}},
      {"logits", "gpt2/model.dg", "gpt2_logits", config_.sizes(1, T), false, storage, cost, {"logits"}}};
  const int64_t evalRows = options_.tokenLossRows;
  if (evalRows > 0)
    toPlan.push_back({"token_losses", "gpt2/model.dg", "gpt2_token_losses", config_.sizes(evalRows, T), false, storage,
                      cost, {"losses"}});
  if (sharded) {
    toPlan.push_back({"squares", "gpt2/optimizer.dg", "gradient_squares", shardSize, false, StorageType::F32, costF32, {}});
    toPlan.push_back({"optimizer", "gpt2/optimizer.dg", "clipped_adamw", shardSize, false, StorageType::F32, costF32, {}});
  } else {
    toPlan.push_back(
        {"optimizer", "gpt2/optimizer.dg", "optimizer_step", packedSize, false, StorageType::F32, costF32, {}});
  }
  toPlan.push_back({"to_params", "gpt2/mixed_precision.dg", "master_to_params", shardSize, false, storage, cost, {"w"}});
  toPlan.push_back({"accumulate", "gpt2/mixed_precision.dg", "accumulate_gradient", packedSize, false, StorageType::F32,
                    costF32, {}});
  // The modules are planned at once, a thread each: the step's takes longest
  // (d48: most of the planning), the others finish beside it. Planning is a
  // pure function of its diagram, sizes and target.
  std::vector<char> hits(toPlan.size(), 0);
  std::vector<std::future<std::unique_ptr<Module>>> planned;
  for (size_t i = 0; i < toPlan.size(); ++i)
    planned.push_back(std::async(std::launch::async, [&, i] {
      bool hit = false;
      auto m = emit(toPlan[i], hit);
      hits[i] = hit;
      return m;
    }));
  for (size_t i = 0; i < toPlan.size(); ++i) {
    modules_[toPlan[i].name] = planned[i].get();
    startup_.plansFromCache += hits[i];
  }
  startup_.planSeconds = secondsSince(planStart);
  startup_.modules = static_cast<int>(modules_.size());
}

// The parameters shared out to half the machine's threads (one thread takes
// seconds for GPT-2's 124M), the planning's threads beside them on the rest.
// Left uninitialised: each thread first touches (and so faults in) the pages
// of its own parameters and their pads, packed straight from the model (no
// per-parameter copy in between: d12's would be 2 GB of doubles).
std::unique_ptr<float[]> GpuTrainer::packedMaster(const Gpt2Weights& weights) const {
  if (weights.config.L != config_.L || weights.config.C != config_.C || weights.config.Vp != config_.Vp ||
      weights.config.T != config_.T)
    throw std::invalid_argument("GpuTrainer: the model is not of the configuration it was planned for");
  std::unique_ptr<float[]> master(new float[static_cast<size_t>(packedCount_)]);
  std::atomic<size_t> next{0};
  auto pack = [&] {
    for (size_t k; (k = next++) < slices_.size();) {
      const Slice& slice = slices_[k];
      const int64_t end = k + 1 < slices_.size() ? slices_[k + 1].offset : packedCount_;  // the pad up to the next
      const std::vector<double>& data = (weights.*slice.member).data;
      std::transform(data.begin(), data.end(), master.get() + slice.offset, [](double v) { return static_cast<float>(v); });
      std::fill(master.get() + slice.offset + slice.count, master.get() + end, 0.0f);
    }
  };
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency() / 2, 1, slices_.size());
  {
    std::vector<std::jthread> helpers;
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(pack);
    pack();
  }
  return master;
}

// On the device, range by range (a bool a parameter): made on the host and
// uploaded, d48's f32 mask (6.2 GB) took seconds.
void GpuTrainer::setDecayMask() {
  decayMask_.fillBytes(0);
  const int64_t shardEnd = shardOffset_ + shardCount_;
  for (const Slice& s : slices_) {
    const int64_t from = std::max(s.offset, shardOffset_), to = std::min(s.offset + s.count, shardEnd);
    if (s.decays && from < to)
      decayMask_.fillBytes(static_cast<size_t>(from - shardOffset_), static_cast<size_t>(to - from), 1);
  }
}

std::vector<float> GpuTrainer::packed(const std::vector<double>& perParameter) const {
  if (static_cast<int64_t>(perParameter.size()) != parameterCount_)
    throw std::invalid_argument(fmt::format("{} values for {} parameters", perParameter.size(), parameterCount_));
  std::vector<float> out(static_cast<size_t>(packedCount_), 0.0f);
  size_t from = 0;
  for (const Slice& s : slices_)
    for (int64_t i = 0; i < s.count; ++i) out[static_cast<size_t>(s.offset + i)] = static_cast<float>(perParameter[from++]);
  return out;
}

void GpuTrainer::uploadTokens(cuda::DeviceBuffer& buffer, const std::vector<int32_t>& tokens, int64_t expected) {
  if (static_cast<int64_t>(tokens.size()) != expected)
    throw std::invalid_argument(fmt::format("expected {} tokens, got {}", expected, tokens.size()));
  for (int32_t id : tokens)
    if (id < 0 || id >= config_.V)
      throw std::invalid_argument(fmt::format("token {} is outside the vocabulary of {}", id, config_.V));
  buffer.copyFromHost(tokens.data(), tokens.size() * sizeof(int32_t));
}

void GpuTrainer::setScalar(int slot, float value) {
  cuda::check(cuda::driver().memcpyHtoD(scalars_.address() + static_cast<CUdeviceptr>(16 * slot), &value, sizeof value),
              "cuMemcpyHtoD(scalar)");
}

float GpuTrainer::readScalar(int slot) const {
  float value = 0;
  cuda::check(cuda::driver().memcpyDtoH(&value, scalars_.address() + static_cast<CUdeviceptr>(16 * slot), sizeof value),
              "cuMemcpyDtoH(scalar)");
  return value;
}

bool GpuTrainer::sharded() const { return options_.dataParallel && options_.dataParallel->zeroStage == 1; }

cuda::NcclDataType GpuTrainer::storageType() const { return options_.bf16 ? cuda::kNcclBfloat16 : cuda::kNcclFloat32; }

void GpuTrainer::gatherParameters() {
  if (!sharded()) return;
  const int64_t storageBytes = options_.bf16 ? 2 : 4;
  communicator_->allGather(at(params_, shardOffset_, storageBytes), params_.address(), static_cast<size_t>(shardCount_),
                           storageType(), stream_->get());
}

void GpuTrainer::averageScalar(int slot) {
  if (!communicator_) return;
  communicator_->allReduce(scalars_.address() + static_cast<CUdeviceptr>(16 * slot), 1, cuda::kNcclFloat32,
                           cuda::kNcclAverage, stream_->get());
}

void GpuTrainer::runStep(bool reduceGradients) {
  cuda::ModuleExecutor& step = *module("step").executor;
  auto record = [&](CUstream s) {
    if (reduceGradients) overlappedReduction_->run(step, s);
    else step.run(s);
  };
  // The first run goes launch by launch (kernels opt in to their shared
  // memory then); later ones replay it captured as one graph.
  if (!options_.cudaGraph || stepRuns_ == 0) {
    record(stream_->get());
  } else {
    std::unique_ptr<cuda::CapturedGraph>& graph = reduceGradients ? reducingStepGraph_ : stepGraph_;
    if (!graph) graph = std::make_unique<cuda::CapturedGraph>(*stream_, record);
    graph->launch(*stream_);
  }
  ++stepRuns_;
}

double GpuTrainer::forwardBackward(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                   double gradScale) {
  uploadTokens(tokens_, inputs, B_ * T_);
  uploadTokens(targets_, targets, B_ * T_);
  // One micro-batch per optimizer step: its gradient is the step's, averaged
  // over the processes as the backward makes it.
  gradientReduced_ = overlappedReduction_ && gradScale == 1.0 && microBatches_ == 0;
  runStep(gradientReduced_);
  // One micro-batch per step with scale 1: the optimizer reads the step's
  // gradient as it is. Otherwise the scaled gradients add up.
  if (gradScale != 1.0 || microBatches_ > 0) {
    if (gradScale == 1.0)
      throw std::logic_error("GpuTrainer: a second micro-batch with gradScale 1 (scale each by 1/micro-batches)");
    if (!accumulated_[0].bytes()) {
      for (cuda::DeviceBuffer& b : accumulated_) b = cuda::DeviceBuffer(static_cast<size_t>(packedCount_ * 4));
      startup_.deviceBytes += 2 * packedCount_ * 4;
    }
    const int into = accumulatedIn_ < 0 ? 0 : 1 - accumulatedIn_;
    if (accumulatedIn_ < 0)
      cuda::check(cuda::driver().memsetD8Async(accumulated_[1].address(), 0, accumulated_[1].bytes(), stream_->get()),
                  "cuMemsetD8Async");
    cuda::ModuleExecutor& accumulate = *module("accumulate").executor;
    accumulate.rebind("acc", accumulated_[1 - into].address());
    accumulate.rebind("acc_next", accumulated_[into].address());
    stream_->synchronize();  // the scale slot is written by a synchronous copy
    setScalar(kAccumulateScale, static_cast<float>(gradScale));
    accumulate.run(stream_->get());
    accumulatedIn_ = into;
  }
  ++microBatches_;
  averageScalar(kStepLoss);
  stream_->synchronize();
  return readScalar(kStepLoss);
}

double GpuTrainer::loss(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) {
  uploadTokens(tokens_, inputs, B_ * T_);
  uploadTokens(targets_, targets, B_ * T_);
  module("eval").executor->run(stream_->get());
  averageScalar(kEvalLoss);
  stream_->synchronize();
  return readScalar(kEvalLoss);
}

double GpuTrainer::optimizerStep(const OptimizerSettings& s) {
  if (microBatches_ == 0) throw std::logic_error("GpuTrainer: an optimizer step without a gradient");
  state_.step += 1;
  setScalar(kLearningRate, static_cast<float>(s.learningRate));
  setScalar(kBeta1, static_cast<float>(s.beta1));
  setScalar(kBeta2, static_cast<float>(s.beta2));
  setScalar(kEps, static_cast<float>(s.eps));
  setScalar(kWeightDecay, static_cast<float>(s.weightDecay));
  setScalar(kStepNumber, static_cast<float>(state_.step));
  setScalar(kMaxNorm, static_cast<float>(s.maxGradNorm));
  const CUdeviceptr gradient = accumulatedIn_ < 0 ? gradient_.address() : accumulated_[accumulatedIn_].address();
  const CUdeviceptr gradientShard = gradient + static_cast<CUdeviceptr>(shardOffset_ * 4);
  // The processes' gradients averaged: whole (each updates all parameters) or
  // this process's shard of it (ZeRO-1), timed on the GPU.
  std::optional<cuda::Event> communicationStart, communicationEnd;
  if (communicator_ && !gradientReduced_) {
    communicationStart.emplace();
    communicationEnd.emplace();
    communicationStart->record(stream_->get());
    if (sharded())
      communicator_->reduceScatter(gradient, gradientShard, static_cast<size_t>(shardCount_), cuda::kNcclFloat32,
                                   cuda::kNcclAverage, stream_->get());
    else
      communicator_->allReduce(gradient, static_cast<size_t>(packedCount_), cuda::kNcclFloat32, cuda::kNcclAverage,
                               stream_->get());
    communicationEnd->record(stream_->get());
  }
  if (sharded()) {
    // The global norm from every shard's sum of squares.
    cuda::ModuleExecutor& squares = *module("squares").executor;
    squares.rebind("g", gradientShard);
    squares.run(stream_->get());
    communicator_->allReduce(scalars_.address() + static_cast<CUdeviceptr>(16 * kGradSquares), 1, cuda::kNcclFloat32,
                             cuda::kNcclSum, stream_->get());
  }
  const int next = stateInPlace_ ? current_ : 1 - current_;
  cuda::ModuleExecutor& optimizer = *module("optimizer").executor;
  optimizer.rebind("w", master_[current_].address());
  optimizer.rebind("m", m_[current_].address());
  optimizer.rebind("v", v_[current_].address());
  optimizer.rebind("g", gradientShard);
  optimizer.rebind("w_next", master_[next].address());
  optimizer.rebind("m_next", m_[next].address());
  optimizer.rebind("v_next", v_[next].address());
  optimizer.run(stream_->get());
  cuda::ModuleExecutor& toParams = *module("to_params").executor;
  toParams.rebind("w", master_[next].address());
  toParams.run(stream_->get());
  std::optional<cuda::Event> gatherStart, gatherEnd;
  if (sharded()) {
    gatherStart.emplace();
    gatherEnd.emplace();
    gatherStart->record(stream_->get());
    gatherParameters();
    gatherEnd->record(stream_->get());
  }
  stream_->synchronize();
  communicationMilliseconds_.reset();
  if (communicationStart)
    communicationMilliseconds_ = cuda::Event::elapsedMilliseconds(*communicationStart, *communicationEnd) +
                                 (gatherStart ? cuda::Event::elapsedMilliseconds(*gatherStart, *gatherEnd) : 0.0);
  gradientReduced_ = false;
  current_ = next;
  microBatches_ = 0;
  accumulatedIn_ = -1;
  hostWeights_.reset();
  return readScalar(kGradNorm);
}

std::vector<double> GpuTrainer::nextTokenLogits(const std::vector<int32_t>& context) {
  const int64_t length = static_cast<int64_t>(context.size());
  if (length < 1 || length > T_)
    throw std::invalid_argument(fmt::format("a context of {} tokens does not fit the sampler (1 to {})", length, T_));
  // Causal attention: the positions after the context do not change the
  // scores at its last one; they are padded with token 0.
  std::vector<int32_t> padded = context;
  padded.resize(static_cast<size_t>(T_), 0);
  uploadTokens(sampleTokens_, padded, T_);
  cuda::ModuleExecutor& logits = *module("logits").executor;
  logits.run(stream_->get());
  stream_->synchronize();
  std::vector<float> row(static_cast<size_t>(config_.Vp));
  const CUdeviceptr address = logits.address("logits") + static_cast<CUdeviceptr>((length - 1) * config_.Vp * 4);
  cuda::check(cuda::driver().memcpyDtoH(row.data(), address, row.size() * sizeof(float)), "cuMemcpyDtoH(logits)");
  return std::vector<double>(row.begin(), row.end());
}

std::vector<double> GpuTrainer::tokenLosses(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                            int64_t rows) {
  if (rows != options_.tokenLossRows)
    throw std::invalid_argument(fmt::format("GpuTrainer: per-position losses of {} rows were planned, not {}",
                                            options_.tokenLossRows, rows));
  uploadTokens(evalTokens_, inputs, rows * T_);
  uploadTokens(evalTargets_, targets, rows * T_);
  cuda::ModuleExecutor& losses = *module("token_losses").executor;
  losses.run(stream_->get());
  stream_->synchronize();
  std::vector<float> values(static_cast<size_t>(rows * T_));
  cuda::check(cuda::driver().memcpyDtoH(values.data(), losses.address("losses"), values.size() * sizeof(float)),
              "cuMemcpyDtoH(losses)");
  return std::vector<double>(values.begin(), values.end());
}

const Gpt2Weights& GpuTrainer::weights() {
  if (hostWeights_) return *hostWeights_;
  const std::vector<float> flat = gathered(master_[current_]);
  Gpt2Weights w = zeroGpt2Weights(config_);
  for (const Slice& s : slices_) {
    std::vector<double>& data = (w.*s.member).data;
    for (int64_t i = 0; i < s.count; ++i) data[static_cast<size_t>(i)] = flat[static_cast<size_t>(s.offset + i)];
  }
  hostWeights_ = std::move(w);
  return *hostWeights_;
}

std::vector<float> GpuTrainer::gathered(const cuda::DeviceBuffer& shard) {
  std::vector<float> flat(static_cast<size_t>(packedCount_));
  if (!sharded()) {
    shard.copyToHost(flat.data(), flat.size() * sizeof(float));
    return flat;
  }
  // Every process calls this at the same point of the run (a checkpoint):
  // the gather is a collective.
  cuda::DeviceBuffer whole(static_cast<size_t>(packedCount_ * 4));
  communicator_->allGather(shard.address(), whole.address(), static_cast<size_t>(shardCount_), cuda::kNcclFloat32,
                           stream_->get());
  stream_->synchronize();
  whole.copyToHost(flat.data(), flat.size() * sizeof(float));
  return flat;
}

std::vector<double> GpuTrainer::unpacked(const cuda::DeviceBuffer& buffer) const {
  std::vector<float> flat(static_cast<size_t>(packedCount_));
  buffer.copyToHost(flat.data(), flat.size() * sizeof(float));
  return unpackedFlat(flat);
}

std::vector<double> GpuTrainer::unpackedFlat(const std::vector<float>& flat) const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(parameterCount_));
  for (const Slice& s : slices_) out.insert(out.end(), flat.begin() + s.offset, flat.begin() + s.offset + s.count);
  return out;
}

const OptimizerState& GpuTrainer::optimizerState() {
  state_.m = unpackedFlat(gathered(m_[current_]));
  state_.v = unpackedFlat(gathered(v_[current_]));
  return state_;
}

std::vector<double> GpuTrainer::gradient() {
  if (microBatches_ == 0) throw std::logic_error("GpuTrainer::gradient: no micro-batch since the last optimizer step");
  return unpacked(accumulatedIn_ < 0 ? gradient_ : accumulated_[accumulatedIn_]);
}

void GpuTrainer::restoreOptimizerState(OptimizerState state) {
  if (static_cast<int64_t>(state.m.size()) != parameterCount_ || static_cast<int64_t>(state.v.size()) != parameterCount_)
    throw std::invalid_argument(fmt::format("optimizer state holds {} values, the model has {} parameters",
                                            state.m.size(), parameterCount_));
  m_[current_].copyFromHost(packed(state.m).data() + shardOffset_, static_cast<size_t>(shardCount_ * 4));
  v_[current_].copyFromHost(packed(state.v).data() + shardOffset_, static_cast<size_t>(shardCount_ * 4));
  state_.step = state.step;
}

std::optional<uint64_t> GpuTrainer::energyMillijoules() const {
  if (!powerMeter_) return std::nullopt;
  try {
    return powerMeter_->millijoules();
  } catch (const cuda::NvmlUnavailable&) {
    return std::nullopt;  // a reading lost costs that step's energy column, never the run
  }
}

}  // namespace llmc
