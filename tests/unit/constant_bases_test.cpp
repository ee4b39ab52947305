// A launch's pointers moved to the one position of a stacked array's first
// axis it reads (codegen/constant_bases.h), and the uses that forbid it.
#include <catch2/catch.hpp>

#include "codegen/constant_bases.h"

using namespace llmc;

namespace {

// A function reading parameter g_b (buffer 1) through `uses`, g_y (buffer 0) written.
struct Resolved {
  std::string text;
  std::vector<LaunchParam> params;
};

Resolved resolve(const std::string& uses) {
  Resolved r{"extern \"C\" __global__ void k(float* __restrict__ g_y, const float* __restrict__ g_b) {\n" + uses + "}\n",
             {{0, true}, {1, false}}};
  r.text = resolveConstantBases(r.text, r.params, [](int buffer) { return buffer == 0 ? "g_y" : "g_b"; });
  return r;
}

std::string at(int64_t position) { return constantBaseMarker("g_b", position, position * 77); }

}  // namespace

TEST_CASE("a pointer read at one position of its first axis is passed from there", "[constant-bases]") {
  const Resolved r = resolve("  g_y[i] = g_b[(" + at(2) + ") * 77 + i] + llmc_load(g_b + (" + at(2) + ") * 77 + j);\n");
  CHECK(r.params[1].offsetElements == 154);
  CHECK(r.params[0].offsetElements == 0);
  CHECK(r.text.find("g_b[(0) * 77 + i]") != std::string::npos);
  CHECK(r.text.find("g_b + (0) * 77 + j") != std::string::npos);
  CHECK(r.text.find('\x01') == std::string::npos);
}

TEST_CASE("a pointer handed to a functor whole still moves", "[constant-bases]") {
  const Resolved r = resolve("  struct f { const float* g_b; };\n  run(f{g_y, g_b});\n  x = g_b[(" + at(1) + ") * 77];\n");
  CHECK(r.params[1].offsetElements == 77);
  CHECK(r.text.find("g_b[(0) * 77]") != std::string::npos);
}

TEST_CASE("a pointer read at two positions, or used unmarked, keeps its literals", "[constant-bases]") {
  const Resolved two = resolve("  x = g_b[(" + at(1) + ") * 77] + g_b[(" + at(2) + ") * 77];\n");
  CHECK(two.params[1].offsetElements == 0);
  CHECK(two.text.find("g_b[(1) * 77] + g_b[(2) * 77]") != std::string::npos);
  const Resolved unmarked = resolve("  x = g_b[(" + at(1) + ") * 77] + g_b[i];\n");
  CHECK(unmarked.params[1].offsetElements == 0);
  CHECK(unmarked.text.find("g_b[(1) * 77] + g_b[i]") != std::string::npos);
  const Resolved cast = resolve("  x = g_b[(" + at(1) + ") * 77] + reinterpret_cast<const T*>(g_b)[3];\n");
  CHECK(cast.params[1].offsetElements == 0);
  // A name that only begins like the parameter's is another name.
  const Resolved longer = resolve("  x = g_b[(" + at(1) + ") * 77] + g_b_2[i];\n");
  CHECK(longer.params[1].offsetElements == 77);
}
