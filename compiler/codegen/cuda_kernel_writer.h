// Writes the CUDA source of one launch (emit_cuda.h): the loop nest of its
// partition, with every value computed where the indices it depends on are
// known. Used by emitCuda; a launch is described by a LaunchPlan.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "planning/partition.h"

namespace llmc {

// How a stored value is held in GMEM.
struct StoredArray {
  std::string param;  // the kernel parameter's name
  std::string ctype;  // element type: float, llmc_bf16, int, unsigned short, unsigned char, double
  // Per axis, the distance in elements between neighbours along it: an array
  // that lies interleaved in a concatenation (codegen/concat_parts.h); empty:
  // row-major.
  std::vector<int64_t> strides = {};
};

struct LaunchPlan {
  enum class Kind {
    Tile,     // one block per tile of the group axes, threads over the tile's points
    Scatter,  // a scatter-add: one thread per value, atomic adds into a zeroed f32 array
    Clear,    // zero a stored array (before a scatter-add)
    Scan,     // a running aggregate with its prologue, as `scan` lays it out (planning/scan_layout.h)
  } kind = Kind::Tile;
  std::string name;
  std::set<NodeId> computed;     // values computed here; others are read from GMEM, or are views/constants
  std::vector<NodeId> outputs;   // Tile: the values it stores; Scatter, Clear: the scatter-add
  std::vector<Axis> groupAxes;   // Tile: tiled across blocks
  std::map<std::string, int64_t> tiles;
  std::string streamAxis;        // Tile: streamed with an accumulator (empty: none)
  int64_t streamChunk = 0;
  // Tile: reduced axes shared out across blocks (split-K): axis -> positions
  // per block. The outputs are plain sums over them: each block adds its
  // partial sums atomically into f32 arrays zeroed first.
  std::map<std::string, int64_t> splitTiles;
  // Tile: the lowering stage's tile where the launch runs as a tensor-core
  // GEMM (PlannedKernel::gemmTile).
  GemmTile gemmTile;
  // Scan: the layout the cost model priced (PlannedKernel::scan).
  std::optional<ScanLayout> scan;
};

struct WrittenKernel {
  std::string body;             // the function body, without the signature
  std::set<NodeId> reads;       // stored values it reads
  int64_t grid = 1;
  int block = 256;
  int64_t dynamicSmemBytes = 0;  // a CUDA-core launch's rows held in shared memory (planning/staged_rows.h)
  std::set<NodeId> stagedRows;   // the stored arrays whose rows it holds there
  std::string streamNote;       // how the stream was emitted, for the source's comment
  std::vector<std::string> tensorMaps;  // a stream's TMA tiles: the kernel's first parameters (TensorCoreStream::loadedTiles)
  // A GEMM epilogue's inputs whose address is the call's coordinates alone:
  // loaded by the functor's load() (raw 16 bytes, or a float, into an Inputs
  // member) before any column group is computed (gemm_common.cuh).
  struct EpilogueInput {
    std::string declaration;  // the member: "uint4 hidden_1"
    std::string load;         // load()'s statement, into registers
    std::string prefetch;     // prefetch()'s: the same into shared memory, by cp.async where it can
    bool atRows = false;      // its address has the call's row: loaded ahead where the library does (kInputBytes)
  };
  std::vector<EpilogueInput> epilogueInputs;
};

// What the device holds at once: threads (SMs x resident warps x 32) and
// blocks (SMs x resident blocks). A launch's threads should fill them to keep
// loads in flight.
struct DeviceResidency {
  int64_t threads = 0;  // 0: not known (no slices)
  int64_t blocks = 0;
  int64_t smemPerBlock = 0;  // bytes of shared memory a block may take (rows staged within it; 0: none staged)
  bool asyncCopies = false;  // cp.async: GMEM -> SMEM without registers (staged rows copied all at once)
};

// `names`: printedNames(graph), made once for all the launches of a module.
WrittenKernel writeKernel(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                          const std::vector<std::string>& names, DeviceResidency resident);

// A stream launch on the tensor cores (tensor_core_stream.h): the kernel body
// around the stream_mma.cuh steps, with `stream.smemBytes` of dynamic shared
// memory.
struct TensorCoreStream;
WrittenKernel writeTensorCoreStream(const Graph& graph, const LaunchPlan& plan,
                                    const std::map<NodeId, StoredArray>& stored, const std::vector<std::string>& names,
                                    const TensorCoreStream& stream);

// Whether a tile launch is one float sum of a whole array to a scalar (a
// gradient's global norm): it is written as a reduction over the whole grid,
// each warp adding its partial sum atomically, so its output is stored f32
// and zeroed by a clear launch first.
bool isGridSum(const Graph& graph, const LaunchPlan& plan);

// The axes of a tile-library GEMM launch (tensor_core_gemm.h) as its epilogue
// functor sees them (gemm_common.cuh, "Epilogue contract"): it is called with
// (batch, row, col, v, count), and v[e] is the contraction at the batch index,
// the row and column col + e, decomposed into these axes.
struct GemmEpilogueAxes {
  NodeId contraction = -1;
  std::vector<Axis> batch;    // (outer, inner), or (inner)
  std::vector<Axis> rows;     // outermost first
  std::vector<Axis> columns;  // outermost first
};

// The work after the contraction cannot be written as that functor (it reads
// the contraction at other positions than the one being stored).
class EpilogueUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The body of the epilogue functor's operator(): the launch's values after
// the contraction computed at the 8 columns, its outputs stored (bf16 outputs
// whose innermost axes are the columns with one 16-byte store). `reads`: the
// stored values it loads. Throws EpilogueUnsupported.
WrittenKernel writeGemmEpilogue(const Graph& graph, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
                                const std::vector<std::string>& names, const GemmEpilogueAxes& axes);

}  // namespace llmc
