// parallelFor (common/parallel_for.h): every index once, whatever the split;
// the exception of the lowest index that threw.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel_for.h"

using namespace llmc;

TEST_CASE("parallelFor runs every index once, on one thread or several", "[parallel]") {
  for (const size_t perThreadMin : {size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<std::atomic<int>> runs(500);
    parallelFor(runs.size(), perThreadMin, [&](size_t i) { runs[i] += 1; });
    for (size_t i = 0; i < runs.size(); ++i) CHECK(runs[i] == 1);
  }
  parallelFor(0, 1, [](size_t) { FAIL("no index to run"); });
}

TEST_CASE("parallelFor rethrows the exception of the lowest index that threw", "[parallel]") {
  for (const size_t perThreadMin : {size_t{1}, size_t{1000}}) {
    try {
      parallelFor(400, perThreadMin, [](size_t i) {
        if (i == 150 || i == 390) throw std::runtime_error(std::to_string(i));
      });
      FAIL("nothing thrown");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "150");
    }
  }
}
