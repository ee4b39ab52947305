// Elaboration: from the syntax tree of a program to the flat, typed IR of one
// entry diagram. Every composite call is instantiated with the types of its
// arguments (so a composite is generic in its woven axes and in the sizes its
// signature leaves open) and inlined; every type and size is checked on the way,
// with errors pointing at the diagram text and notes giving the call chain.
#pragma once

#include <set>
#include <string>

#include "frontend/program.h"
#include "ir/ir.h"

namespace llmc {

// The diagram elaborated when none is named: the last one in the main file.
std::string defaultEntry(const Program& program);

// `usedSizes`, if given, gets the names of `sizes` the diagrams read.
Graph elaborate(const Program& program, const std::string& entry, const SizeBindings& sizes,
                std::set<std::string>* usedSizes = nullptr);

}  // namespace llmc
