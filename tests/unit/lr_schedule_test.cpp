// llm.c's learning-rate schedules (-k), with warmup (-u) and the final
// fraction (-q), step by step against llm.c's formulas written out here.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "lr_schedule.h"

using namespace llmc;

TEST_CASE("llmc-train -k names llm.c's four schedules", "[train][lr]") {
  CHECK(parseLrScheduleKind("cosine") == LrScheduleKind::Cosine);
  CHECK(parseLrScheduleKind("linear") == LrScheduleKind::Linear);
  CHECK(parseLrScheduleKind("constant") == LrScheduleKind::Constant);
  CHECK(parseLrScheduleKind("wsd") == LrScheduleKind::Wsd);
  CHECK_THROWS_WITH(parseLrScheduleKind("step"), Catch::Contains("cosine, linear, constant or wsd"));
  for (auto kind : {LrScheduleKind::Cosine, LrScheduleKind::Linear, LrScheduleKind::Constant, LrScheduleKind::Wsd})
    CHECK(parseLrScheduleKind(lrScheduleName(kind)) == kind);
  CHECK(LrSchedule{}.kind == LrScheduleKind::Cosine);  // llm.c's default
}

TEST_CASE("cosine: warmup, then half a cosine down to LR*q", "[train][lr]") {
  LrSchedule s{1e-3, 10, 110, 0.1, LrScheduleKind::Cosine};
  CHECK(s.at(0) == Approx(1e-4));
  CHECK(s.at(9) == Approx(1e-3));
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(60) == Approx(0.55e-3));
  CHECK(s.at(35) == Approx(1e-4 + 0.5 * (1 + std::cos(M_PI * 0.25)) * 0.9e-3));
  CHECK(s.at(110) == Approx(1e-4));
}

TEST_CASE("linear: warmup, then a straight line down to LR*q", "[train][lr]") {
  LrSchedule s{1e-3, 10, 110, 0.1, LrScheduleKind::Linear};
  CHECK(s.at(0) == Approx(1e-4));
  CHECK(s.at(9) == Approx(1e-3));
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(35) == Approx(1e-3 - 0.25 * 0.9e-3));
  CHECK(s.at(60) == Approx(0.55e-3));
  CHECK(s.at(109) == Approx(1e-3 - 0.99 * 0.9e-3));
  CHECK(s.at(110) == Approx(1e-4));
}

TEST_CASE("constant: the peak at every step, warmup and -q ignored as llm.c does", "[train][lr]") {
  LrSchedule s{1e-3, 10, 110, 0.1, LrScheduleKind::Constant};
  for (int64_t step : {0, 5, 9, 10, 60, 109, 110}) CHECK(s.at(step) == Approx(1e-3));
}

TEST_CASE("wsd: warmup, stable to 80% of the steps, then 1-sqrt down to LR*q", "[train][lr]") {
  LrSchedule s{1e-3, 10, 100, 0.0, LrScheduleKind::Wsd};
  CHECK(s.at(0) == Approx(1e-4));
  CHECK(s.at(9) == Approx(1e-3));
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(79) == Approx(1e-3));
  CHECK(s.at(80) == Approx(1e-3));  // decay ratio 0
  CHECK(s.at(85) == Approx((1 - std::sqrt(0.25)) * 1e-3));
  CHECK(s.at(99) == Approx((1 - std::sqrt(0.95)) * 1e-3));
  CHECK(s.at(100) == Approx(0.0).margin(1e-15));
  LrSchedule floor{2e-3, 0, 10, 0.5, LrScheduleKind::Wsd};  // decay from step 8 to 1e-3
  CHECK(floor.at(7) == Approx(2e-3));
  CHECK(floor.at(9) == Approx(1e-3 + (1 - std::sqrt(0.5)) * 1e-3));
  CHECK(floor.at(10) == Approx(1e-3));
}

TEST_CASE("a schedule with no steps after its warmup does not divide by zero", "[train][lr]") {
  for (auto kind : {LrScheduleKind::Cosine, LrScheduleKind::Linear, LrScheduleKind::Wsd}) {
    LrSchedule s{1e-3, 5, 5, 0.1, kind};
    CHECK(std::isfinite(s.at(5)));
    CHECK(s.at(4) == Approx(1e-3));
  }
}
