// The text every generated translation unit starts with: the bf16
// conversions, vector loads and stores, and the fast exp and tanh the
// writers call (docs/codegen.md).
#pragma once

#include <string>

namespace llmc {

// Needs no include path; modules with tile-library launches include llmc's
// device headers before it.
extern const char* const kPrelude;

// One function as a translation unit: the tile library's header where the
// function instantiates it (null: none), the prelude, the function.
std::string translationUnit(const char* tileLibrary, const std::string& function);

}  // namespace llmc
