// Axes a kernel's input reaches its group axes by: an input read through
// shifting views (slices, concatenations, renames: a padded sequence's
// windows) is indexed along a group axis under another name, and a block
// reads only its tile's positions of it (and a halo the model leaves out),
// not the whole axis once per tile.
#pragma once

#include <map>
#include <string>

#include "ir/ir.h"
#include "planning/fusion.h"

namespace llmc {

// For each axis of `input` (a value the kernel reads) that the kernel's
// nodes carry to exactly one of `groupAxes` through renaming views (Rename,
// Slice, Concat along it), elementwise nodes passing the names on: that
// group axis. Axes that keep their name, reach none or several, are
// streamed or looped over, or whose group axis the input has too, are left
// out.
std::map<std::string, std::string> shiftedGroupAxes(const Graph& g, const Kernel& k, NodeId input,
                                                    const std::vector<Axis>& groupAxes);

// `type` with each axis the map names renamed (sizes kept).
Type renamedAxes(const Type& type, const std::map<std::string, std::string>& renames);

}  // namespace llmc
