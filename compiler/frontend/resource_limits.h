// The front end's resource limits, in one place. Each keeps a huge or hostile
// input (a fuzzer's, or a mistake) from crashing the compiler, running for
// hours or taking the machine's memory: past a limit the input is refused with
// an error that names the limit (docs/language.md, "Limits"). They are far
// above what a real model needs: GPT-2 d48 at B=32, T=1024 uses a hundredth of
// each or less.
#pragma once

#include <cstdint>
#include <cstddef>
#include <optional>
#include <string_view>

namespace llmc {

// Files: a diagram file (or an import) is a regular file of at most this many
// bytes; devices, FIFOs and terminals are refused before anything is read.
constexpr int64_t kMaxSourceBytes = 16 << 20;
// Imports nested deeper than this (a imports b imports c ...) are refused:
// loading recurses once per level.
constexpr int kMaxImportDepth = 64;
// Names (values, axes, diagrams, sizes): longer ones are refused by the lexer,
// which also bounds the "did you mean" search's edit distances.
constexpr size_t kMaxNameLength = 256;
// 'for' loops nested inside each other (parentheses, calls and operators have
// their own limit, 1000 levels, in the parser).
constexpr int kMaxLoopNesting = 16;
// Sizes: an axis holds at most 2^40 positions and an array at most 2^48
// elements, so that element counts times bytes, tiles and blocks (the cost
// model, the memory plan, grids) stay far inside 64 bits.
constexpr int64_t kMaxAxisSize = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 48;

// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a * b for sizes (elements, blocks, chunks) of arrays the elaborator has
// already bounded; a product that passes 64 bits anyway (a kernel's blocks
// over the axes of several arrays) is a CompileError naming `what`, never a
// wrapped, negative size.
int64_t sizeProduct(int64_t a, int64_t b, std::string_view what);

}  // namespace llmc
