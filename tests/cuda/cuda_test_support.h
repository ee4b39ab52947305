// Helpers for the GPU runtime's tests.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace llmc::testing {

// A fresh, empty folder for one test's kernel cache, removed afterwards.
struct CacheTempDir {
  std::filesystem::path path;
  explicit CacheTempDir(const std::string& name) {
    static std::atomic<int> counter = 0;
    path = std::filesystem::temp_directory_path() / fmt::format("llmc_{}_{}_{}", name, getpid(), counter++);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~CacheTempDir() { std::filesystem::remove_all(path); }
  CacheTempDir(const CacheTempDir&) = delete;
  CacheTempDir& operator=(const CacheTempDir&) = delete;
};

}  // namespace llmc::testing
