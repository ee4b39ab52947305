// The training state file (runtime/train/train_state.h): read back exactly;
// refused, naming the file and what is wrong, when truncated, too long, its
// counts impossibly large, or its moments not finite; written whole or not at
// all, a full disk leaving nothing behind.
#include "train_state.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "atomic_file.h"
#include "data_test_support.h"

namespace fs = std::filesystem;
using llmc::readTrainState;
using llmc::TrainState;
using llmc::writeTrainState;
using llmc::testing::DataTempDir;
using llmc::testing::readFileBytes;
using llmc::testing::writeFile;
using Catch::Matchers::Contains;

namespace {

TrainState smallState() {
  TrainState state;
  state.optimizer.step = 12;
  for (int i = 0; i < 100; ++i) {
    state.optimizer.m.push_back(0.25 * i - 3);
    state.optimizer.v.push_back(0.5 * i);
  }
  state.loaderState = {1, 2, 3, 4, 5, 6, 7, 8};
  return state;
}

void setWord(std::string& bytes, size_t word, int32_t value) { std::memcpy(bytes.data() + 4 * word, &value, 4); }
void setFloat(std::string& bytes, size_t offset, float value) { std::memcpy(bytes.data() + offset, &value, 4); }

}  // namespace

TEST_CASE("train state: written and read back exactly, nothing else left", "[train][state]") {
  DataTempDir dir("train_state_roundtrip");
  const std::string path = (dir.path / "state_00000012.bin").string();
  const TrainState state = smallState();
  writeTrainState(path, state);
  const TrainState back = readTrainState(path);
  CHECK(back.optimizer.step == 12);
  CHECK(back.optimizer.m == state.optimizer.m);
  CHECK(back.optimizer.v == state.optimizer.v);
  CHECK(back.loaderState == state.loaderState);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("train state: a broken file is refused, naming the file and the field", "[train][state]") {
  DataTempDir dir("train_state_broken");
  const std::string path = (dir.path / "state.bin").string();
  writeTrainState(path, smallState());
  const std::string good = readFileBytes(path);
  const size_t mAt = 1024, vAt = 1024 + 4 * 100;
  auto refused = [&](const std::string& bytes) {
    writeFile(path, bytes);
    readTrainState(path);
  };
  SECTION("non-finite or negative moments") {
    std::string bytes = good;
    setFloat(bytes, mAt + 4 * 7, std::numeric_limits<float>::quiet_NaN());
    CHECK_THROWS_WITH(refused(bytes), path + ": the optimizer's first moment m holds a non-finite value (nan) at "
                                             "index 7; refusing to resume from it");
    bytes = good;
    setFloat(bytes, vAt + 4 * 99, std::numeric_limits<float>::infinity());
    CHECK_THROWS_WITH(refused(bytes), path + ": the optimizer's second moment v holds a non-finite value (inf) at "
                                             "index 99; refusing to resume from it");
    bytes = good;
    setFloat(bytes, vAt, -1.0f);
    CHECK_THROWS_WITH(refused(bytes), Contains("second moment v holds a negative value (-1) at index 0"));
  }
  SECTION("a parameter count near 2^61 does not wrap the size check") {
    // 2^61 parameters: 8 bytes each is 2^64, which wraps to 0 in 64 bits.
    std::string bytes = good.substr(0, 1024 + 8);
    setWord(bytes, 3, 0);
    setWord(bytes, 4, 1 << 29);
    setWord(bytes, 5, 8);
    CHECK_THROWS_WITH(refused(bytes), path + ": a parameter count of 2305843009213693952 in header[3..4] is "
                                             "impossibly large (its moments would need more than 2^64 bytes)");
    setWord(bytes, 3, -1);
    setWord(bytes, 4, -1);
    CHECK_THROWS_WITH(refused(bytes), Contains("a parameter count of 18446744073709551615 in header[3..4]"));
    // Large but representable: the file is too short for it.
    setWord(bytes, 3, 0);
    setWord(bytes, 4, (1 << 29) - 1);
    CHECK_THROWS_WITH(refused(bytes), Contains("(truncated)"));
  }
  SECTION("truncated or too long") {
    CHECK_THROWS_WITH(refused(good.substr(0, good.size() - 1)),
                      path + ": is 1831 bytes, but its header (header[3..5]: 100 parameters, 8 loader bytes) says "
                             "1832 (truncated)");
    CHECK_THROWS_WITH(refused(good + "x"), Contains("says 1832 (trailing bytes)"));
    CHECK_THROWS_WITH(refused(good.substr(0, 10)), path + ": too short for its 1024-byte header");
  }
}

TEST_CASE("train state: a full disk leaves the old state and no temporary", "[train][state]") {
  DataTempDir dir("train_state_full");
  const std::string path = (dir.path / "state.bin").string();
  writeTrainState(path, smallState());
  const std::string before = readFileBytes(path);
  TrainState bigger = smallState();
  bigger.optimizer.step = 13;
  bigger.optimizer.m.assign(10000, 1.0);
  bigger.optimizer.v.assign(10000, 1.0);
  llmc::testing::failWritesAfter(4096, ENOSPC);
  CHECK_THROWS_WITH(writeTrainState(path, bigger),
                    Catch::StartsWith(path + ": write failed: No space left on device"));
  llmc::testing::failWritesAfter(std::nullopt, 0);
  CHECK(readFileBytes(path) == before);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("train state: a step or loader state too large for the header is refused", "[train][state]") {
  DataTempDir dir("train_state_large_step");
  TrainState state = smallState();
  state.optimizer.step = int64_t{1} << 31;
  const std::string path = (dir.path / "state.bin").string();
  CHECK_THROWS_WITH(writeTrainState(path, state), path + ": step 2147483648 does not fit header[2] (int32)");
  CHECK(fs::is_empty(dir.path));
}
