// Helpers for the data pipeline's tests (tokenizer, shards, loader).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace llmc::testing {

// A fresh folder for one test, removed afterwards.
struct DataTempDir {
  std::filesystem::path path;
  explicit DataTempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / fmt::format("llmc_{}_{}", name, getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~DataTempDir() { std::filesystem::remove_all(path); }
  DataTempDir(const DataTempDir&) = delete;
  DataTempDir& operator=(const DataTempDir&) = delete;
};

inline void writeFile(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::string readFileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ../shared/data beside the repository (as on CI), else data/ inside it (as
// scripts/fetch_data.sh makes it). Fails the test when neither exists.
inline std::filesystem::path sharedDataDir() {
  const std::filesystem::path shared = std::filesystem::path(LLMC_SOURCE_DIR) / "../shared/data";
  const std::filesystem::path fetched = std::filesystem::path(LLMC_SOURCE_DIR) / "data";
  for (const auto& dir : {shared, fetched}) {
    if (std::filesystem::exists(dir / "gpt2-bpe/encoder.json")) return dir.lexically_normal();
  }
  FAIL("no tokenizer data at " << shared.lexically_normal().string() << " or " << fetched.string()
                               << ": run scripts/fetch_data.sh");
  return {};
}

}  // namespace llmc::testing
