// The diagrams the CUDA emission tests run: GPT-2 (forward and training step)
// and diagrams GPT-2 does not use, at shapes that are not multiples of the
// tiles. Paths are relative to the source tree.
#pragma once

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "driver/pipeline.h"

namespace llmc::testing {

struct EmitCase {
  std::string name;
  std::string path;  // relative to LLMC_SOURCE_DIR
  std::string entry;
  SizeBindings sizes;
  bool grad = false;
  std::map<std::string, double> indexBound = {};  // integer inputs: drawn from [0, bound)
  // Float inputs are N(0, scale²). GPT-2 gets a trained model's scale: with
  // N(0, 1) weights every softmax saturates and the gradients become so
  // ill-conditioned that bf16 rounding alone moves them by 40%
  // (tests/unit/storage_precision_test.cpp).
  double inputScale = 1;
  // With bf16 storage: how many launches must run on tensor cores (-1: not
  // checked).
  int tensorCoreLaunches = -1;
  std::vector<std::string> wrt = {};  // with grad: differentiate against these inputs (empty: the params)
  // Under bf16 storage, the gradient outputs (grad_*) stored in f32, as
  // llmc-train keeps them: the stacked ones' parts, sums included, are then
  // written within them (codegen/concat_parts.h).
  bool gradientsInF32 = false;
  // Contractions over a stream's rows made in the stream (CostOptions::rowProducts,
  // planning/row_products.h).
  bool rowProducts = false;
};

// The source tree: $LLMC_SOURCE_DIR (a copy on another machine), else the
// one the tests were built from.
inline std::string sourceDir() {
  const char* dir = std::getenv("LLMC_SOURCE_DIR");
  return dir ? dir : LLMC_SOURCE_DIR;
}

inline PipelineOptions pipelineOptions(const EmitCase& c) {
  PipelineOptions o;
  o.path = sourceDir() + "/" + c.path;
  o.entry = c.entry;
  o.sizes = c.sizes;
  o.grad = c.grad;
  o.wrt = c.wrt;
  return o;
}

inline std::vector<EmitCase> gpt2Cases() {
  SizeBindings small = {{"B", 2}, {"T", 16}, {"maxT", 16}, {"L", 1}, {"C", 32}, {"H", 2}, {"V", 100}, {"Vp", 128}};
  SizeBindings odd = {{"B", 3}, {"T", 37}, {"maxT", 40}, {"L", 2}, {"C", 40}, {"H", 4}, {"V", 101}, {"Vp", 120}};
  SizeBindings one = small;
  one["B"] = 1;
  std::map<std::string, double> tokens = {{"tokens", 100}, {"targets", 100}};
  return {
      {"gpt2 forward, small", "diagrams/gpt2/model.dg", "gpt2", small, false, tokens, 0.1},
      {"gpt2 forward, odd sizes", "diagrams/gpt2/model.dg", "gpt2", odd, false, tokens, 0.1},
      {"gpt2 logits, odd sizes", "diagrams/gpt2/model.dg", "gpt2_logits", odd, false, tokens, 0.1},
      // One row, as the sampler runs it: the GEMMs' batch axis of extent 1.
      {"gpt2 logits, one row", "diagrams/gpt2/model.dg", "gpt2_logits", one, false, tokens, 0.1},
      {"gpt2 training step, small", "diagrams/gpt2/model.dg", "gpt2", small, true, tokens, 0.1, -1},
      {"gpt2 training step, odd sizes", "diagrams/gpt2/model.dg", "gpt2", odd, true, tokens, 0.1},
      {"gpt2 training step, odd sizes, gradients in f32", "diagrams/gpt2/model.dg", "gpt2", odd, true, tokens, 0.1,
       -1, {}, true},
  };
}

inline std::vector<EmitCase> otherCases() {
  return {
      {"rmsnorm", "diagrams/examples/rmsnorm.dg", "", {{"N", 100}, {"C", 771}}},
      {"rmsnorm training step", "tests/cuda/Inputs/rmsnorm_loss.dg", "", {{"N", 37}, {"C", 80}}, true, {}},
      {"grouped-query attention", "diagrams/examples/grouped_query_attention.dg", "",
       {{"B", 2}, {"H", 4}, {"G", 2}, {"T", 50}, {"X", 70}, {"D", 24}}},
      {"contraction chain", "diagrams/examples/contraction_chain.dg", "",
       {{"I", 30}, {"J", 17}, {"K", 65}, {"Lr", 9}, {"M", 33}}},
      // On the tensor cores (a streamed pair of mma.sync products), at sizes
      // that are not multiples of the 64-row and 64-key tiles. (At B=1, H=2
      // the cost model prices the scores' GEMM and the softmax's row passes
      // apart under the stream's 32 blocks.)
      {"causal attention T=1000 d=80", "tests/lit/pseudocode/attention.dg", "", {{"B", 2}, {"H", 4}, {"T", 1000}, {"D", 80}},
       false, {}, 1, 1},
      // Three batch axes: more than a TMA tensor map holds, so mma.sync on
      // cp.async tiles on sm_90a too.
      {"causal attention over three batch axes", "tests/lit/cuda/attention_three_batch_axes.dg", "attend_groups",
       {{"B", 2}, {"G", 2}, {"H", 3}, {"T", 200}, {"D", 64}}, false, {}, 1, 1},
      {"causal attention over three batch axes that do not nest", "tests/lit/cuda/attention_three_batch_axes.dg",
       "attend_sliced", {{"B", 2}, {"G", 2}, {"H", 3}, {"HP", 4}, {"T", 200}, {"D", 64}}, false, {}, 1, 1},
      // Attention's backward streams under a loss over every axis (the loss
      // a grid-wide sum of its own), at sizes no tile divides.
      {"causal attention training step T=200 d=80", "tests/lit/pseudocode/attention_loss.dg", "",
       {{"B", 2}, {"H", 2}, {"T", 200}, {"D", 80}}, true, {}},
      // A stream of scalar slots (max, and a sum rescaled by it): f32 with a
      // warp per row and the lanes' slots merged after it; bf16 on the tensor
      // cores without a product.
      {"row log-sum-exp V=5000", "tests/lit/cuda/logsumexp.dg", "", {{"N", 300}, {"K", 40}, {"V", 5000}}, false, {}, 1, 1},
      {"classifier with cross-entropy", "tests/lit/pseudocode/classifier.dg", "", {{"N", 100}, {"C", 48}, {"V", 771}},
       false, {{"target", 771}}},
      {"layernorm", "tests/lit/pseudocode/layernorm.dg", "", {{"N", 100}, {"C", 771}}},
      // Rows held in registers across the passes (planning/held_rows.h): a
      // residual sum's two rows (one through a renaming), 7 spans of 8 a lane
      // at GPT-2 d48's 1600 channels; 1001 (a position a lane, the last chunk
      // partly past the end); a row read by one pass left in memory.
      {"held rows: residual layernorm C=1600", "tests/diagrams/held_rows.dg", "residual_layernorm",
       {{"N", 300}, {"C", 1600}}},
      {"held rows: residual layernorm C=1001", "tests/diagrams/held_rows.dg", "residual_layernorm",
       {{"N", 77}, {"C", 1001}}},
      {"held rows: residual layernorm training step", "tests/diagrams/held_rows.dg", "residual_layernorm_loss",
       {{"N", 77}, {"C", 1000}}, true, {}},
      {"held rows: a row read once", "tests/diagrams/held_rows.dg", "one_pass", {{"N", 77}, {"C", 2000}}},
      // An embedding's rows gathered 8 channels a load (CudaWriter::gatheredSpan); 770 a channel a load.
      {"gathered rows: embedding C=776", "tests/lit/cuda/gathered_rows.dg", "", {{"B", 4}, {"T", 100}, {"V", 1001}, {"C", 776}},
       false, {{"tokens", 1001}}},
      {"gathered rows: embedding C=770", "tests/lit/cuda/gathered_rows.dg", "", {{"B", 4}, {"T", 100}, {"V", 1001}, {"C", 770}},
       false, {{"tokens", 1001}}},
      // Dot products of rows shorter than a warp's span: 8 (D=64) or 4 (D=40)
      // lanes a row, several rows a warp; N=1000 ends a tile past the rows: a warp a row.
      {"row dot products D=64", "tests/lit/cuda/row_dot.dg", "", {{"N", 1024}, {"D", 64}}},
      {"row dot products D=40", "tests/lit/cuda/row_dot.dg", "", {{"N", 1024}, {"D", 40}}},
      {"row dot products N=1000", "tests/lit/cuda/row_dot.dg", "", {{"N", 1000}, {"D", 64}}},
      // A row statistic broadcast over an axis it lacks: a warp a row makes
      // it once, then the row's lanes stride over the tile's x positions
      // (odd sizes: rows and x positions past the end skipped).
      {"row statistic broadcast over x", "tests/lit/cuda/row_statistic_broadcast.dg", "",
       {{"H", 3}, {"T", 37}, {"X", 130}, {"D", 40}}},
      {"row statistic broadcast over x, long rows", "tests/lit/cuda/row_statistic_broadcast.dg", "",
       {{"H", 8}, {"T", 300}, {"X", 1000}, {"D", 64}}},
      // Column sums and maxima whose rows the block's threads take in slices,
      // joined through shared memory: the rows not a multiple of the slices.
      {"column sums and maxima", "tests/lit/cuda/column_sums.dg", "", {{"B", 5}, {"T", 301}, {"C", 768}}},
      // Sums over the outer axis: few tiles, so the partition the latency
      // term picks deals the stream to slices of many threads (bf16: 64
      // blocks of 64 threads); tiles past the end of 200 channels.
      {"outer-axis sum, few tiles", "tests/lit/perf/latency.dg", "", {{"B", 64}, {"T", 8}, {"C", 512}}},
      {"outer-axis sum, odd sizes", "tests/lit/perf/latency.dg", "", {{"B", 33}, {"T", 100}, {"C", 200}}},
      {"batch sum", "tests/lit/cuda/batch_sum.dg", "", {{"B", 32}, {"T", 100}, {"C", 768}}},
      // A contraction over all rows split-K on the tensor cores (4 units a
      // tile adding their partials atomically), tiles not dividing 200 x 136.
      {"split-K contraction", "tests/lit/cuda/split_k.dg", "", {{"B", 8}, {"T", 300}, {"I", 200}, {"J", 136}}, false, {}, 1,
       1},
      // In place: an output over its input (the memory plan shares their bytes),
      // and two outputs from one input in one launch (it must not).
      {"a row's sum added in place", "tests/lit/memory/in_place.dg", "shifted", {{"N", 300}, {"C", 520}}},
      {"a row's sum added and multiplied", "tests/lit/memory/in_place.dg", "shifted_twice", {{"N", 300}, {"C", 520}}},
      // Ping-pong consumers (an epilogue with a bias and tanh): 280 tiles, 2 or 3
      // a block, taken by the two consumers in turn, 16 k-steps each through a
      // ring of fewer stages; 776 columns, not a multiple of the tile.
      {"GEMM with a bias and tanh (ping-pong)", "tests/lit/cuda/gemm_pingpong.dg", "", {{"M", 5000}, {"K", 1000}, {"N", 776}},
       false, {}, 0.1, 1},
      // The tensor cores' fusion rules: logits made by their own GEMM and
      // stored; dlogits stored once for both backward GEMMs.
      // Inputs N(0, 0.3²): with N(0, 1) the logits spread over ±20, where
      // bf16's absolute step (1/8) alone moves the softmax by 10%.
      {"classifier training step", "tests/diagrams/recompute.dg", "classifier_loss", {{"N", 100}, {"C", 48}, {"V", 771}},
       true, {{"targets", 771}}, 0.3, -1, {"h", "wv"}},
      // A residual MLP trained: a whole-array sum to the loss, the GEMMs'
      // data and weight gradients.
      {"residual MLP training step", "tests/lit/memory/residual_mlp.dg", "", {{"N", 100}, {"C", 40}}, true, {}},
      // A stack of MLPs whose activation the backward remakes to hold less
      // (ir/recompute.h): the GEMM of its derivative stores it a second time
      // for the weight gradient (planning/fusion_siblings.cpp).
      {"MLP stack, activation remade beside its derivative", "tests/diagrams/recompute.dg", "cubic_mlp_stack_loss",
       {{"N", 300}, {"C", 384}, {"F", 1000}, {"L", 2}}, true, {}, 0.1},
      // An elementwise value for a matmul made in another GEMM's epilogue,
      // which reads what it is made from (planning/fusion_siblings.cpp).
      {"elementwise value in a sibling GEMM's epilogue", "tests/lit/backend/sibling_epilogue.dg", "siblings",
       {{"N", 300}, {"F", 517}, {"O", 300}, {"C", 77}}, false, {}},
      {"matmul", "tests/lit/pseudocode/matmul.dg", "", {{"M", 1000}, {"K", 80}, {"N", 771}}, false, {}, 1, 1},
      // Tensor cores at shapes that are not multiples of the tiles; a K that
      // is not a multiple of 8 leaves rows misaligned for the library: CUDA cores.
      {"matmul M=1000 N=80 K=776", "tests/lit/pseudocode/matmul.dg", "", {{"M", 1000}, {"K", 776}, {"N", 80}}, false, {},
       1, 1},
      // K=771: rows not 16-byte aligned; both operands staged (padded copies), then the tensor cores.
      {"matmul K=771 (staged operands)", "tests/lit/pseudocode/matmul.dg", "", {{"M", 1000}, {"K", 771}, {"N", 80}}, false,
       {}, 1, 1},
      // benchmarks/diagrams: what GPT-2 does not use, at sizes no tile divides, forward and backward.
      {"gated MLP C=77 F=205", "benchmarks/diagrams/gated_mlp.dg", "gated_mlp", {{"N", 100}, {"C", 77}, {"F", 205}}, false,
       {}, 0.3},
      {"gated MLP training step", "benchmarks/diagrams/gated_mlp.dg", "gated_mlp_loss", {{"N", 100}, {"C", 77}, {"F", 205}},
       true, {}, 0.3},
      // The two projections fused: the halves' gradients written where their join has them
      // (codegen/concat_parts.h), and at F = 100 (not 16-byte aligned) joined by a launch.
      {"fused gated MLP training step, halves in place", "tests/diagrams/fused_gated_mlp.dg", "fused_gated_mlp_loss",
       {{"N", 300}, {"C", 72}, {"F", 104}}, true, {}, 0.3},
      {"fused gated MLP training step F=100", "tests/diagrams/fused_gated_mlp.dg", "fused_gated_mlp_loss",
       {{"N", 300}, {"C", 72}, {"F", 100}}, true, {}, 0.3},
      // Fusion's moves: a scaled matmul output remade in its one reader's kernel; two column
      // sums of one array in one kernel (planning/fusion_sinking.cpp, fusion_siblings.cpp).
      {"scaled RMS norm between matmuls, remade where read", "tests/lit/backend/sink_into_readers.dg", "scaled_rms",
       {{"N", 300}, {"C", 72}, {"F", 1000}}, false, {}, 0.3},
      {"column sums side by side", "tests/lit/backend/sibling_sums.dg", "norm_gradients",
       {{"B", 5}, {"T", 301}, {"C", 776}}, false, {}},
      {"multi-query attention", "benchmarks/diagrams/multi_query_attention.dg", "multi_query_attention",
       {{"H", 3}, {"Tq", 100}, {"Tk", 130}, {"D", 40}}, false, {}, 1, 1},
      {"multi-query attention training step", "benchmarks/diagrams/multi_query_attention.dg",
       "multi_query_attention_loss", {{"H", 3}, {"Tq", 100}, {"Tk", 130}, {"D", 40}}, true, {}},
      // Grouped-query attention's dK and dV split over the query heads of a group (ir/split_contractions.h):
      // a stream over the queries of partial sums, then their sum; a group of one head indexed, no sum.
      {"grouped-query attention training step, split", "tests/diagrams/split_contractions.dg", "grouped_attention",
       {{"B", 2}, {"H", 6}, {"G", 2}, {"T", 300}, {"D", 40}}, true, {}},
      {"grouped-query attention training step, groups of one", "tests/diagrams/split_contractions.dg",
       "grouped_attention", {{"B", 1}, {"H", 3}, {"G", 3}, {"T", 200}, {"D", 24}}, true, {}},
      {"grouped cross-attention training step, keys position-major", "tests/diagrams/split_contractions.dg",
       "grouped_cross_attention", {{"B", 2}, {"T", 70}, {"X", 300}, {"H", 4}, {"G", 2}, {"D", 40}}, true, {}},
      {"grouped ALiBi attention training step", "tests/diagrams/split_contractions.dg", "grouped_alibi",
       {{"B", 1}, {"H", 6}, {"G", 3}, {"T", 200}, {"D", 32}}, true, {}},
      // Stream tiles read from staged copies (tensor_core_stream.h, StreamTileStaging): rows not 16-byte
      // aligned (head dimensions 37 and 100), values stored channel-major.
      {"staged tiles: causal attention training step, head dimension 37", "tests/diagrams/staged_tiles.dg",
       "causal_attention", {{"B", 2}, {"H", 3}, {"T", 300}, {"D", 37}}, true, {}, 1, 3},
      {"staged tiles: cross-attention, head dimension 100", "benchmarks/diagrams/cross_attention.dg", "cross_attention",
       {{"B", 1}, {"H", 3}, {"Tq", 70}, {"Tk", 333}, {"D", 100}}, false, {}, 1, 1},
      {"staged tiles: channel-major values training step", "tests/diagrams/staged_tiles.dg", "channel_major_values",
       {{"B", 2}, {"H", 3}, {"T", 100}, {"X", 300}, {"D", 40}, {"E", 50}}, true, {}, 1, 3},
      // Tiles of more than 128 channels where the warpgroup issues (tensor_core_stream.h,
      // kWarpgroupStreamMaxChannels): head dimensions 160 (staged, padded to 192) and 256.
      {"wide tiles: causal attention training step, head dimension 160", "tests/diagrams/staged_tiles.dg",
       "causal_attention", {{"B", 1}, {"H", 2}, {"T", 200}, {"D", 160}}, true, {}},
      {"wide tiles: cross-attention, head dimension 256", "benchmarks/diagrams/cross_attention.dg", "cross_attention",
       {{"B", 1}, {"H", 2}, {"Tq", 70}, {"Tk", 333}, {"D", 256}}, false, {}},
      {"wide tiles: causal attention training step, head dimension 256", "tests/diagrams/staged_tiles.dg",
       "causal_attention", {{"B", 1}, {"H", 2}, {"T", 150}, {"D", 256}}, true, {}},
      // A LLaMA-style block at sizes no tile divides: RMSNorm, rotary embeddings, grouped-query attention,
      // SwiGLU; its data gradient through the query projection a GEMM over heads and channels.
      {"LLaMA block", "benchmarks/diagrams/llama_block.dg", "llama_block",
       {{"B", 2}, {"T", 77}, {"C", 96}, {"H", 6}, {"G", 2}, {"D", 16}, {"F", 200}}, false, {}, 0.3},
      {"LLaMA block training step", "benchmarks/diagrams/llama_block.dg", "llama_block_loss",
       {{"B", 2}, {"T", 77}, {"C", 96}, {"H", 6}, {"G", 2}, {"D", 16}, {"F", 200}}, true, {}, 0.3},
      {"attention with values over e", "benchmarks/diagrams/value_axis_attention.dg", "value_axis_attention",
       {{"B", 2}, {"H", 3}, {"T", 100}, {"D", 40}, {"E", 24}}, false, {}, 1, 1},
      {"attention with values over e, training step", "benchmarks/diagrams/value_axis_attention.dg",
       "value_axis_attention_loss", {{"B", 2}, {"H", 3}, {"T", 100}, {"D", 40}, {"E", 24}}, true, {}},
      {"sliding-window attention", "benchmarks/diagrams/sliding_window_attention.dg", "sliding_window_attention",
       {{"B", 1}, {"H", 2}, {"T", 300}, {"D", 64}, {"W", 100}}, false, {}, 1, 1},
      {"sliding-window attention training step", "benchmarks/diagrams/sliding_window_attention.dg",
       "sliding_window_attention_loss", {{"B", 1}, {"H", 2}, {"T", 300}, {"D", 64}, {"W", 100}}, true, {}},
      {"window attention with and", "benchmarks/diagrams/window_attention.dg", "window_attention",
       {{"B", 1}, {"H", 2}, {"T", 300}, {"D", 64}, {"W", 100}}, false, {}, 1, 1},
      {"window attention with and, training step", "benchmarks/diagrams/window_attention.dg",
       "window_attention_loss", {{"B", 1}, {"H", 2}, {"T", 300}, {"D", 64}, {"W", 100}}, true, {}},
      {"same convolution", "benchmarks/diagrams/same_convolution.dg", "same_convolution",
       {{"B", 3}, {"T", 77}, {"C", 40}, {"O", 24}}, false, {}, 1, 1},
      {"contracted axes in another order (gathered)", "tests/lit/launches/gathered_operands.dg", "taps_last",
       {{"M", 100}, {"C", 77}, {"K", 3}, {"N", 40}}, false, {}, 1, 1},
      {"row axes either side of k (gathered)", "tests/lit/launches/gathered_operands.dg", "rows_apart",
       {{"I", 3}, {"K", 50}, {"J", 37}, {"N", 24}}, false, {}, 1, 1},
      {"same convolution, training step", "benchmarks/diagrams/same_convolution.dg", "same_convolution_loss",
       {{"B", 3}, {"T", 77}, {"C", 40}, {"O", 24}}, true, {}},
      {"rotary attention", "benchmarks/diagrams/rotary_attention.dg", "rotary_attention",
       {{"B", 1}, {"H", 2}, {"T", 100}, {"D", 64}}, false, {}, 1, 1},
      {"rotary attention, training step", "benchmarks/diagrams/rotary_attention.dg", "rotary_attention_loss",
       {{"B", 1}, {"H", 2}, {"T", 100}, {"D", 64}}, true, {}},
      // Channel pairs rotated and stacked, the stack the output: one kernel
      // (no copy of its parts), a thread's 8 points over 4 pairs (I=36: not 8
      // pairs a thread), or, at N=777, pairs split across blocks.
      {"pairs rotated, 8 points over two axes", "tests/lit/cuda/elementwise_eight_pairs.dg", "", {{"N", 7777}, {"I", 36}}},
      {"pairs rotated, few rows", "tests/lit/cuda/elementwise_eight_pairs.dg", "", {{"N", 777}, {"I", 36}}},
      // Causal streams shared out across blocks (the keys' steps past a
      // block's queries skipped inside each share), their sums added atomically.
      {"rotary attention, training step T=1000", "benchmarks/diagrams/rotary_attention.dg", "rotary_attention_loss",
       {{"B", 1}, {"H", 2}, {"T", 1000}, {"D", 64}}, true, {}},
      // dV alone: the forward's statistics along the queries loaded at the
      // top of each step (TensorCoreStream::prefetched), unclamped in whole
      // steps and clamped in the ragged last.
      {"attention dV alone, statistics loaded ahead", "tests/diagrams/recompute.dg", "attention_loss",
       {{"B", 1}, {"H", 2}, {"T", 1000}, {"D", 64}}, true, {}, 1, -1, {"v"}},
      {"scans along an axis", "tests/diagrams/scans.dg", "scans", {{"B", 3}, {"T", 77}, {"C", 5}}, false, {}},
      {"causal linear attention by scan", "benchmarks/diagrams/linear_attention.dg", "linear_attention",
       {{"B", 1}, {"H", 2}, {"T", 77}, {"D", 24}, {"E", 40}}, false, {}},
      {"causal linear attention by scan, training step", "benchmarks/diagrams/linear_attention.dg",
       "linear_attention_loss", {{"B", 1}, {"H", 2}, {"T", 77}, {"D", 24}, {"E", 40}}, true, {}},
      // Running sums long enough to run as a blocked scan (planning/scan_layout.h): lines side by side, positions
      // side by side (one line a block, 256 slices), a gradient scanned from the end; linear attention's state.
      {"blocked scan, lines side by side", "tests/diagrams/blocked_scans.dg", "across_lines",
       {{"B", 3}, {"T", 2003}, {"C", 1001}}, false, {}},
      {"blocked scan, positions side by side", "tests/diagrams/blocked_scans.dg", "along_lines",
       {{"B", 3}, {"C", 5}, {"T", 100003}}, false, {}, 0.1},
      {"blocked scan, training step", "tests/diagrams/blocked_scans.dg", "running_loss",
       {{"B", 3}, {"T", 2003}, {"C", 1001}}, true, {}},
      {"causal linear attention, blocked scan", "benchmarks/diagrams/linear_attention.dg", "linear_attention",
       {{"B", 2}, {"H", 3}, {"T", 1001}, {"D", 17}, {"E", 33}}, false, {}},
      {"causal linear attention, blocked scan, training step", "benchmarks/diagrams/linear_attention.dg",
       "linear_attention_loss", {{"B", 2}, {"H", 3}, {"T", 1001}, {"D", 17}, {"E", 33}}, true, {}},
      // Linear recurrences (scan(linear, ..), scan(prod, ..)) and running maxima as blocked scans, their
      // gradients linear scans from the end (lagged, exclusive): a gated recurrence, products near 1.
      {"gated linear recurrence", "tests/diagrams/recurrences.dg", "gated", {{"B", 3}, {"T", 2003}, {"C", 101}}, false,
       {}},
      {"gated linear recurrence, training step", "tests/diagrams/recurrences.dg", "gated_loss",
       {{"B", 3}, {"T", 2003}, {"C", 101}}, true, {}},
      {"gated linear recurrence, short lines, training step", "tests/diagrams/recurrences.dg", "gated_loss",
       {{"B", 2}, {"T", 7}, {"C", 3}}, true, {}},
      {"running products, training step", "tests/diagrams/recurrences.dg", "near_one_products_loss",
       {{"B", 3}, {"T", 1001}, {"C", 77}}, true, {}},
      {"running maximum, training step", "benchmarks/diagrams/recurrences.dg", "running_max_loss",
       {{"B", 3}, {"T", 1001}, {"C", 77}}, true, {}},
      {"running maximum, short lines (masked), training step", "tests/diagrams/recurrences.dg", "running_max_loss",
       {{"B", 3}, {"T", 37}, {"C", 44}}, true, {}},
      {"gated recurrence, 4099 positions, training step", "benchmarks/diagrams/recurrences.dg",
       "gated_recurrence_loss", {{"B", 2}, {"T", 4099}, {"C", 33}}, true, {}},
      // Scans over a user's operator (ir.h, isMonoidScan): a running logsumexp, a hypotenuse and a
      // non-commutative "last above 0.5", in each form, at odd sizes; lines across and along.
      {"user-operator scans, training step", "tests/diagrams/monoid_scans.dg", "forms_loss",
       {{"B", 3}, {"T", 1001}, {"C", 77}}, true, {}},
      {"user-operator scans, short lines", "tests/diagrams/monoid_scans.dg", "forms",
       {{"B", 2}, {"T", 7}, {"C", 3}}, false, {}},
      {"user-operator scans, long lines innermost", "tests/diagrams/monoid_scans.dg", "along",
       {{"B", 2}, {"C", 5}, {"T", 40003}}, false, {}},
      {"running logsumexp, 4099 positions, training step", "benchmarks/diagrams/recurrences.dg",
       "running_logsumexp_loss", {{"B", 2}, {"T", 4099}, {"C", 33}}, true, {}},
      {"running sum read by a contraction, training step", "tests/diagrams/recompute.dg", "scanned_products_loss",
       {{"N", 3}, {"T", 256}, {"D", 32}}, true, {}},
      {"top-k routing", "benchmarks/diagrams/topk_routing.dg", "topk_routing",
       {{"N", 77}, {"C", 40}, {"E", 6}, {"O", 24}, {"R", 2}}, false, {}},
      {"top-k routing, training step", "benchmarks/diagrams/topk_routing.dg", "topk_routing_loss",
       {{"N", 77}, {"C", 40}, {"E", 6}, {"O", 24}, {"R", 2}}, true, {}},
      {"a table picked per slot, slot contracted (one-hot)", "tests/diagrams/one_hot_gathers.dg", "picked",
       {{"N", 77}, {"C", 40}, {"X", 6}, {"O", 24}, {"S", 3}}, false, {{"index", 6}}},
      {"a table picked per row, the gathered axis's name reused (one-hot)", "tests/diagrams/one_hot_gathers.dg",
       "clash", {{"N", 77}, {"C", 40}, {"X", 6}, {"O", 24}}, false, {{"index", 6}}},
      {"four chained contractions", "benchmarks/diagrams/contraction_chain.dg", "contraction_chain",
       {{"I", 100}, {"J", 96}, {"K", 200}, {"L", 40}, {"M", 77}, {"P", 33}}, false, {}, 0.3},
      {"four chained contractions, training step", "benchmarks/diagrams/contraction_chain.dg", "contraction_chain_loss",
       {{"I", 100}, {"J", 96}, {"K", 200}, {"L", 40}, {"M", 77}, {"P", 33}}, true, {}, 0.3},
      {"layernorm, matmul, GELU", "benchmarks/diagrams/layernorm_matmul_gelu.dg", "layernorm_matmul_gelu",
       {{"N", 33}, {"C", 77}, {"F", 308}}, false, {}},
      {"layernorm, matmul, GELU training step", "benchmarks/diagrams/layernorm_matmul_gelu.dg",
       "layernorm_matmul_gelu_loss", {{"N", 33}, {"C", 77}, {"F", 308}}, true, {}},
      {"RMSNorm, matmul", "benchmarks/diagrams/rmsnorm_matmul.dg", "rmsnorm_matmul", {{"N", 333}, {"C", 771}, {"F", 300}},
       false, {}, 1, 1},
      {"RMSNorm, matmul training step", "benchmarks/diagrams/rmsnorm_matmul.dg", "rmsnorm_matmul_loss",
       {{"N", 33}, {"C", 77}, {"F", 308}}, true, {}},
      // A linear layer's weight gradient over 20011 rows without a batch axis: 1 tile of its
      // 72 x 40 outputs, the GEMM split along its stream (the rows), partial tiles added atomically.
      {"linear layer over tokens, training step", "tests/diagrams/linear_tokens.dg", "linear_loss",
       {{"N", 20011}, {"C", 72}, {"O", 40}}, true, {}},
      // Few queries over many keys at d=128: dV a tensor-core GEMM over the
      // probabilities stored by a kernel of their own (tests/lit/perf/stored_prologue.dg).
      {"cross-attention, d=128 over long keys, training step", "benchmarks/diagrams/cross_attention.dg",
       "cross_attention_loss", {{"B", 1}, {"H", 2}, {"Tq", 20}, {"Tk", 1000}, {"D", 128}}, true, {}},
      // A column's statistics kept apart from what reads them along the rows
      // (tests/lit/perf/statistics_apart.dg): column sums shared out over the grid.
      {"batch normalisation before a linear layer, training step", "benchmarks/diagrams/batch_norm.dg",
       "batch_norm_loss", {{"N", 5003}, {"C", 40}, {"O", 24}}, true, {}},
      {"a column's mean subtracted from its rows", "benchmarks/diagrams/batch_norm.dg", "centre_columns",
       {{"N", 20011}, {"C", 72}}, false, {}},
      // Statistics over two axes at once, held whole together with what
      // reads them (Fuser::mergeHeldWhole, tests/lit/perf/held_whole_axes.dg):
      // odd sizes, remainder tiles of the groups; past kWholeAxisLimit
      // positions a group (5 x 1999) the mean's kernel apart.
      {"group normalisation, SiLU", "benchmarks/diagrams/group_norm.dg", "group_norm_silu",
       {{"B", 3}, {"G", 7}, {"E", 5}, {"S", 301}}, false, {}},
      {"group normalisation, SiLU, training step", "benchmarks/diagrams/group_norm.dg", "group_norm_loss",
       {{"B", 2}, {"G", 5}, {"E", 3}, {"S", 333}}, true, {}},
      {"group normalisation over long groups, training step", "benchmarks/diagrams/group_norm.dg", "group_norm_loss",
       {{"B", 2}, {"G", 3}, {"E", 5}, {"S", 1999}}, true, {}},
      // Past 8192 positions a group: the variance over the channels and the
      // (contiguous) positions a stream with 256 lanes along the positions, the
      // channels looped at each; the weight's gradient over the batch and the
      // positions shared out over blocks, each storing its share of the SiLU's
      // gradient.
      {"group normalisation, SiLU, training step, lanes over positions", "benchmarks/diagrams/group_norm.dg",
       "group_norm_loss", {{"B", 9}, {"G", 16}, {"E", 5}, {"S", 3001}}, true, {}},
      // Statistics over three axes (BatchNorm2d): column sums shared out over
      // the batch and the columns too, each block storing its share of the
      // centred values.
      {"batch normalisation over images", "benchmarks/diagrams/batch_norm.dg", "batch_norm_2d",
       {{"B", 7}, {"C", 13}, {"H", 29}, {"W", 31}}, false, {}},
      {"batch normalisation over images, training step", "benchmarks/diagrams/batch_norm.dg", "batch_norm_2d_loss",
       {{"B", 7}, {"C", 13}, {"H", 29}, {"W", 31}}, true, {}},
      // A value per channel made from its sum over the batch and the image: the
      // sum shared out over blocks (their parts added), the value a kernel of
      // its own after it (lowering/unfuse.cpp, heldAxesLeavingSMsIdle).
      {"channel RMS scale over images", "benchmarks/diagrams/batch_norm.dg", "channel_rms_scale",
       {{"B", 31}, {"C", 7}, {"H", 57}, {"W", 29}}, false, {}},
      {"channel RMS scale over images, training step", "benchmarks/diagrams/batch_norm.dg", "channel_rms_scale_loss",
       {{"B", 31}, {"C", 7}, {"H", 57}, {"W", 29}}, true, {}},
      // Streams over a column's rows dealt to slices of the block's threads: a
      // running maximum and the sum it rescales joined across the slices; a
      // remainder tile of columns (odd C).
      {"column log-sum-exp, sliced", "tests/diagrams/column_streams.dg", "column_logsumexp", {{"R", 4099}, {"C", 1000}},
       false, {}},
      {"column log-sum-exp, odd, training step", "tests/diagrams/column_streams.dg", "column_logsumexp_loss",
       {{"R", 333}, {"C", 77}}, true, {}},
      {"a column over its sum of squares", "tests/diagrams/column_streams.dg", "column_shares", {{"R", 4099}, {"C", 1000}},
       false, {}},
      // A maximum compared with what it reduces (no stop_gradient) anchors no
      // stream: the cosine similarities a tensor-core GEMM (tests/lit/perf/masked_maximum.dg).
      {"contrastive loss over cosine similarities, training step", "benchmarks/diagrams/contrastive.dg",
       "contrastive_loss", {{"B", 77}, {"N", 301}, {"D", 40}}, true, {}},
      {"classifier, mean cross-entropy", "benchmarks/diagrams/classifier.dg", "classifier",
       {{"N", 77}, {"V", 1001}, {"C", 80}}, true, {{"target", 1001}}, 0.3},
      // Few rows of a long vocabulary: a block of several warps a row, the
      // warps' slots joined in shared memory; V odd (8 loads a lane, the
      // lanes' count apart), then a multiple of 8 (16-byte loads).
      {"classifier, few long rows, odd", "benchmarks/diagrams/classifier.dg", "classifier",
       {{"N", 13}, {"V", 20011}, {"C", 40}}, true, {{"target", 20011}}, 0.3},
      {"classifier, few long rows, aligned", "benchmarks/diagrams/classifier.dg", "classifier",
       {{"N", 7}, {"V", 16384}, {"C", 40}}, true, {{"target", 16384}}, 0.3},
      // Its loss alone: the log-sum-exp streamed, several warps a row. With the
      // gradient (above), the loss and the gradient in one kernel, the rows
      // held in shared memory (planning/staged_rows.h).
      {"classifier loss, few long rows, odd", "benchmarks/diagrams/classifier.dg", "classifier",
       {{"N", 13}, {"V", 20011}, {"C", 40}}, false, {{"target", 20011}}, 0.3},
      {"classifier loss, few long rows, aligned", "benchmarks/diagrams/classifier.dg", "classifier",
       {{"N", 7}, {"V", 20480}, {"C", 40}}, false, {{"target", 20480}}, 0.3},
      // Rows held in shared memory (more than 32 KB a point): a softmax, its gradient, a layernorm; odd and
      // aligned lengths.
      {"long rows: softmax, odd", "tests/diagrams/long_rows.dg", "long_softmax", {{"N", 37}, {"V", 20011}}, false, {}},
      {"long rows: softmax, aligned", "tests/diagrams/long_rows.dg", "long_softmax", {{"N", 5}, {"V", 20000}}, false, {}},
      {"long rows: softmax gradient", "tests/diagrams/long_rows.dg", "long_softmax_loss", {{"N", 37}, {"V", 20011}},
       true, {}},
      {"long rows: layernorm, odd", "tests/diagrams/long_rows.dg", "long_layernorm", {{"N", 33}, {"C", 17001}}, false, {}},
      {"long rows: softmax, an axis of one", "tests/diagrams/long_rows.dg", "long_softmax_unit", {{"N", 33}, {"V", 9001}},
       false, {}},
      {"long rows: layernorm, aligned", "tests/diagrams/long_rows.dg", "long_layernorm", {{"N", 33}, {"C", 17408}},
       false, {}},
      // Row products (planning/row_products.h): dQ in the stream over the queries, each block of keys
      // adding its share by atomics (on sm_90a with bf16; elsewhere the kernels without them); at 333
      // positions and 40 channels the cheaper plan streams over the keys, dK and dV the row products; dQ's
      // weights unmasked: no step skipped; multi-query keys (dK and dV split over the heads,
      // ir/split_contractions.h: their partial sums row products of the stream over the queries);
      // dQ's values an array of their own, a rows tile more, 80 channels (a product 128 wide).
      {"row products: attention backward", "tests/diagrams/row_products.dg", "attention_backward",
       {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 64}}, false, {}, 1, -1, {}, false, true},
      {"row products: two, odd sizes", "tests/diagrams/row_products.dg", "attention_backward",
       {{"B", 1}, {"H", 2}, {"T", 333}, {"D", 40}}, false, {}, 1, -1, {}, false, true},
      {"row products: unmasked weights", "tests/diagrams/row_products.dg", "unmasked_rows",
       {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 64}}, false, {}, 1, -1, {}, false, true},
      {"row products: multi-query", "tests/diagrams/row_products.dg", "multi_query_backward",
       {{"B", 2}, {"H", 3}, {"T", 333}, {"D", 64}}, false, {}, 1, -1, {}, false, true},
      {"row products: values of their own, 80 channels", "tests/diagrams/row_products.dg", "own_values",
       {{"B", 1}, {"H", 2}, {"T", 333}, {"D", 64}, {"E", 80}}, false, {}, 1, -1, {}, false, true},
      // Outputs along a tensor-core stream (tensor_core_stream.h, stepOutputs), stored by each step and as
      // zeros at the skipped steps' positions: dS beside dK and dV for dQ's GEMM (no row products), ragged
      // and whole; unmasked (no step skipped); multi-query (dK and dV split over the heads: the stream
      // over the queries stores dS); the forward's scores (not 0 where masked: no step skipped) and
      // probabilities.
      {"stream step outputs: dS for a GEMM", "tests/diagrams/row_products.dg", "attention_backward",
       {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 64}}, false, {}},
      {"stream step outputs: dS, odd sizes", "tests/diagrams/row_products.dg", "attention_backward",
       {{"B", 1}, {"H", 2}, {"T", 333}, {"D", 40}}, false, {}},
      {"stream step outputs: unmasked", "tests/diagrams/row_products.dg", "unmasked_rows",
       {{"B", 1}, {"H", 2}, {"T", 333}, {"D", 64}}, false, {}},
      {"stream step outputs: multi-query", "tests/diagrams/row_products.dg", "multi_query_backward",
       {{"B", 2}, {"H", 3}, {"T", 333}, {"D", 64}}, false, {}},
      {"stream step outputs: scores", "tests/diagrams/stream_step_outputs.dg", "stored_scores",
       {{"B", 2}, {"H", 3}, {"T", 333}, {"D", 40}}, false, {}},
      {"stream step outputs: probabilities", "tests/diagrams/stream_step_outputs.dg", "stored_probabilities",
       {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 64}}, false, {}},
      // Staged in shared memory and stored 16 bytes a lane (tensor_core_stream.h, StagedStepOutput), the
      // outputs along the stream's innermost axis (the probabilities, T ragged; the scores; unmasked p and
      // dK's weights); dS along the rows' innermost axis at the fragment elements, rows and stream ragged;
      // the skipped steps' zeros 16 bytes a thread along either.
      {"stream step outputs: staged probabilities", "tests/diagrams/stream_step_outputs.dg", "stored_probabilities",
       {{"B", 2}, {"H", 6}, {"T", 1000}, {"D", 64}}, false, {}},
      {"stream step outputs: staged scores", "tests/diagrams/stream_step_outputs.dg", "stored_scores",
       {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 40}}, false, {}},
      {"stream step outputs: staged, unmasked", "tests/diagrams/row_products.dg", "unmasked_rows",
       {{"B", 1}, {"H", 2}, {"T", 336}, {"D", 64}}, false, {}},
      {"stream step outputs: dS along the rows, whole vectors", "tests/diagrams/row_products.dg", "attention_backward",
       {{"B", 4}, {"H", 6}, {"T", 1000}, {"D", 64}}, false, {}},
      // Arrays read transposed, staged through shared memory (planning/transposed_reads.h): graph outputs
      // copied transposed, with and without a batch axis, and a [v n] mask minus [n v] values stored for a matmul.
      {"transposed read, odd", "tests/diagrams/transposed_reads.dg", "shifted_exp", {{"N", 77}, {"V", 1001}}, false, {}},
      {"transposed read, one-hot difference", "tests/diagrams/transposed_reads.dg", "one_hot_difference",
       {{"N", 77}, {"V", 1001}, {"C", 80}}, false, {{"t", 1001}}},
      {"transposed read, batched", "tests/diagrams/transposed_reads.dg", "batched", {{"B", 3}, {"N", 45}, {"V", 333}},
       false, {}},
      // Elementwise launches taking 8 consecutive elements of the flattened index (planning/flat_points.h):
      // rows of 1001, the array's last 8 cut short; the backward writes a logits gradient so.
      {"flat points, one-hot rows", "tests/diagrams/flat_points.dg", "one_hot_rows", {{"N", 77}, {"V", 1001}}, false,
       {{"t", 1001}}},
      {"flat points, batched rows", "tests/diagrams/flat_points.dg", "batched_rows", {{"B", 3}, {"N", 77}, {"V", 1001}},
       false, {}},
      // A stack of 3 layers read at one position each of their stacked weights: each launch takes a pointer to
      // its layer's slice (codegen/constant_bases.h), the layers one source; forward and backward.
      {"layer stack, pointers to a layer's slice", "tests/diagrams/layer_stack.dg", "layer_stack",
       {{"N", 100}, {"C", 77}, {"L", 3}}, true, {}},
      // Sums along a long axis of 3 rows: the stream shared out across blocks.
      {"row sums, few long rows", "tests/diagrams/row_reductions.dg", "row_sums", {{"M", 3}, {"N", 100003}}, false, {}},
      {"row log-sum-exp, few long rows", "tests/diagrams/row_reductions.dg", "row_logsumexp", {{"M", 3}, {"N", 100003}},
       false, {}},
      {"sum to a scalar, long axis", "tests/diagrams/row_reductions.dg", "total", {{"N", 1000003}}, false, {}},
  };
}

}  // namespace llmc::testing
