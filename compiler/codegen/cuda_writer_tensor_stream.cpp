// Streams on the tensor cores (tensor_core_stream.h): the kernel body around
// the stream_mma.cuh and stream_wgmma.cuh steps.
#include "codegen/cuda_writer.h"

#include <cctype>

namespace llmc::cuda_writer {

// ---- a stream on the tensor cores (tensor_core_stream.h): one block per 64
// rows and batch position, 16 rows per warp; per step of 64 positions, the
// scores by mma.sync, the running maxima, then the sums and the products'
// weights at the 32 fragment elements each lane holds, the products by
// mma.sync; after the stream the slots are staged in shared memory and the
// tail runs per row as in a CUDA-core tile.
const StreamProduct* CudaWriter::productOf(int slot) const {
  for (const StreamProduct& p : tcs_->products)
    if (p.slot == slot) return &p;
  return nullptr;
}

std::string CudaWriter::tileOrigin(const StreamTile& tile, const std::string& outerPosition) {
  std::string offset = fmt::format("{}", tile.layout.offset);
  for (const auto& [axis, stride] : tile.layout.strides) {
    if (axis == tile.channel.name || stride == 0) continue;
    offset += fmt::format(" + (long long)({}) * {}", axis == tile.outer ? outerPosition : "i_" + axis, stride);
  }
  if (tile.staging) return fmt::format("reinterpret_cast<const llmc::bf16*>({}) + {}", tile.staging->param, offset);
  reads_.insert(tile.layout.array);
  return fmt::format("reinterpret_cast<const llmc::bf16*>({}) + {}", stored_.at(tile.layout.array).param, offset);
}

// A tile by the TMA (one thread a block issues it), counted on `barrier`.
std::string CudaWriter::tmaTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                                const std::string& barrier) const {
  std::string batch[2] = {"0", "0"};
  for (size_t k = 0; k < tile.batchDims.size(); ++k) {
    const std::vector<Axis>& axes = tile.batchDims[k].axes;
    batch[k] = "i_" + axes[0].name;
    for (size_t j = 1; j < axes.size(); ++j) batch[k] = fmt::format("({}) * {} + i_{}", batch[k], axes[j].size, axes[j].name);
  }
  return fmt::format("llmc::stream::tma_tile<{}>(llmc::smem_addr(smem + {}), {}, {}, {}, {}, {});", tile.paddedChannels,
                     smemAt, tile.tensorMap, outerPosition, batch[0], batch[1], barrier);
}

std::string CudaWriter::loadTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                                 int64_t outerSize) {
  return fmt::format("llmc::sm80::detail::load_tile_async<{}, {}, {}>(reinterpret_cast<llmc::bf16*>(smem + {}), {}, {}, "
                     "{} - ({}), {});",
                     tile.outer == tcs_->rows.name ? kStreamRowsPerBlock : kStreamPositionsPerStep, tile.paddedChannels,
                     kStreamThreads, smemAt, tileOrigin(tile, outerPosition),
                     tile.layout.strides.at(tile.outer), outerSize, outerPosition, tile.channel.size);
}

// The loop over the lane's two rows, binding the row axis (clamped into the
// array: rows past the end are computed on the last row and never stored).
int CudaWriter::openRows(int parent, Env& env) {
  fragment_.half = fresh("h");
  const int s = open(parent, fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 2; ++{0})", fragment_.half));
  const Axis& r = tcs_->rows;
  const std::string unclamped = fmt::format("t_{} + warp * 16 + (lane >> 2) + 8 * {}", r.name, fragment_.half);
  std::string row = unclamped;
  rowInside_.clear();
  if (r.size % kStreamRowsPerBlock != 0) {
    row = fmt::format("min({}, {})", row, r.size - 1);
    rowInside_ = fmt::format("{} < {}", unclamped, r.size);
  }
  env[r.name] = {define(s, "int", "i_" + r.name, row), s};
  rowBinding_ = env[r.name].expr;
  return s;
}

// The loops over the lane's 16 columns of the step, binding the stream
// axis; `valid` is set to the condition of a position inside the axis.
int CudaWriter::openColumns(int parent, Env& env, std::vector<int>& opened, std::string& valid) {
  fragment_.column = fresh("j");
  fragment_.element = fresh("e");
  opened.push_back(open(parent, fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 8; ++{0})", fragment_.column)));
  const int s = open(opened.back(), fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < 2; ++{0})", fragment_.element));
  opened.push_back(s);
  const Axis& c = tcs_->stream;
  std::string position = define(s, "int", "position", fmt::format("c0 + 8 * {} + 2 * (lane & 3) + {}", fragment_.column,
                                                                   fragment_.element));
  const bool clamped = c.size % kStreamPositionsPerStep != 0 && !wholeStep_;
  valid = clamped ? fmt::format("{} < {}", position, c.size) : "";
  env[c.name] = {clamped ? define(s, "int", "i_" + c.name, fmt::format("min({}, {})", position, c.size - 1)) : position, s};
  columnBinding_ = env[c.name].expr;
  positions_ = s;
  return s;
}

// Each side of a condition of the skip ranges over the block's rows or the
// step's positions. `step`: the step's first position.
TextRange CudaWriter::stepBox(const std::string& step) const {
  const TensorCoreStream* t = &*tcs_;
  return [t, step](const std::string& axis) -> std::pair<std::string, std::string> {
    if (axis == t->rows.name) return {"t_" + axis, fmt::format("min(t_{} + 63, {})", axis, t->rows.size - 1)};
    return {step, fmt::format("min({} + 63, {})", step, t->stream.size - 1)};
  };
}

std::string CudaWriter::masked(const std::string& valid, const std::string& v, const char* otherwise) {
  return valid.empty() ? v : fmt::format("({}) ? {} : {}", valid, v, otherwise);
}

void CudaWriter::tensorCoreStream(WrittenKernel& out) {
  TcsBody b = tcsBlockOrigin(out);
  tcsFirstStep(b);
  tcsSteps(b);
  tcsStageSlots(b);
  tcsTail(b, out);
}

// The shared memory and its barriers, the block's origin along the group
// axes (env: those other than the rows).
CudaWriter::TcsBody CudaWriter::tcsBlockOrigin(WrittenKernel& out) {
  TcsBody b(*tcs_);
  const TensorCoreStream& t = b.t;
  if (!setUpStream()) throw std::logic_error("emit cuda: a tensor-core stream that does not stream");
  for (size_t k = 0; k < t.scores.size(); ++k) scoreIndex_[t.scores[k].contraction] = static_cast<int>(k);
  out.grid = t.grid;
  out.block = kStreamThreads;
  b.warpgroup = t.issuer == MmaIssuer::Warpgroup;
  const bool warpgroup = b.warpgroup;
  if (warpgroup) {
    emit(0, "extern __shared__ __align__(128) unsigned char smem_raw[];");
    emit(0, fmt::format("// wgmma reads the swizzled tiles by address: they start on a {0}-byte boundary.", kSwizzleAlignment));
    emit(0, fmt::format("unsigned char* const smem = smem_raw + ({0} - llmc::smem_addr(smem_raw) % {0}) % {0};",
                        kSwizzleAlignment));
  } else {
    emit(0, "extern __shared__ __align__(128) unsigned char smem[];");
  }
  if (warpgroup) {
    emit(0, fmt::format("const unsigned stage_full = llmc::smem_addr(smem + {});  // a stage's tiles landed: two mbarriers",
                        t.barrierOffset));
    emit(0, "llmc::stream::init_stage_barriers(stage_full);");
  }
  b.issuer = warpgroup ? "warpgroup" : "warp";
  emit(0, "const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  if (t.grid > 1) emit(0, "long long block = blockIdx.x;");
  if (t.share > 0) {  // the block's share of the stream: the shares of one tile of rows side by side
    const int64_t shares = ceilDiv(t.stream.size, t.share);
    emit(0, fmt::format("const int split_{} = (int)(block % {}) * {};", t.stream.name, shares, t.share));
    emit(0, fmt::format("block /= {};", shares));
  }
  Env& env = b.env;
  for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
    const Axis& a = plan_.groupAxes[i];
    const int64_t tile = a.name == t.rows.name ? kStreamRowsPerBlock : 1, tiles = ceilDiv(a.size, tile);
    if (tiles == 1) emit(0, fmt::format("const int t_{} = 0;", a.name));
    else emit(0, fmt::format("const int t_{} = (int)(block % {}) * {};", a.name, tiles, tile));
    if (tiles > 1 && i > 0) emit(0, fmt::format("block /= {};", tiles));
    if (a.name != t.rows.name) {
      emit(0, fmt::format("const int i_{0} = t_{0};", a.name));
      env[a.name] = {"i_" + a.name, 0};
    }
  }
  b.rowOrigin = "t_" + t.rows.name;
  b.positions = t.stream.size;
  return b;
}

// By the TMA: thread 0 expects the stage's bytes on its barrier, then issues the boxes.
void CudaWriter::tcsTmaStep(const TcsBody& b, int scope, const std::string& stage, const std::string& first,
                            bool withRows) {
  const TensorCoreStream& t = b.t;
  const std::string& rowOrigin = b.rowOrigin;
  const int issuer = open(scope, "if (threadIdx.x == 0)");
  const std::string barrier = fmt::format("stage_full + 8 * {}", stage);
  emit(issuer, fmt::format("llmc::stream::expect_tile_bytes({}, {});", barrier, b.stepBytes + (withRows ? b.rowBytes : 0)));
  for (const StreamTile* tile : t.loadedTiles()) {
    if (tile->outer == t.rows.name) {
      if (withRows) emit(issuer, tmaTile(*tile, fmt::format("{}", tile->smemOffset), rowOrigin, barrier));
      continue;
    }
    emit(issuer, tmaTile(*tile, fmt::format("{} + {} * {}", tile->smemOffset, stage, tile->stageBytes()), first, barrier));
  }
  close(issuer);
}

// By cp.async: the step's column tiles (and products' values), each once.
void CudaWriter::tcsLoadStep(const TcsBody& b, int scope, const std::string& stage, const std::string& first) {
  const TensorCoreStream& t = b.t;
  const int64_t positions = b.positions;
  std::vector<const StreamTile*> tiles;
  for (const StreamScore& sc : t.scores) tiles.push_back(&sc.columns);
  for (const StreamProduct& p : t.products) tiles.push_back(&p.values);
  for (const StreamTile* tile : tiles)
    if (!tile->sharesEarlierTile)
      emit(scope, loadTile(*tile, fmt::format("{} + {} * {}", tile->smemOffset, stage, tile->stageBytes()), first,
                           positions));
}

// Before the loop: the steps to run, the first step's tiles, the rows'
// fragments, the accumulators.
void CudaWriter::tcsFirstStep(TcsBody& b) {
  const TensorCoreStream& t = b.t;
  const bool warpgroup = b.warpgroup;
  const std::string& rowOrigin = b.rowOrigin;
  const int64_t positions = b.positions;
  // The row tiles, the first step's column tiles; the rows' A fragments.
  if (!warpgroup)
    for (const StreamScore& sc : t.scores)
      emit(0, loadTile(sc.rows, fmt::format("{}", sc.rows.smemOffset), rowOrigin, t.rows.size));
  for (const StreamTile* tile : t.loadedTiles()) (tile->outer == t.rows.name ? b.rowBytes : b.stepBytes) += tile->stageBytes();
  // The steps to run: all, or those that conditions on positions leave
  // unchanged dropped from both ends (a causal mask's keys past the block's
  // last query; a window's keys before its first); any skippable step
  // between the first and last run runs, masked (stepsRun counts so).
  const int64_t lastStart = (positions - 1) / kStreamPositionsPerStep * kStreamPositionsPerStep;
  if (t.skip) {
    emit(0, "// Steps where no slot changes (a condition on positions leaves every core 0 or -inf) are not run.");
    emit(0, fmt::format("int c_first = 0, c_last = {};", lastStart));
    emit(0, fmt::format("while (c_first <= c_last && ({})) c_first += {};", stepSkippedText(*t.skip, stepBox("c_first")),
                        kStreamPositionsPerStep));
    emit(0, fmt::format("while (c_last >= c_first && ({})) c_last -= {};", stepSkippedText(*t.skip, stepBox("c_last")),
                        kStreamPositionsPerStep));
  } else {
    emit(0, fmt::format("{}int c_first = 0, c_last = {};", t.share > 0 ? "" : "const ", lastStart));
  }
  if (t.share > 0) {
    emit(0, fmt::format("// The block's share of the stream: the {1} positions from {0}.", "split_" + t.stream.name, t.share));
    emit(0, fmt::format("c_first = max(c_first, split_{});", t.stream.name));
    emit(0, fmt::format("c_last = min(c_last, split_{} + {});", t.stream.name, t.share - kStreamPositionsPerStep));
    emit(0, "if (c_first > c_last) return;  // no step of the share runs: nothing to add");
  }
  if (warpgroup) {
    tcsTmaStep(b, 0, "0", "c_first", true);
    emit(0, "llmc::stream::wait_tiles(stage_full, 0);");
  } else {
    tcsLoadStep(b, 0, "0", "c_first");
    emit(0, "llmc::sm80::detail::cp_async_commit();");
    emit(0, "llmc::sm80::detail::cp_async_wait<0>();");
    emit(0, "__syncthreads();");
  }
  for (size_t k = 0; k < t.scores.size() && !warpgroup; ++k) {
    const StreamTile& rows = t.scores[k].rows;
    emit(0, fmt::format("unsigned fa{}[{}][4];", k, rows.paddedChannels / 16));
    emit(0, fmt::format("llmc::stream::load_row_fragments<{}>(fa{}, llmc::smem_addr(smem + {}), warp * 16);",
                        rows.paddedChannels, k, rows.smemOffset));
  }
  tcsFindPrefetched(b);
  tcsPrefetchRows(b);
  bool staged = false;
  for (const auto& [id, ahead] : prefetched_)
    if (ahead.staged()) {
      staged = true;
      emit(0, fmt::format("float* const {} = reinterpret_cast<float*>(smem + {});  // {} at the step's positions, two stages",
                          ahead.name, ahead.smemOffset, names_[static_cast<size_t>(id)]));
      if (!ahead.reciprocal.empty())
        emit(0, fmt::format("float* const {} = reinterpret_cast<float*>(smem + {});  // 1 / {}, taken as it is staged",
                            ahead.reciprocal, ahead.smemOffset + StreamPrefetch::kStagedBytes,
                            names_[static_cast<size_t>(id)]));
    }
  if (staged) {
    tcsStageAlong(b, 0, "c_first", "0");
    emit(0, "__syncthreads();");
  }
  // Accumulators: two rows per lane, or a product's [channels / 8][4] fragment.
  for (size_t k = 0; k < slots_.size(); ++k) {
    const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
    const std::string& name = slots_[k].name;
    if (const StreamProduct* p = productOf(static_cast<int>(k))) {
      emit(0, fmt::format("float {}[{}][4] = {{}};  // accumulator: the product with {} over {}", name,
                          p->values.paddedChannels / 8, names_[static_cast<size_t>(p->factor)], t.stream.name));
      continue;
    }
    const char* init = isMax ? "-LLMC_INF" : "0.0f";
    emit(0, fmt::format("float {}[2] = {{{}, {}}};  // accumulator: {} over {}", name, init, init, isMax ? "max" : "sum",
                        t.stream.name));
    if (slots_[k].keepsPrevious) emit(0, fmt::format("float {}_prev[2];", name));
  }
}

// The loop over the stream's steps: the next step's tiles, the scores, the
// step's elementwise work and the products.
void CudaWriter::tcsSteps(const TcsBody& b) {
  const TensorCoreStream& t = b.t;
  const bool warpgroup = b.warpgroup;
  const char* const issuer = b.issuer;
  // With the TMA, n counts the steps: step n fills its stage for the (n / 2)-th time.
  // Measured on the H200 (2026-12-02): three or four stages, loading 2 or 3
  // steps ahead, ran these streams no faster (RoPE's backward 133 us at 2,
  // 134 at 3 and 4): a step waits on its instructions, not on its tiles.
  // Nor did leaving a step's products in flight until the next step's scores
  // (their wait then frees the stage, the next tiles issued after it): on an
  // H100 (2026-12-06, B=32 H=12 T=1024 D=64) dK/dV 350 -> 378 us, dQ 195 ->
  // 214, the forward 155 -> 163.
  for (const StagedStepOutput& o : t.stagedOutputs)
    emit(0, fmt::format("llmc_bf16* const {0}_staged = reinterpret_cast<llmc_bf16*>(smem + {1} + warp * {2});  // the warp's tile of {0}",
                        names_[static_cast<size_t>(o.value)], o.smemOffset, StagedStepOutput::kWarpBytes));
  const int step = open(0, fmt::format("for (int c0 = c_first, stage = 0{}; c0 <= c_last; c0 += {}, stage ^= 1{})",
                                       warpgroup ? ", n = 0" : "", kStreamPositionsPerStep, warpgroup ? ", ++n" : ""));
  tcsPrefetchColumns(b, step);
  // The next step's tiles load while this one computes; the barrier at the
  // end of a step frees the stage they overwrite.
  const std::string nextStep = fmt::format("c0 + {}", kStreamPositionsPerStep);
  const int next = open(step, fmt::format("if ({} <= c_last)", nextStep));
  if (warpgroup) tcsTmaStep(b, next, "(stage ^ 1)", nextStep, false);
  else tcsLoadStep(b, next, "(stage ^ 1)", nextStep);
  close(next);
  if (warpgroup) {
    emit(step, "llmc::stream::wait_tiles(stage_full + 8 * stage, (n >> 1) & 1);");
  } else {
    emit(step, "llmc::sm80::detail::cp_async_commit();");
    emit(step, "llmc::sm80::detail::cp_async_wait<1>();");
    emit(step, "__syncthreads();");
  }
  // The scores: from the rows' fragments by each warp, or from both tiles by the warpgroup,
  // which issues them all before it waits.
  std::string scoreFragments;
  for (size_t k = 0; k < t.scores.size(); ++k) {
    const StreamScore& sc = t.scores[k];
    const std::string columns = fmt::format("llmc::smem_addr(smem + {} + stage * {})", sc.columns.smemOffset,
                                            sc.columns.stageBytes());
    emit(step, fmt::format("float sc{}[8][4];", k));
    if (warpgroup)
      emit(step, fmt::format("llmc::stream::warpgroup_scores<{}>(sc{}, llmc::smem_addr(smem + {}), {});",
                             sc.columns.paddedChannels, k, sc.rows.smemOffset, columns));
    else
      emit(step, fmt::format("llmc::stream::warp_scores<{}>(sc{}, fa{}, {});", sc.columns.paddedChannels, k, k, columns));
    scoreFragments += fmt::format("{}sc{}", k ? ", " : "", k);
  }
  if (warpgroup) emit(step, fmt::format("llmc::stream::warpgroup_wait({});", scoreFragments));
  for (const StreamProduct& p : t.products) emit(step, fmt::format("float w{}[8][4];", p.slot));
  for (size_t k = 0; k < t.rowProducts.size(); ++k) emit(step, fmt::format("float wr{}[8][4];", k));
  const bool partialSteps = t.stream.size % kStreamPositionsPerStep != 0;
  if ((t.skip || partialSteps) && t.products.size() <= 1) {
    // A step whose every row and position the comparison leaves unmasked
    // (a causal mask's keys before the block's first query) and whose
    // positions all lie inside the axis (every step but a ragged last) runs
    // without the mask, the clamps of its positions and their validity.
    // Measured on the H200 (GPT-2 d12, 2026-11-30): the attention forward 6%
    // and its dQ stream 15% faster; its dK/dV stream, two products (twice
    // the step's code, copied), 5% slower: that one keeps a single copy.
    std::string test = t.skip ? maskFreeText(*t.skip, stepBox("c0")) : "";
    if (partialSteps)
      test += fmt::format("{}c0 + {} <= {}", test.empty() ? "" : " && ", kStreamPositionsPerStep, t.stream.size);
    const std::string plain = fresh(t.skip ? "unmasked" : "whole");
    emit(step, fmt::format("const bool {} = {};", plain, test));
    const int fast = open(step, fmt::format("if ({})", plain));
    if (t.skip)
      for (const NeutralCondition& c : t.skip->conditions) fixed_[c.node] = c.neutralWhen ? "false" : "true";
    wholeStep_ = true;
    tcsElementwise(b, fast);
    wholeStep_ = false;
    fixed_.clear();
    close(fast);
    const int slow = open(step, fmt::format("if (!{})", plain));
    tcsElementwise(b, slow);
    close(slow);
  } else {
    tcsElementwise(b, step);
  }
  tcsStoreStaged(b, step);
  std::string productFragments;
  for (const StreamProduct& p : t.products) {
    productFragments += fmt::format("{}{}", productFragments.empty() ? "" : ", ", slots_[static_cast<size_t>(p.slot)].name);
    emit(step, fmt::format("unsigned fw{}[4][4];", p.slot));
    emit(step, fmt::format("llmc::stream::weight_fragments(fw{0}, w{0});", p.slot));
    emit(step, fmt::format("llmc::stream::{}_accumulate<{}>({}, fw{}, llmc::smem_addr(smem + {} + stage * {}));",
                           issuer, p.values.paddedChannels, slots_[static_cast<size_t>(p.slot)].name, p.slot, p.values.smemOffset,
                           p.values.stageBytes()));
  }
  if (warpgroup) emit(step, fmt::format("llmc::stream::warpgroup_wait({});", productFragments));
  tcsRowProducts(b, step);
  tcsStoreAlongAhead(step);
  emit(step, "__syncthreads();");
  close(step);
}

// The step's elementwise work at the lane's fragment elements, under `parent`.
void CudaWriter::tcsElementwise(const TcsBody& b, int parent) {
  const Env& env = b.env;
  // The running maxima first: the sums are rescaled by them.
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max) continue;
    Env e = env;
    const int rows = openRows(parent, e);
    std::string stepMax = fresh("step_max");
    emit(rows, fmt::format("float {} = -LLMC_INF;", stepMax));
    std::vector<int> opened;
    std::string valid;
    const int at = openColumns(rows, e, opened, valid);
    emit(at, fmt::format("{0} = fmaxf({0}, {1});", stepMax, masked(valid, core(static_cast<int>(k), e), "-LLMC_INF")));
    closeAll(opened);
    const std::string ref = slotRef(static_cast<int>(k), e);
    if (slots_[k].keepsPrevious) emit(rows, fmt::format("{}_prev[{}] = {};", slots_[k].name, fragment_.half, ref));
    emit(rows, fmt::format("{0} = fmaxf({0}, llmc::stream::quad_max({1}));", ref, stepMax));
    close(rows);
  }
  {
    Env e = env;
    const int rows = openRows(parent, e);
    std::map<int, std::string> rescaleOf;  // by max slot
    for (size_t k = 0; k < slots_.size(); ++k) {
      const int m = slots_[k].maxSlotOfRescale;
      if (m < 0) continue;
      if (!rescaleOf.count(m))
        rescaleOf[m] = define(rows, "float", "rescale",
                              fmt::format("{}({}_prev[{}], {})", rescale(), slots_[static_cast<size_t>(m)].name,
                                          fragment_.half, slotRef(m, e)));
      const std::string factor = rescalePower(rescaleOf[m], static_cast<int>(k));
      if (const StreamProduct* p = productOf(static_cast<int>(k)))
        emit(rows, fmt::format("_Pragma(\"unroll\") for (int n = 0; n < {0}; ++n) {{ {1}[n][2 * {2}] *= {3}; "
                               "{1}[n][2 * {2} + 1] *= {3}; }}  // rescaled as the max moves",
                               p->values.paddedChannels / 8, slots_[k].name, fragment_.half, factor));
      else emit(rows, fmt::format("{} *= {};  // rescaled as the max moves", slotRef(static_cast<int>(k), e), factor));
    }
    std::vector<int> opened;
    std::string valid;
    const int at = openColumns(rows, e, opened, valid);
    for (size_t k = 0; k < slots_.size(); ++k) {
      if (stream_.slots[k].kind == AccumulatorSlot::Kind::Max) continue;
      if (const StreamProduct* p = productOf(static_cast<int>(k)))
        emit(at, fmt::format("w{}[{}][2 * {} + {}] = {};", k, fragment_.column, fragment_.half, fragment_.element,
                             masked(valid, core(static_cast<int>(k), e, p->factor), "0.0f")));
      else
        emit(at, fmt::format("{} += {};", slotRef(static_cast<int>(k), e), masked(valid, core(static_cast<int>(k), e), "0.0f")));
    }
    // A row product's weights, 0 past the ends of the rows and the stream:
    // they sum over the block's rows.
    const std::string inside = valid.empty()        ? rowInside_
                               : rowInside_.empty() ? valid
                                                    : valid + " && " + rowInside_;
    for (size_t k = 0; k < b.t.rowProducts.size(); ++k)
      emit(at, fmt::format("wr{}[{}][2 * {} + {}] = {};", k, fragment_.column, fragment_.half, fragment_.element,
                           masked(inside, value(b.t.rowProducts[k].weights, e), "0.0f")));
    // The outputs along the stream at the element (a row past the end is
    // the last one again, a position past the end the last one: not stored).
    std::vector<NodeId> elementwise;
    for (NodeId o : b.t.stepOutputs)
      if (!tcsStageOutput(b, o, e, opened) && !tcsPairStore(b, o, e, opened)) elementwise.push_back(o);
    if (!elementwise.empty()) {
      const int stored = inside.empty() ? at : open(at, fmt::format("if ({})", inside));
      for (NodeId o : elementwise) store(stored, o, e);
      if (stored != at) close(stored);
    }
    closeAll(opened);
    close(rows);
  }
}

// Names the registers of the values the plan loads ahead.
void CudaWriter::tcsFindPrefetched(const TcsBody& b) {
  prefetched_.clear();
  int staged = 0;
  for (const StreamPrefetch& p : b.t.prefetched) {
    const std::string& name = names_[static_cast<size_t>(p.value)];
    // Quotients are x * (1 / y) only where division is approximate (reciprocal()).
    const bool reciprocal = p.staged() && p.divisor && approximate_;
    prefetched_[p.value] = {fresh(name + (p.staged() ? "_s" : "_ahead")), p.alongStream, p.axes, p.smemOffset,
                            p.staged() ? staged++ % 2 : 0, reciprocal ? fresh(name + "_rcp_s") : ""};
  }
}

std::string CudaWriter::stagedRead(const std::string& array) const {
  return fmt::format("{}[stage * {} + 8 * {} + 2 * (lane & 3) + {}]", array, kStreamPositionsPerStep, fragment_.column,
                     fragment_.element);
}

// The staged values along the stream (StreamPrefetch::staged) at the step
// from `first`: a thread of the value's half loads its position and, with
// `into` a stage, stores it there; else it keeps it in NAME_next, stored
// into the other stage at the end of the step (tcsStoreAlongAhead).
void CudaWriter::tcsStageAlong(const TcsBody& b, int scope, const std::string& first, const std::string& into) {
  const Axis& c = b.t.stream;
  for (const auto& [id, ahead] : prefetched_) {
    if (!ahead.staged()) continue;
    if (into.empty()) emit(scope, fmt::format("float {}_next = 0.0f;", ahead.name));
    if (into.empty() && !ahead.reciprocal.empty()) emit(scope, fmt::format("float {}_next = 0.0f;", ahead.reciprocal));
    const std::string nextRuns = into.empty() ? fmt::format("{} + {} <= c_last && ", first, kStreamPositionsPerStep) : "";
    const int mine = open(scope, fmt::format("if ({}threadIdx.x / {} == {})", nextRuns, kStreamPositionsPerStep, ahead.half));
    Env e = b.env;
    std::string position = fmt::format("{} + {} + threadIdx.x % {}", first, into.empty() ? kStreamPositionsPerStep : 0,
                                       kStreamPositionsPerStep);
    if (c.size % kStreamPositionsPerStep != 0) position = fmt::format("min({}, {})", position, c.size - 1);
    e[c.name] = {define(mine, "int", "i_" + c.name, position), mine};
    prefetching_ = true;
    std::string loaded = load(g_.node(id), storedAt(ahead, e), mine);
    prefetching_ = false;
    std::vector<std::pair<std::string, std::string>> stores = {{ahead.name, loaded}};
    if (!ahead.reciprocal.empty()) {
      const bool named = std::all_of(loaded.begin(), loaded.end(), [](char c) { return std::isalnum(c) || c == '_'; });
      if (!named) loaded = define(mine, "float", names_[static_cast<size_t>(id)], loaded);
      stores = {{ahead.name, loaded}, {ahead.reciprocal, fmt::format("llmc_fast_reciprocal({})", loaded)}};
    }
    for (const auto& [array, v] : stores)
      if (into.empty()) emit(mine, fmt::format("{}_next = {};", array, v));
      else emit(mine, fmt::format("{}[{} * {} + threadIdx.x % {}] = {};", array, into, kStreamPositionsPerStep,
                                  kStreamPositionsPerStep, v));
    close(mine);
  }
}

// The next step's staged values into the other stage, before the step's
// closing barrier (the stage was last read by the step before this one).
void CudaWriter::tcsStoreAlongAhead(int step) {
  for (const auto& [id, ahead] : prefetched_)
    for (const std::string& array : {ahead.name, ahead.reciprocal})
      if (ahead.staged() && !array.empty())
        emit(step, fmt::format("if (c0 + {0} <= c_last && threadIdx.x / {0} == {1}) {2}[(stage ^ 1) * {0} + threadIdx.x % {0}] = {2}_next;",
                               kStreamPositionsPerStep, ahead.half, array));
}

// A lane's two rows of each value read per row, before the loop.
void CudaWriter::tcsPrefetchRows(const TcsBody& b) {
  std::vector<NodeId> perRow;
  for (const auto& [id, ahead] : prefetched_)
    if (!ahead.alongStream) {
      perRow.push_back(id);
      emit(0, fmt::format("float {}[2];  // {} at the lane's rows", ahead.name, names_[static_cast<size_t>(id)]));
    }
  if (perRow.empty()) return;
  Env e = b.env;
  const int rows = openRows(0, e);
  prefetching_ = true;
  for (NodeId id : perRow)
    emit(rows, fmt::format("{}[{}] = {};", prefetched_.at(id).name, fragment_.half,
                           load(g_.node(id), storedAt(prefetched_.at(id), e), rows)));
  prefetching_ = false;
  close(rows);
}

// A lane's 16 positions of the step of each value read along the stream, at
// the top of the step: in flight while the tiles land and the scores run.
// Where the last step is ragged, one copy for whole steps (no clamps: the
// addresses are one register and constant offsets) and one for the last.
void CudaWriter::tcsPrefetchColumns(const TcsBody& b, int step) {
  const TensorCoreStream& t = b.t;
  std::vector<NodeId> along;
  tcsStageAlong(b, step, "c0", "");
  for (const auto& [id, ahead] : prefetched_)
    if (ahead.alongStream && !ahead.staged()) {
      along.push_back(id);
      emit(step, fmt::format("float {}[8][2];  // {} at the lane's positions of the step", ahead.name,
                             names_[static_cast<size_t>(id)]));
    }
  if (along.empty()) return;
  const bool ragged = t.stream.size % kStreamPositionsPerStep != 0;
  auto loads = [&](int parent) {
    Env e = b.env;
    std::vector<int> opened;
    std::string valid;
    const int at = openColumns(parent, e, opened, valid);
    prefetching_ = true;
    for (NodeId id : along)
      emit(at, fmt::format("{}[{}][{}] = {};", prefetched_.at(id).name, fragment_.column, fragment_.element,
                           load(g_.node(id), storedAt(prefetched_.at(id), e), at)));
    prefetching_ = false;
    closeAll(opened);
  };
  if (!ragged) {
    loads(step);
    return;
  }
  const int whole = open(step, fmt::format("if (c0 + {} <= {})", kStreamPositionsPerStep, t.stream.size));
  wholeStep_ = true;
  loads(whole);
  wholeStep_ = false;
  close(whole);
  const int last = open(step, "else");
  loads(last);
  close(last);
}

// The stored array's indices where the launch's axes are bound as in `launch`.
Env CudaWriter::storedAt(const Prefetched& ahead, const Env& launch) {
  Env own;
  for (const auto& [axis, launchAxis] : ahead.axes) own[axis] = launch.at(launchAxis);
  return own;
}

// The registers holding a prefetched value, where it is read at the step's
// own rows or positions and the block's batch positions.
std::optional<std::string> CudaWriter::prefetchedValue(const Node& n, const Env& own) const {
  if (!tcs_ || inTail_ || prefetching_) return std::nullopt;
  const auto it = prefetched_.find(n.id);
  if (it == prefetched_.end()) return std::nullopt;
  const Prefetched& ahead = it->second;
  for (const auto& [axis, launchAxis] : ahead.axes) {
    const std::string& at = own.at(axis).expr;
    const bool same = launchAxis == tcs_->rows.name     ? at == rowBinding_
                      : launchAxis == tcs_->stream.name ? at == columnBinding_
                                                        : at == "i_" + launchAxis;
    if (!same) return std::nullopt;
  }
  if (ahead.staged()) return stagedRead(ahead.name);
  if (ahead.alongStream) return fmt::format("{}[{}][{}]", ahead.name, fragment_.column, fragment_.element);
  return fmt::format("{}[{}]", ahead.name, fragment_.half);
}

// The slots, whole across the four lanes of a row, staged for the tail.
void CudaWriter::tcsStageSlots(const TcsBody& b) {
  const TensorCoreStream& t = b.t;
  for (size_t k = 0; k < slots_.size(); ++k) {
    const std::string& name = slots_[k].name;
    emit(0, fmt::format("float* const {}_staged = reinterpret_cast<float*>(smem + {});", name,
                        t.slotSmemOffset.at(static_cast<int>(k))));
    if (const StreamProduct* p = productOf(static_cast<int>(k))) {
      emit(0, fmt::format("_Pragma(\"unroll\") for (int n = 0; n < {}; ++n)", p->values.paddedChannels / 8));
      emit(0, fmt::format("  _Pragma(\"unroll\") for (int r = 0; r < 4; ++r) {}_staged[(warp * 16 + (lane >> 2) + 8 * (r / 2)) * "
                          "{} + 8 * n + 2 * (lane & 3) + r % 2] = {}[n][r];",
                          name, p->stagedStride(), name));
      continue;
    }
    if (stream_.slots[k].kind == AccumulatorSlot::Kind::Sum)
      emit(0, fmt::format("for (int h = 0; h < 2; ++h) {0}[h] = llmc::stream::quad_sum({0}[h]);", name));
    emit(0, fmt::format("if ((lane & 3) == 0) for (int h = 0; h < 2; ++h) {0}_staged[warp * 16 + (lane >> 2) + 8 * h] = {0}[h];",
                        name));
  }
  emit(0, "__syncthreads();");
}

// The lane's two neighbouring values of `o` along a fragment column
// (positions 2 (lane % 4) + 0 and 1), gathered into a pair by the loop over
// them (opened: the column's scope, then the element's): the pair's name.
std::string CudaWriter::tcsGatherPair(NodeId o, const Env& e, const std::vector<int>& opened) {
  const std::string pair = fresh(names_[static_cast<size_t>(o)] + "_pair");
  emit(opened[0], fmt::format("float {}[2];", pair));
  emit(opened[1], fmt::format("{}[{}] = {};", pair, fragment_.element, value(o, e)));
  return pair;
}

// An output whose innermost axis is the stream's, at the lane's two
// neighbouring positions of a fragment column (2 (lane % 4) + 0 and 1): both
// values gathered by the loop over them, then one 4-byte (bf16) or 8-byte
// (f32) store after it, where the pair lies aligned (an even stream and a
// plain array). Scalar stores a position apart left half of each sector to
// a second store: on the H100 (2026-12-05) a forward storing its 192 MB of
// scores ran 469 us against 79 predicted. False: stored element by element.
bool CudaWriter::tcsPairStore(const TcsBody& b, NodeId o, const Env& e, const std::vector<int>& opened) {
  const TensorCoreStream& t = b.t;
  const StoredArray& arr = stored_.at(o);
  const bool bf16 = arr.ctype == "llmc_bf16";
  if (g_.node(o).type.axes.back().name != t.stream.name || t.stream.size % 2 != 0 || !arr.strides.empty() ||
      (!bf16 && arr.ctype != "float") || opened.size() != 2)
    return false;
  const int column = opened[0], element = opened[1];
  const std::string pair = tcsGatherPair(o, e, opened);
  Env first = e;
  const std::string position = fmt::format("c0 + 8 * {} + 2 * (lane & 3)", fragment_.column);
  first[t.stream.name] = {fmt::format("({})", position), column};
  std::string inside = rowInside_;
  if (t.stream.size % kStreamPositionsPerStep != 0 && !wholeStep_)
    inside = fmt::format("{}{} < {}", inside.empty() ? "" : inside + " && ", position, t.stream.size);
  const std::string target = fmt::format("{} + {}", arr.param, offset(o, first));
  const std::string write = bf16 ? fmt::format("*reinterpret_cast<unsigned*>({}) = llmc_pack_bf16x2({}[0], {}[1]);", target, pair, pair)
                                 : fmt::format("*reinterpret_cast<float2*>({}) = make_float2({}[0], {}[1]);", target, pair, pair);
  afterClose_[element].push_back(inside.empty() ? write : fmt::format("if ({}) {}", inside, write));
  return true;
}

// An output stored through shared memory (StagedStepOutput): the lane's two
// neighbouring positions written into its warp's tile at once, after the
// loop over them. False: not staged.
bool CudaWriter::tcsStageOutput(const TcsBody& b, NodeId o, const Env& e, const std::vector<int>& opened) {
  if (std::none_of(b.t.stagedOutputs.begin(), b.t.stagedOutputs.end(), [&](const StagedStepOutput& s) { return s.value == o; }))
    return false;
  const std::string pair = tcsGatherPair(o, e, opened);
  afterClose_[opened[1]].push_back(fmt::format(
      "*reinterpret_cast<unsigned*>({}_staged + ((lane >> 2) + 8 * {}) * {} + 8 * {} + 2 * (lane & 3)) = llmc_pack_bf16x2({}[0], {}[1]);",
      names_[static_cast<size_t>(o)], fragment_.half, StagedStepOutput::kPitch, fragment_.column, pair, pair));
  return true;
}

// The staged outputs' tiles, once the warp's lanes wrote them: 16 bytes a
// lane, 8 consecutive lanes along a row.
void CudaWriter::tcsStoreStaged(const TcsBody& b, int step) {
  const TensorCoreStream& t = b.t;
  if (t.stagedOutputs.empty()) return;
  constexpr int kVectors = kStreamPositionsPerStep / StagedStepOutput::kVector;  // a row's
  emit(step, "__syncwarp();");
  for (const StagedStepOutput& o : t.stagedOutputs) {
    const std::string name = names_[static_cast<size_t>(o.value)];
    const int each = open(step, fmt::format("_Pragma(\"unroll\") for (int k = 0; k < {}; ++k)", 16 * kVectors / 32));
    emit(each, fmt::format("const int q = lane + 32 * k, row = q / {}, vector = q % {};", kVectors, kVectors));
    Env e = b.env;
    e[t.rows.name] = {define(each, "int", "i_" + t.rows.name, fmt::format("t_{} + warp * 16 + row", t.rows.name)), each};
    e[t.stream.name] = {define(each, "int", "i_" + t.stream.name, fmt::format("c0 + vector * {}", StagedStepOutput::kVector)), each};
    std::string inside;
    auto within = [&](const Axis& a, int64_t tile) {
      if (a.size % tile != 0) inside += fmt::format("{}{} < {}", inside.empty() ? "" : " && ", e.at(a.name).expr, a.size);
    };
    within(t.rows, kStreamRowsPerBlock);
    within(t.stream, kStreamPositionsPerStep);
    const std::string write =
        fmt::format("*reinterpret_cast<uint4*>({} + {}) = *reinterpret_cast<const uint4*>({}_staged + row * {} + vector * {});",
                    stored_.at(o.value).param, offset(o.value, e), name, StagedStepOutput::kPitch, StagedStepOutput::kVector);
    emit(each, inside.empty() ? write : fmt::format("if ({}) {}", inside, write));
    close(each);
  }
}

// The outputs along the stream at the positions of the steps the block
// skipped (before c_first and past c_last's step), 0 there by the laws
// (step_skip.h, skipKeepingZeros): the block's threads store zeros across its
// rows and those positions, consecutive threads along the output's innermost
// axis of the two (the positions: a warp a row, its lanes along them, no
// division by their runtime count); 8 zeros a thread in one 16-byte store
// where that axis holds whole vectors of a plain bf16 array (the skipped
// positions start and end on whole steps or the axis' end, multiples of 8).
void CudaWriter::tcsSkippedOutputs(const TcsBody& b) {
  const TensorCoreStream& t = b.t;
  if (!t.skip || t.stepOutputs.empty()) return;
  const int64_t positions = t.stream.size;
  // The positions the steps run: none where every step was skipped.
  const std::string runFirst = fresh("run_first"), runEnd = fresh("run_end"), skipped = fresh("skipped");
  emit(0, fmt::format("const int {} = min(c_first, {});", runFirst, positions));
  emit(0, fmt::format("const int {} = c_first <= c_last ? min(c_last + {}, {}) : {};", runEnd, kStreamPositionsPerStep,
                      positions, runFirst));
  emit(0, fmt::format("const int {} = {} - ({} - {});  // positions of the skipped steps", skipped, positions, runEnd, runFirst));
  for (NodeId o : t.stepOutputs) {
    const StoredArray& arr = stored_.at(o);
    const Axis& innermost = g_.node(o).type.axes.back();
    const bool rowsInnermost = innermost.name == t.rows.name;
    const int v = arr.ctype == "llmc_bf16" && arr.strides.empty() && innermost.size % 8 == 0 ? 8 : 1;
    std::string row = v > 1 ? fmt::format("q % {} * {}", kStreamRowsPerBlock / v, v) : fmt::format("q % {}", kStreamRowsPerBlock);
    std::string nth = fmt::format("q / {}", kStreamRowsPerBlock / v);
    int q = -1, lanes = -1;
    if (rowsInnermost) {
      q = open(0, fmt::format("for (int q = threadIdx.x; q < {} * {}; q += blockDim.x)", kStreamRowsPerBlock / v, skipped));
    } else {
      lanes = open(0, fmt::format("for (int r = threadIdx.x / 32; r < {}; r += blockDim.x / 32)", kStreamRowsPerBlock));
      q = open(lanes, fmt::format("for (int q = threadIdx.x % 32; q < {}{}; q += 32)", skipped, v > 1 ? " / 8" : ""));
      row = "r", nth = v > 1 ? "q * 8" : "q";
    }
    floor_ = q;
    Env e = b.env;
    e[t.rows.name] = {define(q, "int", "i_" + t.rows.name, fmt::format("{} + {}", b.rowOrigin, row)), q};
    if (t.rows.size % kStreamRowsPerBlock != 0)
      emit(q, fmt::format("if ({} >= {}) continue;  // past the end of the rows", e.at(t.rows.name).expr, t.rows.size));
    // The nth skipped position: those before c_first, then those past the run.
    const std::string n = define(q, "int", "n", nth);
    e[t.stream.name] = {define(q, "int", "i_" + t.stream.name, fmt::format("{0} < {1} ? {0} : {0} + ({2} - {1})", n, runFirst, runEnd)), q};
    if (v > 1) emit(q, fmt::format("*reinterpret_cast<uint4*>({} + {}) = make_uint4(0, 0, 0, 0);", arr.param, offset(o, e)));
    else emit(q, fmt::format("{}[{}] = {};", arr.param, offset(o, e), storeConversion(arr, "0.0f")));
    close(q);
    if (lanes >= 0) close(lanes);
  }
}

// After the loop: the outputs, from the staged slots.
void CudaWriter::tcsTail(TcsBody& b, WrittenKernel& out) {
  const TensorCoreStream& t = b.t;
  const bool warpgroup = b.warpgroup;
  const std::string& rowOrigin = b.rowOrigin;
  Env& env = b.env;
  inTail_ = true;
  // The tail: an output whose innermost axis is a product's channels is
  // stored by threads along the channels (coalesced; 8 a thread and one
  // 16-byte store where bf16), each other output by a thread per row.
  std::vector<NodeId> byRow;
  tcsSkippedOutputs(b);
  for (NodeId o : plan_.outputs) {
    if (std::any_of(t.rowProducts.begin(), t.rowProducts.end(), [&](const StreamRowProduct& r) { return r.contraction == o; }) ||
        std::find(t.stepOutputs.begin(), t.stepOutputs.end(), o) != t.stepOutputs.end())
      continue;  // added or stored by the steps
    const Axis* channel = channelsInnermost(o);
    if (!channel) {
      byRow.push_back(o);
      continue;
    }
    const bool eight = channel->size % 8 == 0 && stored_.at(o).ctype == "llmc_bf16";
    const int64_t perRow = eight ? channel->size / 8 : channel->size;
    const int q = open(0, fmt::format("for (int q = threadIdx.x; q < {}; q += blockDim.x)", kStreamRowsPerBlock * perRow));
    floor_ = q;
    emit(q, fmt::format("const int p = q / {};", perRow));
    Env e = env;
    e[t.rows.name] = {define(q, "int", "i_" + t.rows.name, rowOrigin + " + p"), q};
    if (t.rows.size % kStreamRowsPerBlock != 0)
      emit(q, fmt::format("if ({} >= {}) continue;  // past the end of the rows", e.at(t.rows.name).expr, t.rows.size));
    int at = q;
    if (eight) {
      const std::string base = define(q, "int", "i_" + channel->name + "_8", fmt::format("(q % {}) * 8", perRow));
      at = openEightPoints(q, q, channel->name, base, e);
    } else {
      e[channel->name] = {define(q, "int", "i_" + channel->name, fmt::format("q % {}", perRow)), q};
    }
    store(at, o, e);
    if (at != q) close(at);
    close(q);
  }
  if (!byRow.empty()) {
    const int point = open(0, fmt::format("for (int p = threadIdx.x; p < {}; p += blockDim.x)", kStreamRowsPerBlock));
    floor_ = point;
    emit(point, fmt::format("const int i_{0} = {1} + p;", t.rows.name, rowOrigin));
    if (t.rows.size % kStreamRowsPerBlock != 0) emit(point, fmt::format("if (i_{} >= {}) continue;  // past the end of the rows", t.rows.name, t.rows.size));
    env[t.rows.name] = {"i_" + t.rows.name, point};
    storeOutputs(point, env, byRow);
    close(point);
  }
  if (warpgroup)
    for (const StreamTile* tile : t.loadedTiles()) out.tensorMaps.push_back(tile->tensorMap);
  out.streamNote = fmt::format("stream over {} in steps of {} positions: scores and products by {}, the slots in "
                               "registers",
                               t.stream.name, kStreamPositionsPerStep,
                               warpgroup ? "wgmma (the block's warpgroup)" : "mma.sync");
}

}  // namespace llmc::cuda_writer
