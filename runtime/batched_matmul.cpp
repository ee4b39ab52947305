#include "batched_matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace llmc {

namespace {

// The output is cut into tiles that threads take one at a time; within a tile
// the depth is cut into blocks so that the slice of b being reused stays in
// cache, and each 4-row, two-vector-wide block of c is accumulated in
// registers across a whole depth block.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileCols = 256;
constexpr int64_t kDepthBlock = 256;
constexpr int64_t kBlockRows = 4;
constexpr int kBlockVectors = 2;
constexpr int64_t kVectorBytes = 16;  // SSE2: the x86-64 baseline
// Below this many multiply-adds per thread, starting threads costs more than
// it saves.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 18;

template <class T>
constexpr int64_t kVectorLanes = kVectorBytes / sizeof(T);
template <class T>
constexpr int64_t kBlockCols = kBlockVectors* kVectorLanes<T>;

struct Problem {
  int64_t m, k, n;
};

// c[0:4, 0:W] += a[0:4, 0:depth] . b[0:depth, 0:W] with the block of c in
// registers. GCC's vector extension makes the SIMD explicit: plain loops are
// not vectorised into this shape reliably.
template <class T>
void registerBlock(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
                   int64_t depth) {
  using Vector [[gnu::vector_size(kVectorBytes)]] = T;
  constexpr int64_t lanes = kVectorLanes<T>;
  // Fully unrolled, so that the accumulators live in registers even at -O2.
  Vector acc[kBlockRows][kBlockVectors] = {};
  for (int64_t p = 0; p < depth; ++p) {
    Vector bRow[kBlockVectors];
#pragma GCC unroll 8
    for (int v = 0; v < kBlockVectors; ++v)
      std::memcpy(&bRow[v], b + p * ldb + v * lanes, sizeof(Vector));
#pragma GCC unroll 8
    for (int64_t r = 0; r < kBlockRows; ++r) {
      const T ar = a[r * lda + p];
#pragma GCC unroll 8
      for (int v = 0; v < kBlockVectors; ++v) acc[r][v] += ar * bRow[v];
    }
  }
  for (int64_t r = 0; r < kBlockRows; ++r)
    for (int v = 0; v < kBlockVectors; ++v)
      for (int64_t j = 0; j < lanes; ++j) c[r * ldc + v * lanes + j] += acc[r][v][j];
}

// c[0:rows, 0:cols] += a[0:rows, 0:depth] . b[0:depth, 0:cols], a row at a
// time: for the edges of a tile that do not fill a register block.
template <class T>
void edgeBlock(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, int64_t rows,
               int64_t cols, int64_t depth) {
  for (int64_t r = 0; r < rows; ++r) {
    T* __restrict cRow = c + r * ldc;
    for (int64_t p = 0; p < depth; ++p) {
      const T ar = a[r * lda + p];
      const T* __restrict bRow = b + p * ldb;
      for (int64_t j = 0; j < cols; ++j) cRow[j] += ar * bRow[j];
    }
  }
}

// c[i0:i1, j0:j1] of one matrix of the batch.
template <class T>
void tile(const T* a, const T* b, T* c, const Problem& p, int64_t i0, int64_t i1, int64_t j0,
          int64_t j1) {
  for (int64_t i = i0; i < i1; ++i) std::fill(c + i * p.n + j0, c + i * p.n + j1, T(0));
  const int64_t blockedRowsEnd = i0 + (i1 - i0) / kBlockRows * kBlockRows;
  const int64_t blockedColsEnd = j0 + (j1 - j0) / kBlockCols<T> * kBlockCols<T>;
  for (int64_t p0 = 0; p0 < p.k; p0 += kDepthBlock) {
    const int64_t depth = std::min(kDepthBlock, p.k - p0);
    const T* aBlock = a + p0;
    const T* bBlock = b + p0 * p.n;
    for (int64_t j = j0; j < blockedColsEnd; j += kBlockCols<T>)
      for (int64_t i = i0; i < blockedRowsEnd; i += kBlockRows)
        registerBlock(aBlock + i * p.k, p.k, bBlock + j, p.n, c + i * p.n + j, p.n, depth);
    if (blockedColsEnd < j1)
      edgeBlock(aBlock + i0 * p.k, p.k, bBlock + blockedColsEnd, p.n, c + i0 * p.n + blockedColsEnd,
                p.n, blockedRowsEnd - i0, j1 - blockedColsEnd, depth);
    if (blockedRowsEnd < i1)
      edgeBlock(aBlock + blockedRowsEnd * p.k, p.k, bBlock + j0, p.n, c + blockedRowsEnd * p.n + j0,
                p.n, i1 - blockedRowsEnd, j1 - j0, depth);
  }
}

}  // namespace

template <class T>
void batchedMatmul(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t k, int64_t n) {
  const Problem problem{m, k, n};
  const int64_t rowTiles = (m + kTileRows - 1) / kTileRows;
  const int64_t colTiles = (n + kTileCols - 1) / kTileCols;
  const int64_t tiles = batch * rowTiles * colTiles;

  std::atomic<int64_t> nextTile{0};
  auto work = [&] {
    for (int64_t t; (t = nextTile.fetch_add(1)) < tiles;) {
      const int64_t matrix = t / (rowTiles * colTiles);
      const int64_t rowTile = t / colTiles % rowTiles;
      const int64_t colTile = t % colTiles;
      tile(a + matrix * m * k, b + matrix * k * n, c + matrix * m * n, problem, rowTile * kTileRows,
           std::min(m, (rowTile + 1) * kTileRows), colTile * kTileCols,
           std::min(n, (colTile + 1) * kTileCols));
    }
  };

  const int64_t multiplyAdds = batch * m * k * n;
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads =
      std::min({hardware, tiles, std::max<int64_t>(1, multiplyAdds / kMinWorkPerThread)});
  std::vector<std::thread> helpers;
  for (int64_t i = 1; i < threads; ++i) helpers.emplace_back(work);
  work();
  for (auto& helper : helpers) helper.join();
}

template void batchedMatmul<float>(const float*, const float*, float*, int64_t, int64_t, int64_t,
                                   int64_t);
template void batchedMatmul<double>(const double*, const double*, double*, int64_t, int64_t,
                                    int64_t, int64_t);

}  // namespace llmc
