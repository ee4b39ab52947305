// Parses the tokens of one diagram file into a syntax tree (docs/language.md
// has the grammar). Imports are recorded, not followed: the elaborator loads them.
#pragma once

#include "frontend/ast.h"

namespace llmc {

Module parseModule(const std::shared_ptr<const SourceFile>& file);

}  // namespace llmc
