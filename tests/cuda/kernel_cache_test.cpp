// The kernel cache: a miss then a hit with the same bytes, one entry per
// (source, arch, options), and broken entries detected and rebuilt.
#include "kernel_cache.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.h"
#include "jit.h"

namespace fs = std::filesystem;
using llmc::cuda::compileKernels;
using llmc::cuda::KernelCache;
using llmc::cuda::kernelCacheKey;
using llmc::cuda::KernelSource;
using llmc::testing::CacheTempDir;
using llmc::testing::StderrCapture;
using Catch::Matchers::Contains;

namespace {

KernelSource addOne() {
  return {.name = "add_one",
          .source = "extern \"C\" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n",
          .arch = "sm_90a"};
}

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("a kernel is compiled once, then found in the cache with the same bytes", "[cache]") {
  CacheTempDir dir("cache_hit");
  const KernelCache cache(dir.path);
  const auto first = compileKernels({addOne()}, &cache);
  REQUIRE(first.kernels.size() == 1);
  CHECK_FALSE(first.kernels[0].fromCache);
  CHECK(first.summary.compiled == 1);
  CHECK(fs::exists(cache.entryPath(addOne())));

  const auto second = compileKernels({addOne()}, &cache);
  CHECK(second.kernels[0].fromCache);
  CHECK(second.summary.fromCache == 1);
  CHECK(second.kernels[0].compiled->ptx == first.kernels[0].compiled->ptx);
  CHECK(second.kernels[0].compiled->cubin == first.kernels[0].compiled->cubin);
  CHECK(second.kernels[0].compiled->name == "add_one");
  CHECK(second.kernels[0].compiled->arch == "sm_90a");
  // Only the entry is left: no temporary files.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("a different source, arch, option or name is a different cache entry", "[cache]") {
  const KernelSource base = addOne();
  KernelSource otherArch = base, otherOptions = base, otherSource = base, otherName = base;
  otherArch.arch = "sm_80";
  otherOptions.options = {"-DUNUSED=1"};
  otherSource.source += "// a comment\n";
  otherName.name = "add_one_again";
  const uint64_t key = kernelCacheKey(base);
  CHECK(kernelCacheKey(base) == key);
  for (const KernelSource& other : {otherArch, otherOptions, otherSource, otherName}) CHECK(kernelCacheKey(other) != key);

  CacheTempDir dir("cache_keys");
  const KernelCache cache(dir.path);
  const auto result = compileKernels({base, otherArch, otherOptions}, &cache);
  CHECK(result.summary.compiled == 3);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 3);
  CHECK_THAT(result.kernels[1].compiled->ptx, Contains(".target sm_80"));
}

TEST_CASE("a corrupt, truncated or stale cache entry is reported and rebuilt", "[cache]") {
  CacheTempDir dir("cache_corrupt");
  const KernelCache cache(dir.path);
  const KernelSource kernel = addOne();
  const std::string good = compileKernels({kernel}, &cache).kernels[0].compiled->ptx;
  const fs::path entry = cache.entryPath(kernel);
  const std::string sound = readBytes(entry);

  struct Damage {
    std::string what, expected;
    std::string bytes;
  };
  std::string flipped = sound;
  flipped[sound.size() / 2] ^= 0x20;
  std::string otherKey = sound;
  otherKey[16] ^= 0x01;  // the header's key
  std::string otherVersion = sound;
  otherVersion[8] = 99;  // the header's format version
  const std::vector<Damage> damages = {
      {"a flipped payload byte", "corrupt (its SHA-256 does not match its contents)", flipped},
      {"a truncated payload", "truncated or corrupt", sound.substr(0, sound.size() - 100)},
      {"a truncated header", "truncated (10 bytes", sound.substr(0, 10)},
      {"an empty file", "truncated (0 bytes", ""},
      {"another key", "stale (key", otherKey},
      {"another format version", "stale (format version 99", otherVersion},
      {"not an entry", "not a kernel cache entry (bad magic)", std::string(200, 'x')},
  };
  for (const Damage& damage : damages) {
    INFO(damage.what);
    writeBytes(entry, damage.bytes);
    StderrCapture capture;
    const auto rebuilt = compileKernels({kernel}, &cache);
    const std::string warning = capture.text();
    CHECK_FALSE(rebuilt.kernels[0].fromCache);
    CHECK(rebuilt.kernels[0].compiled->ptx == good);
    CHECK_THAT(warning, Contains("llmc: warning: kernel cache entry " + entry.string() + " is " + damage.expected));
    CHECK_THAT(warning, Contains("compiling kernel add_one again\n"));
    CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
    // The rebuilt entry is sound again.
    CHECK(readBytes(entry) == sound);
    CHECK(compileKernels({kernel}, &cache).kernels[0].fromCache);
  }
}

TEST_CASE("the cache folder is LLMC_CACHE_DIR, else under XDG_CACHE_HOME, else under HOME", "[cache]") {
  const auto saved = [](const char* name) -> std::optional<std::string> {
    const char* value = getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  const auto cacheDir = saved("LLMC_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");
  setenv("LLMC_CACHE_DIR", "/tmp/llmc-cache", 1);
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  setenv("HOME", "/tmp/home", 1);
  CHECK(KernelCache::defaultDirectory() == "/tmp/llmc-cache");
  unsetenv("LLMC_CACHE_DIR");
  CHECK(KernelCache::defaultDirectory() == "/tmp/xdg/llmc/kernels");
  unsetenv("XDG_CACHE_HOME");
  CHECK(KernelCache::defaultDirectory() == "/tmp/home/.cache/llmc/kernels");
  for (const auto& [name, value] : {std::pair{"LLMC_CACHE_DIR", cacheDir}, {"XDG_CACHE_HOME", xdg}, {"HOME", home}}) {
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
}

TEST_CASE("concurrent writers of one entry leave one sound entry", "[cache]") {
  CacheTempDir dir("cache_concurrent");
  const KernelCache cache(dir.path);
  const KernelSource kernel = addOne();
  const auto compiled = llmc::cuda::compileWithNvrtc(kernel);
  // Catch2's assertions are not thread-safe: the threads count, the test checks.
  std::atomic<int> sound = 0, broken = 0;
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        cache.store(kernel, compiled);
        const auto found = cache.find(kernel);  // a reader never sees a partial entry
        ++(found && found->ptx == compiled.ptx && found->cubin == compiled.cubin ? sound : broken);
      }
    });
  for (auto& writer : writers) writer.join();
  CHECK(sound == 160);
  CHECK(broken == 0);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("a cache folder others can write into is not used, with one warning", "[cache]") {
  CacheTempDir dir("cache_untrusted");
  const fs::path folder = dir.path / "kernels";
  fs::create_directory(folder);
  fs::permissions(folder, fs::perms::all);  // 0777: anyone could plant a kernel
  StderrCapture capture;
  const KernelCache cache(folder), again(folder);
  const auto result = compileKernels({addOne()}, &cache);
  const std::string warning = capture.text();
  CHECK_FALSE(cache.usable());
  CHECK(result.summary.compiled == 1);
  CHECK_THAT(warning, Contains("llmc: warning: not using the kernel cache " + folder.string() +
                               ": it is writable by its group or by others (mode 0777"));
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
  CHECK(fs::is_empty(folder));  // nothing read, nothing stored
  CHECK_FALSE(cache.find(addOne()).has_value());
}

TEST_CASE("a cache folder of another user is not used", "[cache]") {
  CacheTempDir dir("cache_other_user");
  const fs::path folder = dir.path / "kernels";
  fs::create_directory(folder);
  // Only root can give a folder away; without root the mode test above stands for both.
  if (geteuid() != 0 || chown(folder.c_str(), 4242, 4242) != 0) {
    WARN("not root: cannot make a folder of another user here");
    return;
  }
  StderrCapture capture;
  const KernelCache cache(folder);
  CHECK_FALSE(cache.usable());
  CHECK_THAT(capture.text(), Contains("it is owned by user 4242, not by this user (0)"));
}

TEST_CASE("a new cache folder is made private whatever the umask", "[cache]") {
  CacheTempDir dir("cache_umask");
  const mode_t mask = umask(0);
  const KernelCache cache(dir.path / "a/kernels");
  umask(mask);
  CHECK(cache.usable());
  CHECK((fs::status(dir.path / "a/kernels").permissions() & fs::perms::all) == fs::perms::owner_all);
}

TEST_CASE("a cache entry that is a symlink is not followed, and is replaced", "[cache]") {
  CacheTempDir dir("cache_symlink");
  const KernelCache cache(dir.path / "kernels");
  const KernelSource kernel = addOne();
  // A sound entry, moved out of the cache and linked back in.
  compileKernels({kernel}, &cache);
  const fs::path entry = cache.entryPath(kernel);
  fs::rename(entry, dir.path / "elsewhere");
  fs::create_symlink(dir.path / "elsewhere", entry);
  StderrCapture capture;
  const auto rebuilt = compileKernels({kernel}, &cache);
  CHECK_FALSE(rebuilt.kernels[0].fromCache);
  CHECK_THAT(capture.text(),
             Contains("kernel cache entry " + entry.string() + " is unusable (a symbolic link, not a file)"));
  CHECK_FALSE(fs::is_symlink(entry));
  CHECK(compileKernels({kernel}, &cache).kernels[0].fromCache);
}
