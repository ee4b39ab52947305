// Integer arithmetic on sizes read from files or given by users: a product or
// sum that does not fit is reported, never wrapped into a small number that
// passes a size check.
#pragma once

#include <cstdint>
#include <optional>

namespace llmc {

template <typename T>
std::optional<T> checkedMul(T a, T b) {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

template <typename T>
std::optional<T> checkedAdd(T a, T b) {
  T r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace llmc
