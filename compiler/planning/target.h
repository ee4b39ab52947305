// Target architectures: what the partitioner and the performance model know
// about a GPU. The figures live in data files, compiler/targets/<arch>.json,
// one per architecture, each describing one or more devices of it; every
// figure there carries a note saying where it came from (datasheet, CUDA
// programming guide, PTX ISA, or a measurement), kept here in `sources`.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

// A malformed or missing target file, an unknown arch or device, a malformed
// LLMC_GEMM_TILE (lowering/gemm_tiles.h). The message names the file and, for
// a malformed file, the field (or the variable).
class TargetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where one instance of a memory level lives.
enum class LevelScope { Device, SM };

// One level of the memory hierarchy GMEM -> L2 -> SMEM -> registers.
struct MemoryLevel {
  std::string name;  // "GMEM", "L2", "SMEM", "REG"
  LevelScope scope = LevelScope::Device;
  int64_t capacity = 0;      // bytes of one instance (the device's for GMEM and L2, one SM's below)
  int64_t maxPerBlock = 0;   // bytes one thread block may use
  int64_t maxPerThread = 0;  // bytes one thread may use; 0 where there is no per-thread limit
  // Bytes per second the level delivers to the one below it (GMEM to L2, L2 to
  // the SMs, SMEM to registers, registers to the arithmetic units), summed over
  // the device. The performance model divides the bytes crossing a level by it.
  double bandwidth = 0;            // nominal
  double attainableBandwidth = 0;  // what good code reaches; the nominal figure where none is known
  // GMEM: seconds from a load's issue to its data, with the device far from
  // saturated; 0 where the file gives none. By Little's law a device with B
  // bytes in flight moves at most B / latency a second.
  double latency = 0;
};

// An arithmetic unit and its rate over the whole device. Floating-point rates
// count a fused multiply-add as 2 operations, as the datasheets do.
struct ComputeUnit {
  std::string name;  // "tensor_bf16", "tensor_f16", "tensor_tf32", "fp32", "sfu", "int32"
  double peak = 0;        // operations per second, nominal
  double attainable = 0;  // what good code reaches; the peak where no better figure is known
  // Tensor units: what warp-level mma.sync reaches where the device's best
  // instruction is another (Hopper's warpgroup wgmma); `attainable` where not given.
  double warpMmaAttainable = 0;
};

// Who issues a tensor-core instruction: one warp, or a warpgroup of 4 warps.
enum class MmaIssuer { Warp, Warpgroup };
enum class OperandSource { Registers, SMEM };

// One tensor-core matrix instruction: D[m,n] += A[m,k] * B[k,n]. A tile axis
// that an instruction covers must be a multiple of its m, n or k.
struct TensorCoreShape {
  std::string instruction;  // PTX mnemonic: "mma.sync.aligned.m16n8k16", "wgmma.mma_async.sync.aligned"
  int m = 0;
  int nMin = 0, nMax = 0, nStep = 0;  // the n it accepts: nMin, nMin + nStep, ..., nMax
  int k = 0;
  std::string inputType;        // of A and B: "bf16", "f16", "tf32"
  std::string accumulatorType;  // of C and D: "f32"
  MmaIssuer executedBy = MmaIssuer::Warp;
  std::vector<OperandSource> aFrom, bFrom;  // where A and B may be read from

  bool acceptsN(int n) const;
};

struct Target {
  std::string arch;    // "sm_80", "sm_90a"
  std::string device;  // a device of the data file ("H200"), or the driver's name for an unlisted one
  std::string file;    // the data file it was read from
  int computeCapabilityMajor = 0, computeCapabilityMinor = 0;

  int smCount = 0;
  double clockHz = 0;  // SM clock the per-clock figures are multiplied by (boost)

  std::vector<MemoryLevel> levels;  // top-down: GMEM, L2, SMEM, REG
  std::vector<ComputeUnit> units;
  std::vector<TensorCoreShape> tensorCoreShapes;

  int warpSize = 0;
  int warpsPerWarpgroup = 0;
  int maxThreadsPerBlock = 0;
  int maxWarpsPerSM = 0;   // resident warps
  int maxBlocksPerSM = 0;  // resident blocks
  int maxClusterSize = 0;  // blocks per cluster (portable limit); 1: no clusters
  int registersPerSM = 0;  // 32-bit registers
  int maxRegistersPerBlock = 0;
  int maxRegistersPerThread = 0;

  int coalescingBytes = 0;    // a warp's global accesses should cover whole segments of this size
  int vectorAccessBytes = 0;  // widest load or store of one thread

  bool hasTMA = false;         // cp.async.bulk.tensor (the tensor memory accelerator)
  bool hasCpAsync = false;     // cp.async, GMEM -> SMEM without passing through registers
  bool hasSetmaxnreg = false;  // setmaxnreg: move registers between warpgroups

  // The link between GPUs of one node (data-parallel gradients): bytes per
  // second each way per GPU; 0 where the file gives none.
  std::string interconnect;
  double interconnectBandwidth = 0, interconnectAttainable = 0;

  double launchOverhead = 0;       // seconds per kernel launched on a stream
  double graphLaunchOverhead = 0;  // seconds per kernel node of a CUDA graph
  // Scalar f32 atomic adds to global memory the device completes a second,
  // to distinct addresses (a scatter-add's); 0 where the file gives none.
  double atomicAddsPerSecond = 0;
  // 8-byte reductions of f32 pairs (red.global.add.v2.f32) a second, where
  // blocks add whole tiles of partial sums (a row product's shares); 0: each
  // pair is two scalar adds.
  double pairAtomicAddsPerSecond = 0;
  // Seconds an f32 atomic add to an address waits for the one before it
  // there: adds to one address (blocks sharing out a sum) serialise in L2,
  // as do a split's adds to one 128-byte line (cost_model.cpp).
  double sameAddressAtomicSeconds = 0;
  // Seconds an SM takes to start each block it is given: a grid of many
  // small blocks is bound by ceil(blocks / SMs) of them; 0 where the file
  // gives none.
  double blockDispatchSeconds = 0;
  // What an SM moves a second for a blocked scan (planning/scan_layout.h):
  // a warp's 2- or 4-byte accesses at one position of 32 lines, 64 or 128
  // bytes a segment, a read and a write a point; 0 where the file gives none
  // (GMEM's attainable bandwidth shared by the SMs).
  double scanBytesPerSecondPerSM = 0;
  // The tensor-core tile library's GEMM on one SM (gemm_sm90.cuh, gemm_sm80.cuh;
  // lowering/gemm_tiles.h prices it): the first stage's load and the last
  // tile's epilogue around a block's work, beyond the launch; the bytes a
  // second one SM's stages are filled with from L2, and its epilogue drains
  // (fp32 accumulators staged, outputs stored); 0 where the file gives none.
  double tileFillSeconds = 0;
  double tileLoadBytesPerSecondPerSM = 0;
  double tileEpilogueBytesPerSecondPerSM = 0;
  // The epilogue's elementwise operations a second on one SM: its consumer
  // warps issue them one instruction a lane at a time, between the
  // accumulators' drain and the stores (a GELU and its derivative: 20 a
  // point); 0 where the file gives none.
  double tileEpilogueOpsPerSecondPerSM = 0;
  // A tensor-core stream's step (tensor_core_stream.h) beyond its products:
  // the wait for them, the elementwise work between, the next stage; 0
  // where the file gives none.
  double tensorStreamStepSeconds = 0;
  // The bytes a second the whole device's TMA reads of rows whose starts are
  // only 16, 32 or 64 bytes aligned (index: log2(alignment / 16)): a row
  // then straddles two 128-byte lines; 0 (no limit beyond L2's) where the
  // file gives none.
  double unalignedRowBandwidth[3] = {0, 0, 0};
  // The bytes a second the whole device's TMA moves from L2 into the tile
  // library's stages (the operands, each re-read by every tile along the
  // other dimension); 0 where the file gives none (the L2 level's rate).
  double tileL2BytesPerSecond = 0;
  // Whether the lowering prices the library's clusters of two blocks sharing
  // B (gemm_sm90.cuh) among a GEMM's tiles; LLMC_GEMM_TILE may name one either way.
  bool tileClusters = false;
  // One __syncthreads costs blockSyncBaseCycles + blockSyncCyclesPerWarp x the block's warps.
  double blockSyncBaseCycles = 0;
  double blockSyncCyclesPerWarp = 0;

  // The source note of each figure, keyed by its field in the data file with
  // the device's fields under "device." ("device.gmem.bandwidth_bytes_per_s",
  // "sm.max_warps_per_sm"). Figures read from a GPU say so.
  std::map<std::string, std::string> sources;

  const MemoryLevel& level(std::string_view name) const;  // throws TargetError if absent
  MemoryLevel& level(std::string_view name);
  const ComputeUnit& unit(std::string_view name) const;   // throws TargetError if absent
  bool hasUnit(std::string_view name) const;
  bool hasClusters() const { return maxClusterSize > 1; }
  bool hasWgmma() const;  // some tensor-core shape is issued by a warpgroup
  std::vector<TensorCoreShape> shapesFor(std::string_view inputType) const;
  bool hasShapesFor(std::string_view inputType) const;  // shapesFor(inputType) is not empty
  double blockSyncSeconds(int warps) const {
    return (blockSyncBaseCycles + blockSyncCyclesPerWarp * warps) / clockHz;
  }
};

// The folder of the target files: $LLMC_TARGETS if set, else an installed
// share/llmc/targets beside the executable, else the source tree's
// compiler/targets (common/data_folder.h). Throws TargetError when none exists.
std::string targetsDir();

// The architectures that have a data file, sorted: {"sm_80", "sm_90a"}.
std::vector<std::string> knownArchs();

// Reads a target. `archOrPath` is an arch name ("sm_90a") or the path of a
// .json file; `device` picks one of its devices (empty: the file's default).
// Throws TargetError naming the file (and field) for a malformed file, listing
// the known archs or devices for an unknown one.
Target loadTarget(const std::string& archOrPath, const std::string& device = "");

// The target of `arch` for the GPU the driver names `gpuName` ("NVIDIA H100
// 80GB HBM3"): the device of the arch's file whose device_names match it,
// else the file's default device; the file's figures as they are (a plan
// made for a device is the same on every one of its kind). What the tools
// that run on a GPU plan and price for: an H100 is not priced as an H200.
Target loadTargetFor(const std::string& arch, const std::string& gpuName);

// For --arch auto: the target of the first GPU present, read from its arch's
// data file, with what the driver reports (SM count, clock, memory sizes,
// memory bandwidth, thread and register limits) in place of the file's
// figures. The driver is opened at run time (libcuda.so.1), so that llmc needs
// no CUDA to build or to run without a GPU. Throws std::runtime_error
// "--arch auto: no CUDA GPU found (...): give --arch sm_80 or --arch sm_90a"
// when there is no driver or no GPU.
Target detectTarget();

}  // namespace llmc
