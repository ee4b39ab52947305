// GPT-2 parameters on the host: llm.c's random initialisation, and llm.c's
// checkpoint files written, read back, checked byte by byte and refused when
// broken.
#include "gpt2_checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device/llmc/counter_normal.h"

using namespace llmc;
namespace fs = std::filesystem;

namespace {

Gpt2Config testConfig() {
  Gpt2Config config;
  config.L = 2, config.C = 32, config.H = 4, config.T = 16, config.V = 100, config.Vp = 128;
  return config;
}

// A fresh folder for one test, removed afterwards.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("llmc_{}_{}", name, getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<char> readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
T valueAt(const std::vector<char>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

void setHeaderWord(std::vector<char>& bytes, int word, int32_t value) {
  std::memcpy(bytes.data() + 4 * word, &value, sizeof value);
}

// Element counts of llm.c's parameters, in its order, from its own formulas.
std::vector<int64_t> llmcParameterSizes(const Gpt2Config& config) {
  const int64_t L = config.L, C = config.C;
  return {config.Vp * C, config.T * C, L * C,         L * C,     L * 3 * C * C, L * 3 * C, L * C * C, L * C,
          L * C,         L * C,        L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,     C,         C};
}

int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) total += v;
  return total;
}

// bf16 by rounding a float's bits to nearest, ties to even (finite values).
float bf16RoundedReference(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

double standardDeviation(const std::vector<double>& values) {
  double sumSquares = 0;
  for (double v : values) sumSquares += v * v;
  return std::sqrt(sumSquares / static_cast<double>(values.size()));
}

}  // namespace

TEST_CASE("random GPT-2 weights follow GPT-2's initialisation", "[gpt2][checkpoint]") {
  Gpt2Config config = testConfig();
  config.C = 64, config.L = 4;  // enough values for the standard deviations
  const Gpt2Weights w = randomGpt2Weights(config, 42);

  CHECK(standardDeviation(w.qkvw.data) == Approx(0.02).epsilon(0.02));
  CHECK(standardDeviation(w.fcw.data) == Approx(0.02).epsilon(0.02));
  CHECK(standardDeviation(w.wpe.data) == Approx(0.02).epsilon(0.05));
  const double residualStd = 0.02 / std::sqrt(2.0 * static_cast<double>(config.L));
  CHECK(standardDeviation(w.attprojw.data) == Approx(residualStd).epsilon(0.03));
  CHECK(standardDeviation(w.fcprojw.data) == Approx(residualStd).epsilon(0.02));

  const std::vector<double> realRows(w.wte.data.begin(), w.wte.data.begin() + config.V * config.C);
  const std::vector<double> paddedRows(w.wte.data.begin() + config.V * config.C, w.wte.data.end());
  CHECK(standardDeviation(realRows) == Approx(0.02).epsilon(0.03));
  CHECK(standardDeviation(paddedRows) == 0);

  for (const HostTensor* bias : {&w.qkvb, &w.attprojb, &w.fcb, &w.fcprojb, &w.ln1b, &w.ln2b, &w.lnfb})
    CHECK(standardDeviation(bias->data) == 0);
  for (const HostTensor* gain : {&w.ln1w, &w.ln2w, &w.lnfw})
    CHECK(std::all_of(gain->data.begin(), gain->data.end(), [](double v) { return v == 1; }));

  for (const Gpt2Parameter& p : gpt2Parameters(config)) {
    const HostTensor& t = w.*p.member;
    CHECK(t.type == p.type);
    CHECK(std::all_of(t.data.begin(), t.data.end(), [](double v) { return v == static_cast<float>(v); }));
  }
  // Each value is its position's (gpt2StartValue): what the device makes too.
  for (const Gpt2ParameterStart& s : gpt2Start(config, 42)) {
    const std::vector<double>& data = (w.*s.parameter.member).data;
    int64_t differ = 0;
    for (size_t i = 0; i < data.size(); ++i) differ += data[i] != gpt2StartValue(s, static_cast<int64_t>(i));
    INFO(s.parameter.name);
    CHECK(differ == 0);
  }
  CHECK(randomGpt2Weights(config, 42).qkvw.data == w.qkvw.data);
  CHECK(randomGpt2Weights(config, 43).qkvw.data != w.qkvw.data);
  // Parameters draw independent values, not one stream restarted.
  CHECK(std::vector<double>(w.fcw.data.begin(), w.fcw.data.begin() + 100) !=
        std::vector<double>(w.qkvw.data.begin(), w.qkvw.data.begin() + 100));
}

TEST_CASE("an fp32 checkpoint has llm.c's layout and reads back bit-identical", "[gpt2][checkpoint]") {
  const TempDir dir("gpt2_checkpoint_fp32");
  const Gpt2Config config = testConfig();
  const Gpt2Weights written = randomGpt2TestWeights(config, 7);
  const std::string path = dir.file("model.bin");
  writeCheckpoint(path, written, /*bf16=*/false);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temporary left

  const std::vector<char> bytes = readBytes(path);
  const std::vector<int64_t> sizes = llmcParameterSizes(config);
  REQUIRE(bytes.size() == static_cast<size_t>(1024 + 4 * sum(sizes)));
  const int32_t expectedHeader[8] = {20240326, 3, 16, 100, 2, 4, 32, 128};
  for (int word = 0; word < 256; ++word)
    CHECK(valueAt<int32_t>(bytes, 4 * static_cast<size_t>(word)) == (word < 8 ? expectedHeader[word] : 0));
  // Each parameter's values, in order, where llm.c's sizes put them.
  const std::vector<Gpt2Parameter> parameters = gpt2Parameters(config);
  size_t offset = 1024;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const HostTensor& t = written.*parameters[i].member;
    INFO("parameter " << parameters[i].name);
    REQUIRE(static_cast<int64_t>(t.data.size()) == sizes[i]);
    std::vector<double> stored(t.data.size());
    for (size_t j = 0; j < stored.size(); ++j) stored[j] = valueAt<float>(bytes, offset + 4 * j);
    CHECK(stored == t.data);
    offset += 4 * t.data.size();
  }

  const Gpt2Weights read = readCheckpoint(path);
  CHECK(read.config.T == config.T);
  CHECK(read.config.V == config.V);
  CHECK(read.config.L == config.L);
  CHECK(read.config.H == config.H);
  CHECK(read.config.C == config.C);
  CHECK(read.config.Vp == config.Vp);
  for (const Gpt2Parameter& p : parameters) {
    INFO("parameter " << p.name);
    CHECK((read.*p.member).type == p.type);
    CHECK((read.*p.member).data == (written.*p.member).data);
  }
}

TEST_CASE("a bf16 checkpoint rounds to nearest even and reads back exactly that", "[gpt2][checkpoint]") {
  const TempDir dir("gpt2_checkpoint_bf16");
  Gpt2Weights written = randomGpt2TestWeights(testConfig(), 8);
  // Exact ties between two bf16 values (8 significant bits): to the even one.
  written.lnfb.data[0] = 1 + std::ldexp(1.0, -8);      // between 1 and 1 + 2^-7: down to 1
  written.lnfb.data[1] = 1 + 3 * std::ldexp(1.0, -8);  // between 1 + 2^-7 and 1 + 2^-6: up
  written.lnfb.data[2] = -(1 + 3 * std::ldexp(1.0, -8));
  const std::string path = dir.file("model.bin");
  writeCheckpoint(path, written, /*bf16=*/true);

  const std::vector<char> bytes = readBytes(path);
  CHECK(bytes.size() == static_cast<size_t>(1024 + 2 * sum(llmcParameterSizes(testConfig()))));
  CHECK(valueAt<int32_t>(bytes, 4) == 5);

  const Gpt2Weights read = readCheckpoint(path);
  CHECK(read.lnfb.data[0] == 1);
  CHECK(read.lnfb.data[1] == 1 + std::ldexp(1.0, -6));
  CHECK(read.lnfb.data[2] == -(1 + std::ldexp(1.0, -6)));
  for (const Gpt2Parameter& p : gpt2Parameters(testConfig())) {
    INFO("parameter " << p.name);
    const std::vector<double>& original = (written.*p.member).data;
    const std::vector<double>& stored = (read.*p.member).data;
    REQUIRE(stored.size() == original.size());
    // Counted, not checked one by one: a failure would print every value.
    int notNearestEven = 0, beyondHalfUlp = 0;
    for (size_t i = 0; i < stored.size(); ++i) {
      notNearestEven += stored[i] != bf16RoundedReference(static_cast<float>(original[i]));
      // 8 significant bits: rounding moves a value by at most 2^-8 of it.
      beyondHalfUlp += std::abs(stored[i] - original[i]) > std::ldexp(std::abs(original[i]), -8);
    }
    CHECK(notNearestEven == 0);
    CHECK(beyondHalfUlp == 0);
  }
}

TEST_CASE("writing a checkpoint refuses weights that do not match their configuration", "[gpt2][checkpoint]") {
  const TempDir dir("gpt2_checkpoint_mismatch");
  Gpt2Weights weights = randomGpt2TestWeights(testConfig(), 9);
  weights.config.C = 64;
  const std::string path = dir.file("model.bin");
  CHECK_THROWS_AS(writeCheckpoint(path, weights, false), std::invalid_argument);
  CHECK(fs::is_empty(dir.path));  // neither the file nor a temporary
}

TEST_CASE("reading a broken checkpoint names the file and what is wrong", "[gpt2][checkpoint]") {
  const TempDir dir("gpt2_checkpoint_broken");
  const std::string good = dir.file("good.bin");
  writeCheckpoint(good, randomGpt2TestWeights(testConfig(), 10), false);
  const std::vector<char> goodBytes = readBytes(good);
  const std::string path = dir.file("model.bin");
  auto readBroken = [&](const std::vector<char>& bytes) {
    writeBytes(path, bytes);
    readCheckpoint(path);
  };
  auto withHeaderWord = [&](int word, int32_t value) {
    std::vector<char> bytes = goodBytes;
    setHeaderWord(bytes, word, value);
    return bytes;
  };

  SECTION("missing") {
    CHECK_THROWS_WITH(readCheckpoint(dir.file("absent.bin")),
                      dir.file("absent.bin") + ": cannot open: No such file or directory");
  }
  SECTION("bad magic") {
    CHECK_THROWS_WITH(readBroken(withHeaderWord(0, 1234)), path + ": bad magic 1234 in header[0] (expected 20240326)");
  }
  SECTION("unknown version") {
    CHECK_THROWS_WITH(readBroken(withHeaderWord(1, 4)),
                      path + ": unknown version 4 in header[1] (expected 3 = fp32 or 5 = bf16)");
  }
  SECTION("sizes that make no GPT-2") {
    CHECK_THROWS_WITH(readBroken(withHeaderWord(4, 0)), path + ": bad L 0 in header[4] (expected > 0)");
    CHECK_THROWS_WITH(readBroken(withHeaderWord(7, 64)), path + ": bad Vp 64 in header[7] (expected >= V = 100)");
    CHECK_THROWS_WITH(readBroken(withHeaderWord(5, 5)), path + ": bad H 5 in header[5] (expected a divisor of C = 32)");
  }
  SECTION("truncated header") {
    CHECK_THROWS_WITH(readBroken(std::vector<char>(goodBytes.begin(), goodBytes.begin() + 100)),
                      path + ": truncated header: the file has 100 bytes, the header is 1024 (256 int32 words)");
  }
  SECTION("truncated parameters") {
    const int64_t parameterBytes = 4 * sum(llmcParameterSizes(testConfig()));
    CHECK_THROWS_WITH(readBroken(std::vector<char>(goodBytes.begin(), goodBytes.end() - 2)),
                      fmt::format("{}: truncated in parameter lnfb: the parameters need {} bytes after the "
                                  "header, the file has {}",
                                  path, parameterBytes, parameterBytes - 2));
    // wte, wpe, ln1w, ln1b whole and one value of qkvw: the cut is in qkvw.
    const Gpt2Config config = testConfig();
    const size_t throughQkvwStart =
        1024 + 4 * static_cast<size_t>(config.Vp * config.C + config.T * config.C + 2 * config.L * config.C + 1);
    CHECK_THROWS_WITH(readBroken(std::vector<char>(goodBytes.begin(), goodBytes.begin() + throughQkvwStart)),
                      Catch::StartsWith(path + ": truncated in parameter qkvw:"));
    // A corrupt header must not overflow the size arithmetic.
    CHECK_THROWS_WITH(readBroken(withHeaderWord(6, 2'000'000'000)),
                      Catch::StartsWith(path + ": truncated in parameter wte:"));
  }
  SECTION("header words at their largest") {
    std::vector<char> bytes = goodBytes;
    for (int word = 2; word <= 7; ++word) setHeaderWord(bytes, word, INT32_MAX);
    setHeaderWord(bytes, 5, 1);  // H divides C
    CHECK_THROWS_WITH(readBroken(bytes), Catch::StartsWith(path + ": truncated in parameter wte:"));
  }
  SECTION("a non-finite parameter") {
    for (const bool bf16 : {false, true}) {
      Gpt2Weights weights = randomGpt2TestWeights(testConfig(), 11);
      weights.ln1b.data[3] = std::nan("");
      writeCheckpoint(path, weights, bf16);
      CHECK_THROWS_WITH(readCheckpoint(path), path + ": parameter ln1b holds a non-finite value (nan) at index 3");
      weights.ln1b.data[3] = 0;
      weights.lnfw.data.back() = -HUGE_VAL;
      writeCheckpoint(path, weights, bf16);
      CHECK_THROWS_WITH(readCheckpoint(path), fmt::format("{}: parameter lnfw holds a non-finite value (-inf) at index {}",
                                                          path, weights.lnfw.data.size() - 1));
    }
  }
  SECTION("trailing bytes") {
    std::vector<char> bytes = goodBytes;
    bytes.insert(bytes.end(), 4, '\0');
    CHECK_THROWS_WITH(readBroken(bytes), path + ": 4 trailing bytes after the last parameter (lnfb)");
    // fp32 parameters under a bf16 version: twice the bytes the header implies.
    const int64_t bf16Bytes = 2 * sum(llmcParameterSizes(testConfig()));
    CHECK_THROWS_WITH(readBroken(withHeaderWord(1, 5)),
                      fmt::format("{}: {} trailing bytes after the last parameter (lnfb)", path, bf16Bytes));
  }
}

TEST_CASE("the start's normal values are Philox4x32-10's, then Box-Muller's", "[gpt2][checkpoint]") {
  // Random123's known answers (kat_vectors): counter and key zero, all ones, pi's digits.
  const counter_normal::Bits zero = counter_normal::philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK((zero.x[0] == 0x6627e8d5u && zero.x[1] == 0xe169c58du && zero.x[2] == 0xbc57ac4cu && zero.x[3] == 0x9b00dbd8u));
  // Of a million values: mean 0, variance 1, 68.3% within one deviation, 95.4% within two.
  double sum = 0, squares = 0;
  int64_t within1 = 0, within2 = 0;
  constexpr int64_t n = 1 << 20;
  for (int64_t i = 0; i < n; ++i) {
    const double z = counter_normal::normal_at(12345, static_cast<uint64_t>(i), 0.0f, 1.0f);
    sum += z, squares += z * z;
    within1 += std::fabs(z) < 1, within2 += std::fabs(z) < 2;
  }
  CHECK(sum / n == Approx(0).margin(0.005));
  CHECK(squares / n == Approx(1).epsilon(0.005));
  CHECK(static_cast<double>(within1) / n == Approx(0.6827).margin(0.002));
  CHECK(static_cast<double>(within2) / n == Approx(0.9545).margin(0.001));
}
