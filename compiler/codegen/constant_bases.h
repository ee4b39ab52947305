// Constant bases: a launch that reads a stacked array at one fixed position of
// its first axis (GPT-2's layer l of ln1w [L C] or qkvb [L 3C]) takes a
// pointer to that position instead of the literal in its indices, so that the
// layers' launches are one source: runtime/cuda/kernel_classes.h then
// compiles them once (d12's step: 190 classes of 588 sources become about
// 70, and the count no longer grows with the layers).
//
// The CUDA writer marks the literal where it writes an offset into a stored
// array (constantBaseMarker). Once a launch's function is whole,
// resolveConstantBases makes each marked pointer parameter whose every use is
// such an offset, at one same position, a pointer to that position
// (LaunchParam::offsetElements, the literal now 0); any other keeps its
// literals. A use that is neither (pointer arithmetic the writer did not
// mark) keeps them too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/module.h"

namespace llmc {

// The marker of position `position` of the first axis of the array that
// parameter `param` points to, `elements` elements from its start.
std::string constantBaseMarker(const std::string& param, int64_t position, int64_t elements);

// `function` (a launch's whole source text, markers included) with every
// marker resolved; `params`: the launch's pointer parameters, whose
// offsetElements it sets; `paramName(buffer)`: the C name of a buffer's
// parameter in the function.
std::string resolveConstantBases(const std::string& function, std::vector<LaunchParam>& params,
                                 const std::function<std::string(int)>& paramName);

}  // namespace llmc
