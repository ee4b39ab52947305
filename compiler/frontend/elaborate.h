// Elaboration: from the syntax tree of a program to the flat, typed IR of one
// entry diagram. Every composite call is instantiated with the types of its
// arguments (so a composite is generic in its woven axes and in the sizes its
// signature leaves open) and inlined; every type and size is checked on the way,
// with errors pointing at the diagram text and notes giving the call chain.
#pragma once

#include <string>

#include "frontend/program.h"
#include "ir/ir.h"

namespace llmc {

// The diagram elaborated when none is named: the last one in the main file.
std::string defaultEntry(const Program& program);

Graph elaborate(const Program& program, const std::string& entry, const SizeBindings& sizes);

}  // namespace llmc
