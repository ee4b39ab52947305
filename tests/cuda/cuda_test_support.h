// Helpers for the GPU runtime's tests.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace llmc::testing {

// A fresh, empty folder for one test's kernel cache, removed afterwards. Made
// private to this user (mode 0700), as the caches require whatever the umask.
struct CacheTempDir {
  std::filesystem::path path;
  explicit CacheTempDir(const std::string& name) {
    static std::atomic<int> counter = 0;
    path = std::filesystem::temp_directory_path() / fmt::format("llmc_{}_{}_{}", name, getpid(), counter++);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  ~CacheTempDir() { std::filesystem::remove_all(path); }
  CacheTempDir(const CacheTempDir&) = delete;
  CacheTempDir& operator=(const CacheTempDir&) = delete;
};

// Captures what is written to stderr while it lives: the caches' warnings go there.
class StderrCapture {
 public:
  StderrCapture() : path_(std::filesystem::temp_directory_path() / fmt::format("llmc_stderr_{}", getpid())) {
    std::fflush(stderr);
    saved_ = dup(2);
    FILE* file = std::fopen(path_.c_str(), "w");
    dup2(fileno(file), 2);
    std::fclose(file);
  }
  ~StderrCapture() {
    restore();
    std::filesystem::remove(path_);
  }
  std::string text() {
    restore();
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::filesystem::path path_;
  int saved_ = -1;
};

}  // namespace llmc::testing
