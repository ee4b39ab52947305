// What the two dump programs for the PyTorch comparisons share: parsing
// their command lines and writing text files.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "frontend/program.h"

namespace llmc::dump_support {

inline int64_t parseWholeNumber(const std::string& name, const std::string& text, int64_t minimum) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < minimum)
    throw std::invalid_argument(fmt::format("{}: '{}' is not a whole number >= {}", name, text, minimum));
  return value;
}

// "B=3,T=16": each name must be one of the defaults' names.
inline void parseSizes(const std::string& text, SizeBindings& sizes) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (eq == std::string::npos || !sizes.count(name))
      throw std::invalid_argument(
          fmt::format("--sizes: expected NAME=N with NAME one of B T maxT L C H V Vp, got '{}'", item));
    sizes[name] = parseWholeNumber("--sizes " + name, item.substr(eq + 1), 1);
    start = end + 1;
  }
}

inline void writeText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}

}  // namespace llmc::dump_support
