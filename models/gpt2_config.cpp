#include "gpt2_config.h"

#include <fmt/format.h>

#include <stdexcept>

namespace llmc {

int64_t padVocabulary(int64_t V) { return (V + 63) / 64 * 64; }

Gpt2Config Gpt2Config::fromDepth(int64_t depth) {
  if (depth <= 0) throw std::invalid_argument(fmt::format("depth must be positive, got {}", depth));
  Gpt2Config c;
  c.L = depth;
  switch (depth) {
    case 12: c.C = 768, c.H = 12; break;
    case 24: c.C = 1024, c.H = 16; break;
    case 36: c.C = 1280, c.H = 20; break;
    case 48: c.C = 1600, c.H = 25; break;
    default: c.C = 64 * depth, c.H = depth; break;
  }
  return c;
}

Gpt2Config Gpt2Config::fromName(const std::string& name) {
  if (name.size() < 2 || name[0] != 'd' || name.find_first_not_of("0123456789", 1) != std::string::npos)
    throw std::invalid_argument(fmt::format("unknown model '{}': expected dN such as d12", name));
  return fromDepth(std::stoll(name.substr(1)));
}

int64_t Gpt2Config::parameterCount() const {
  int64_t perLayer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  return Vp * C + T * C + L * perLayer + 2 * C;
}

SizeBindings Gpt2Config::sizes(int64_t B, int64_t tokens) const {
  return {{"B", B}, {"T", tokens}, {"maxT", T}, {"L", L}, {"C", C}, {"H", H}, {"V", V}, {"Vp", Vp}};
}

}  // namespace llmc
