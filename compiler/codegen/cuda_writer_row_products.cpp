// Row products in a tensor-core stream (lowering/tensor_core_stream.h,
// StreamRowProduct; planning/row_products.h): after the step's products, each
// row product's weights are packed to bf16 and staged in shared memory, the
// warpgroup multiplies them with the values' rows tile (stream_wgmma.cuh,
// warpgroup_row_product), and every thread adds its part of the block's
// share, the step's positions by the values' channels, into the f32 output.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::tcsRowProducts(const TcsBody& b, int step) {
  const TensorCoreStream& t = b.t;
  if (t.rowProducts.empty()) return;
  for (size_t k = 0; k < t.rowProducts.size(); ++k) {
    emit(step, fmt::format("unsigned fwr{}[4][4];", k));
    emit(step, fmt::format("llmc::stream::weight_fragments(fwr{0}, wr{0});", k));
    emit(step, fmt::format("llmc::stream::store_weight_tile(llmc::smem_addr(smem + {}), fwr{});",
                           t.rowProducts[k].weightsOffset, k));
  }
  emit(step, "__syncthreads();  // every warp's weights staged before the tensor cores read them");
  std::string results;
  for (size_t k = 0; k < t.rowProducts.size(); ++k) {
    const StreamRowProduct& r = t.rowProducts[k];
    emit(step, fmt::format("float rp{}[{}][4];", k, r.values.paddedChannels / 8));
    emit(step, fmt::format("llmc::stream::warpgroup_row_product<{}>(rp{}, llmc::smem_addr(smem + {}), "
                           "llmc::smem_addr(smem + {}));",
                           r.values.paddedChannels, k, r.weightsOffset, r.values.smemOffset));
    results += fmt::format("{}rp{}", k ? ", " : "", k);
  }
  emit(step, fmt::format("llmc::stream::warpgroup_wait({});", results));
  for (size_t k = 0; k < t.rowProducts.size(); ++k) tcsAddRowProduct(b, step, k);
}

// Thread (warp w, lane l) holds the result at positions c0 + 16w + l/4 + 8h
// and channels 8n + 2(l%4) + {0, 1}: a pair of neighbours, one 8-byte
// reduction where the channels are the output's innermost, contiguous axis
// of an even length (the pair then starts 8-byte aligned), else two.
void CudaWriter::tcsAddRowProduct(const TcsBody& b, int step, size_t k) {
  const TensorCoreStream& t = b.t;
  const StreamRowProduct& r = t.rowProducts[k];
  const Axis& channel = r.values.channel;
  const Node& out = g_.node(r.contraction);
  const StoredArray& arr = stored_.at(r.contraction);
  const bool pairs = out.type.axes.back().name == channel.name && channel.size % 2 == 0 && arr.strides.empty();
  // The channels' eights that hold any (the product's width is padded to 64).
  const int eights = open(step, fmt::format("_Pragma(\"unroll\") for (int rn = 0; rn < {}; ++rn)", (channel.size + 7) / 8));
  const int h = open(eights, "_Pragma(\"unroll\") for (int h = 0; h < 2; ++h)");
  const std::string position = define(h, "int", "rp_" + t.stream.name, "c0 + warp * 16 + (lane >> 2) + 8 * h");
  const std::string first = define(h, "int", "rp_" + channel.name, "8 * rn + 2 * (lane & 3)");
  std::string inside;
  if (t.stream.size % kStreamPositionsPerStep != 0) inside = fmt::format("{} < {}", position, t.stream.size);
  if (channel.size % 8 != 0)
    inside += fmt::format("{}{} < {}", inside.empty() ? "" : " && ", first, channel.size);
  const int at = inside.empty() ? h : open(h, fmt::format("if ({})", inside));
  Env e = b.env;
  e[t.stream.name] = {position, h};
  e[channel.name] = {first, h};
  const std::string here = fmt::format("{} + {}", arr.param, offset(r.contraction, e));
  if (pairs) {
    emit(at, fmt::format("llmc::stream::add_f32x2({}, rp{}[rn][2 * h], rp{}[rn][2 * h + 1]);", here, k, k));
  } else {
    emit(at, fmt::format("atomicAdd({}, rp{}[rn][2 * h]);", here, k));
    Env second = e;
    second[channel.name] = {fmt::format("({} + 1)", first), h};
    const std::string guard = fmt::format("if ({} + 1 < {}) ", first, channel.size);
    emit(at, fmt::format("{}atomicAdd({} + {}, rp{}[rn][2 * h + 1]);", guard, arr.param, offset(r.contraction, second), k));
  }
  if (at != h) close(at);
  close(h);
  close(eights);
}

}  // namespace llmc::cuda_writer
