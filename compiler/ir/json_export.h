// JSON export of the IR, for tools and notebooks.
#pragma once

#include <nlohmann/json.hpp>

#include "ir/ir.h"

namespace llmc {

nlohmann::json graphToJson(const Graph& graph);

}  // namespace llmc
