// The tile of each kernel that runs as a tensor-core GEMM, chosen by price:
// every tile the library has (tensor_core_gemm.h, libraryTiles), and on
// sm_90a every split of the k-steps across units where the kernel's outputs
// are plain sums, is priced by the cost model under the partition it makes
// (its rows and columns cut into the tile's, the stream into k-steps); the
// cheapest is the kernel's partition and the tile the writer writes. Beside
// the traffic evaluate() prices, a tile's price has the library's blocks as
// they run (priceGemmTile): their k-steps one SM after another, the epilogue
// of each tile, the first load, rows the TMA reads unaligned. The
// partition search's own tiles need not be the library's: a GEMM priced at
// 192 rows a tile ran as 128, in a persistent grid of a different size.
#pragma once

#include <string>

#include "codegen/module.h"
#include "ir/ir.h"
#include "lowering/tensor_core_gemm.h"
#include "planning/cost_model.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

// The tile LLMC_GEMM_TILE names, "" where it is unset: BMxBN (the two
// consumers split a tile's rows), BMxBNp (ping-pong) or BMxBNc2 (split rows,
// clusters of two blocks sharing B, taken even where the target does not
// price clusters), such as 128x256.
// Every GEMM the library has that tile for takes it (its split-K still
// priced), the others their cheapest: for timing the model's choices against
// another tile on a GPU (benchmarks/kernels/README.md). Throws TargetError
// for a value of another form. The plan cache's key
// holds it (runtime/cuda/module_cache.h).
std::string gemmTileOverride();

// A tile as LLMC_GEMM_TILE names it: "128x256", "128x128p", "128x256c2".
std::string gemmTileName(const GemmTile& tile);

// Sets `kernel`'s gemmTile, partition and cost to the cheapest tile for
// `gemm`, the GEMM the writer made of its tile launch (or LLMC_GEMM_TILE's).
void chooseGemmTile(const Graph& graph, PlannedKernel& kernel, const TensorCoreGemm& gemm, const Target& target,
                    const CostOptions& options);

// The price of `gemm` run with `tile`: the partition it makes (below) as
// evaluate() prices it, and the library's blocks as they run it.
KernelCost priceGemmTile(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm,
                         const GemmTile& tile, const Target& target, const CostOptions& options);

// The partition a GEMM's tile makes of its kernel: the tile's rows and
// columns over the GEMM's row and column axes, innermost first (a tile over
// several axes takes the inner ones whole), one position of each batch axis,
// the stream in chunks of the tile's k-step, the k axis shared by `splits`
// units.
Partition gemmTilePartition(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm,
                            const GemmTile& tile);

}  // namespace llmc
