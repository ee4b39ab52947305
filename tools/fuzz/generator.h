// The generator of random well-typed diagrams: a seed fully determines one.
#pragma once

#include <cstdint>

#include "diagram_spec.h"

namespace llmc::fuzz {

struct GeneratorOptions {
  int64_t maxElements = int64_t(1) << 16;  // per array (inputs, values, broadcasts)
  int64_t maxSize = 1100;                  // per axis
  int maxSteps = 10;                       // operations or composites drawn (each one or several statements)
  bool lowPrecision = true;                // bf16 arrays in the diagram beside f32
};

DiagramSpec generateDiagram(uint64_t seed, const GeneratorOptions& options);

}  // namespace llmc::fuzz
