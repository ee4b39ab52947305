#include "frontend/resource_limits.h"

#include <fmt/format.h>

#include "frontend/source.h"

namespace llmc {

int64_t sizeProduct(int64_t a, int64_t b, std::string_view what) {
  if (auto product = checkedMul(a, b)) return *product;
  throw CompileError(SourceLoc{}, fmt::format("the sizes are too large: {} does not fit in 64 bits ({} * {})", what, a, b));
}

}  // namespace llmc
