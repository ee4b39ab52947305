// gpu_path.h with the CUDA toolkit: GpuTrainer, started and described for
// llmc-train's log.
#include "gpu_path.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <future>

#include "cuda_context.h"
#include "cuda_driver.h"
#include "gpu_trainer.h"
#include "nccl_communicator.h"
#include "nccl_library.h"

namespace llmc {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// NCCL's id, made by rank 0 and read by the others (process_group.h).
cuda::NcclUniqueId exchangedNcclId(const ProcessPlace& place) {
  static_assert(sizeof(cuda::NcclUniqueId) == sizeof(NcclIdBytes));
  const NcclIdBytes bytes = exchangeNcclId(place, [] {
    const cuda::NcclUniqueId id = cuda::NcclCommunicator::newUniqueId();
    NcclIdBytes made;
    std::memcpy(made.data(), id.internal, made.size());
    return made;
  });
  cuda::NcclUniqueId id;
  std::memcpy(id.internal, bytes.data(), bytes.size());
  return id;
}

void printStartup(const GpuTrainer& gpu, const GpuPathOptions& o, const std::string& diagramsDir, double total) {
  const GpuStartup& s = gpu.startup();
  const ProcessPlace& place = o.place;
  if (place.size > 1)
    fmt::print("data-parallel: {} processes, one GPU each (this one GPU {}), ZeRO stage {}; NCCL {} from {}; "
               "{:.1f} MB of fp32 gradients averaged per step{}\n",
               place.size, place.gpu, o.zeroStage, cuda::nccl().version(), cuda::nccl().path,
               static_cast<double>(s.gradientBytes) / 1e6,
               s.reductionBuckets > 0
                   ? fmt::format(", in {} buckets beside the backward ({:.1f} MB start before its last launch)",
                                 s.reductionBuckets, static_cast<double>(s.overlappedBytes) / 1e6)
               : o.zeroStage == 1 ? ", reduce-scattered after the step"
                                  : ", after the step");
  fmt::print("device: {} ({}), {} storage{}\n", s.device, s.arch, o.bf16 ? "bf16 (fp32 master weights)" : "fp32",
             o.cudaGraph ? ", step replayed as a CUDA graph" : "");
  fmt::print("compiled the training step from {} in {:.2f} s: planned in {:.2f} s ({} of {} modules from the "
             "plan cache), kernels {}\n",
             diagramsDir, total, s.planSeconds, s.plansFromCache, s.modules, s.jit.describe());
  fmt::print("startup: CUDA context {:.2f} s, executors {:.2f} s, kernels loaded in {:.2f} s, device memory {:.2f} s, "
             "weights {:.2f} s ({}), the rest {:.2f} s\n",
             s.contextSeconds, s.executorsSeconds, s.loadSeconds, s.allocateSeconds, s.weightsSeconds,
             s.weightsMadeOnDevice ? "made on the device from the seed"
                                   : fmt::format("{:.2f} s of it waiting for their packing beside the planning",
                                                 s.packWaitSeconds),
             total - s.contextSeconds - s.executorsSeconds - s.planSeconds - s.jit.wallSeconds - s.loadSeconds -
                 s.allocateSeconds - s.weightsSeconds);
  fmt::print("device memory: {:.2f} GiB allocated ({} launches per step; activations arena {:.2f} GiB, "
             "{:.2f} GiB without the memory plan)\n",
             gib(s.deviceBytes), s.stepLaunches, gib(s.arenaBytes), gib(s.arenaSeparateBytes));
}

}  // namespace

void requireGpuPath(const std::string&) {}

int gpusOnThisNode() {
  try {
    int count = 0;
    cuda::check(cuda::driver().deviceGetCount(&count), "cuDeviceGetCount");
    return count;
  } catch (const NoGpuError&) {
    return 0;
  }
}

struct EarlyGpuContext::Making {
  std::future<std::unique_ptr<cuda::Context>> future;
  std::unique_ptr<cuda::Context> context;
};

EarlyGpuContext::EarlyGpuContext(int gpu) : making_(std::make_unique<Making>()) {
  making_->future = std::async(std::launch::async, [gpu]() -> std::unique_ptr<cuda::Context> {
    try {
      return std::make_unique<cuda::Context>(gpu);
    } catch (const std::exception&) {
      return nullptr;  // the trainer meets the same error and reports it
    }
  });
}

EarlyGpuContext::~EarlyGpuContext() = default;

bool EarlyGpuContext::ready() {
  if (making_->future.valid()) making_->context = making_->future.get();
  return making_->context != nullptr;
}

std::unique_ptr<DeviceTrainer> startGpuTrainer(const std::string& diagramsDir, const Gpt2Config& config,
                                               const std::function<const Gpt2Weights&()>& model, int64_t B,
                                               int64_t T, const GpuPathOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GpuTrainerOptions g;
  g.bf16 = options.bf16;
  g.cudaGraph = options.cudaGraph;
  g.recompute = options.recompute;
  g.holdLess = options.holdLess;
  g.tokenLossRows = options.tokenLossRows;
  g.startSeed = options.startSeed;
  g.gpu = options.place.gpu;
  const ProcessPlace& place = options.place;
  if (place.size > 1)
    g.dataParallel = GpuTrainerOptions::DataParallel{exchangedNcclId(place), place.rank, place.size,
                                                     options.zeroStage, options.overlap};
  auto gpu = std::make_unique<GpuTrainer>(diagramsDir, config, model, B, T, g);
  removeNcclIdFile(place);
  if (!options.quiet) printStartup(*gpu, options, diagramsDir, secondsSince(start));
  return gpu;
}

}  // namespace llmc
