// llmc-train's command line against llm.c's flags (train_gpt2.cu): -h N
// (HellaSwag) beside -h alone (help), -k, -d -1, -m -1, -a, -nk/-nm, -sl/-sg,
// -w, -r 2, the flags accepted for llm.c's scripts, --shuffle's default; and
// the pieces of the loop they drive: the outlier detector and which
// checkpoints -nk deletes.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "outlier_detector.h"
#include "train_options.h"
#include "train_state.h"

using namespace llmc;
using Catch::Matchers::Contains;

namespace {

TrainOptions parse(std::vector<std::string> words) {
  words.insert(words.begin(), {"llmc-train", "-i", "x_*.bin"});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parseTrainOptions(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("llmc-train -h followed by 0 or 1 is llm.c's HellaSwag switch", "[train][options]") {
  CHECK_FALSE(parse({}).hellaswag);
  CHECK(parse({"-h", "1"}).hellaswag);
  CHECK_FALSE(parse({"-h", "1", "-h", "0"}).hellaswag);
  CHECK(parse({"--hellaswag", "1"}).hellaswag);
  CHECK(parse({"-h", "1", "--hellaswag-file", "e.bin"}).hellaswagFile == "e.bin");
  CHECK(parse({}).hellaswagFile == "dev/data/hellaswag/hellaswag_val.bin");  // llm.c's path
  CHECK_THROWS_WITH(parse({"-h", "2"}), Contains("-h expects 0 or 1"));
  // -h with no number after it (alone, last, or before another flag) is help:
  // it exits, which the end-to-end test checks (tests/train/llm_c_flags.sh).
}

TEST_CASE("llmc-train -k picks llm.c's learning rate schedule", "[train][options]") {
  CHECK(parse({}).lrSchedule == LrScheduleKind::Cosine);
  CHECK(parse({"-k", "linear"}).lrSchedule == LrScheduleKind::Linear);
  CHECK(parse({"-k", "constant"}).lrSchedule == LrScheduleKind::Constant);
  CHECK(parse({"--lr-schedule", "wsd"}).lrSchedule == LrScheduleKind::Wsd);
  CHECK_THROWS_WITH(parse({"-k", "exp"}), Contains("unknown learning rate schedule 'exp'"));
}

TEST_CASE("llmc-train -d -1 and -m -1 are llm.c's defaults", "[train][options]") {
  CHECK(parse({"-d", "-1"}).totalBatchTokens == 0);
  CHECK(resolveTotalBatch(parse({"-b", "2", "-t", "8", "-d", "-1"}), 3) == 48);
  CHECK_THROWS_WITH(parse({"-d", "-2"}), Contains("-d must be positive"));
  CHECK(parse({"-m", "-1"}).valMaxSteps == -1);
  CHECK_THROWS_WITH(parse({"-m", "0"}), Contains("-m must be positive"));
}

TEST_CASE("training data is shuffled by default, as llm.c's; --shuffle 0 turns it off", "[train][options]") {
  CHECK(parse({}).shuffle);
  CHECK_FALSE(parse({"--shuffle", "0"}).shuffle);
  CHECK_FALSE(parse({"--shuffle=0"}).shuffle);
  CHECK(parse({"--shuffle", "0", "--shuffle", "1"}).shuffle);
  CHECK(parse({"--shuffle", "0", "--shuffle", "-x", "3"}).shuffle);  // the old switch still works
  CHECK_THROWS_WITH(parse({"--shuffle", "2"}), Contains("--shuffle expects 0 or 1"));
  // -a 1 overfits the first batch: nothing to shuffle (llm.c turns it off too).
  const TrainOptions overfit = parse({"-a", "1"});
  CHECK(overfit.overfitSingleBatch);
  CHECK_FALSE(overfit.shuffle);
}

TEST_CASE("llmc-train -nk, -nm, -sl, -sg, -w, -r 2 and the accepted no-op flags", "[train][options]") {
  const TrainOptions o = parse({"-nk", "3", "-nm", "100", "-sl", "5", "-sg", "4.5", "-w", "0", "-r", "2", "-f", "0",
                                "-ge", "2", "-lg", "10"});
  CHECK(o.checkpointsToKeep == 3);
  CHECK(o.majorCheckpointEvery == 100);
  CHECK(o.skipUpdateLossZ == 5.0);
  CHECK(o.skipUpdateGradZ == 4.5);
  CHECK_FALSE(o.masterWeights);
  CHECK(o.recompute == 2);
  CHECK(parse({}).masterWeights);
  CHECK_THROWS_WITH(parse({"-sl", "-1"}), Contains("-sl must be a z-score >= 0"));
  CHECK_THROWS_WITH(parse({"-r", "3"}), Contains("-r expects 0, 1 or 2"));
  CHECK_THROWS_WITH(parse({"-ge", "3"}), Contains("-ge expects 0, 1 or 2"));
  CHECK_THROWS_WITH(parse({"-nk", "-1"}), Contains("-nk must not be negative"));
}

TEST_CASE("what only the CPU path does is refused with --device cuda, by flag", "[train][options]") {
  CHECK(cpuPathOnlyFlags(parse({})).empty());
  CHECK(cpuPathOnlyFlags(parse({"-h", "1", "-sl", "2", "-sg", "3"})) == std::vector<std::string>{"-sl", "-sg"});
  CHECK(cpuPathOnlyFlags(parse({"-w", "0"})) == std::vector<std::string>{"-w 0"});
  CHECK(cpuPathOnlyFlags(parse({"-w", "0", "--precision", "fp32"})).empty());  // fp32 weights are their own master
  CHECK(parse({"--device", "cuda", "-h", "1"}).hellaswag);  // the GPU path scores HellaSwag too
  CHECK_THROWS_WITH(parse({"--device", "cuda", "-sl", "3"}), Contains("-sl runs on the CPU path only"));
}

TEST_CASE("the outlier detector gives llm.c's z-scores over a window of 128", "[train][outliers]") {
  OutlierDetector d;
  for (int i = 0; i < OutlierDetector::kWindow; ++i) CHECK(std::isnan(d.update(i % 2 ? 1.0 : 3.0)));
  // The window now holds 64 ones and 64 threes; the 129th value replaces the
  // first (a 3): the window is 63 threes, 65 ones and... the new value.
  const double value = 10.0;
  double sum = 0, squares = 0;
  std::vector<double> window;
  for (int i = 1; i < OutlierDetector::kWindow; ++i) window.push_back(i % 2 ? 1.0 : 3.0);
  window.push_back(value);
  for (double v : window) sum += v, squares += v * v;
  const double mean = sum / 128, sd = std::sqrt(squares / 128 - mean * mean);
  CHECK(d.update(value) == Approx((value - mean) / sd));
  OutlierDetector flat;
  for (int i = 0; i < OutlierDetector::kWindow; ++i) flat.update(2.0);
  CHECK(flat.update(2.0) == 0.0);  // no spread: z-score 0, never a skip
}

TEST_CASE("an update is skipped when a z-score passes its limit", "[train][outliers]") {
  CHECK_FALSE(skipUpdateReason(9.0, 9.0, 0, 0));  // limits off
  CHECK_FALSE(skipUpdateReason(NAN, NAN, 1, 1));  // the window still filling
  CHECK_FALSE(skipUpdateReason(2.0, 2.0, 3, 3));
  CHECK_THAT(*skipUpdateReason(3.5, 0.0, 3, 3), Contains("loss z-score of 3.5"));
  CHECK_THAT(*skipUpdateReason(0.0, 4.0, 3, 3), Contains("grad z-score of 4.0"));
  CHECK_THAT(*skipUpdateReason(5.0, 5.0, 3, 3), Contains("loss z-score"));  // the loss is looked at first
}

TEST_CASE("llmc-train -nk keeps the newest checkpoints, -nm's major ones besides", "[train][checkpoints]") {
  const std::vector<int64_t> steps = {5, 10, 15, 20, 25};
  CHECK(checkpointsToDelete(steps, 25, 0, 0).empty());  // -nk 0: keep all
  CHECK(checkpointsToDelete(steps, 25, 2, 0) == std::vector<int64_t>{5, 10, 15});
  CHECK(checkpointsToDelete(steps, 25, 1, 0) == std::vector<int64_t>{5, 10, 15, 20});
  CHECK(checkpointsToDelete(steps, 25, 5, 0).empty());
  CHECK(checkpointsToDelete(steps, 25, 2, 10) == std::vector<int64_t>{5, 15});  // 10 and 20 are major
  // A later checkpoint in the folder (of another run) is neither counted nor deleted.
  CHECK(checkpointsToDelete({5, 10, 15, 40}, 15, 2, 0) == std::vector<int64_t>{5});
}
