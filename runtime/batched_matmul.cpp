#include "batched_matmul.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace llmc {

namespace {

// The output is cut into tiles of kTileRows x kTileCols that threads take one
// at a time. A tile's rows of c (kTileCols wide) stay in L1 while the rows of
// b stream past them.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileCols = 256;
// Below this many multiply-adds, starting threads costs more than it saves.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 18;

struct Problem {
  int64_t m, k, n;
};

// Four rows of c at once: each element of b loaded feeds four multiply-adds.
template <class T>
void fourRows(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, int64_t k,
              int64_t cols) {
  T* __restrict c0 = c;
  T* __restrict c1 = c + ldc;
  T* __restrict c2 = c + 2 * ldc;
  T* __restrict c3 = c + 3 * ldc;
  for (int64_t p = 0; p < k; ++p) {
    const T a0 = a[p], a1 = a[lda + p], a2 = a[2 * lda + p], a3 = a[3 * lda + p];
    const T* __restrict bRow = b + p * ldb;
    for (int64_t j = 0; j < cols; ++j) {
      const T bj = bRow[j];
      c0[j] += a0 * bj;
      c1[j] += a1 * bj;
      c2[j] += a2 * bj;
      c3[j] += a3 * bj;
    }
  }
}

template <class T>
void oneRow(const T* a, const T* b, int64_t ldb, T* c, int64_t k, int64_t cols) {
  T* __restrict c0 = c;
  for (int64_t p = 0; p < k; ++p) {
    const T a0 = a[p];
    const T* __restrict bRow = b + p * ldb;
    for (int64_t j = 0; j < cols; ++j) c0[j] += a0 * bRow[j];
  }
}

// c[i0:i1, j0:j1] of one matrix of the batch.
template <class T>
void tile(const T* a, const T* b, T* c, const Problem& p, int64_t i0, int64_t i1, int64_t j0,
          int64_t j1) {
  const int64_t cols = j1 - j0;
  for (int64_t i = i0; i < i1; ++i) std::fill(c + i * p.n + j0, c + i * p.n + j1, T(0));
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) fourRows(a + i * p.k, p.k, b + j0, p.n, c + i * p.n + j0, p.n, p.k, cols);
  for (; i < i1; ++i) oneRow(a + i * p.k, b + j0, p.n, c + i * p.n + j0, p.k, cols);
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
      tile(a + matrix * m * k, b + matrix * k * n, c + matrix * m * n, problem,
           rowTile * kTileRows, std::min(m, (rowTile + 1) * kTileRows), colTile * kTileCols,
           std::min(n, (colTile + 1) * kTileCols));
    }
  };

  const int64_t multiplyAdds = batch * m * k * n;
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = std::min({hardware, tiles, std::max<int64_t>(1, multiplyAdds / kMinWorkPerThread)});
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
