#include "kernel_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <variant>
#include <vector>

#include "fnv1a.h"

namespace llmc::cuda {

namespace fs = std::filesystem;

namespace {

constexpr std::array<char, 8> kMagic = {'l', 'l', 'm', 'c', 'K', 'R', 'N', 'L'};
// Bump when the layout below changes: older entries then read as stale.
constexpr uint32_t kFormatVersion = 1;

// The header, in the host's byte order (a cache belongs to one machine):
//   magic[8] formatVersion:u32 headerBytes:u32 key:u64
//   nameBytes archBytes ptxBytes cubinBytes logBytes:u64 payloadChecksum:u64
// then the payload: name, arch, PTX, CUBIN, log.
constexpr size_t kFieldCount = 5;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 * kFieldCount + 8;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// All files under llmc's device headers, in a fixed order, names and bytes.
uint64_t deviceHeadersDigest() {
  const fs::path root = deviceIncludeDirectory();
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  Fnv1a64 hash;
  for (const fs::path& file : files) hash.addField(fs::relative(file, root).string()).addField(readFile(file));
  return hash.value();
}

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T readAt(const std::string& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

std::string encodeEntry(uint64_t key, const CompiledKernel& compiled) {
  const std::array<const std::string*, kFieldCount> fields = {&compiled.name, &compiled.arch, &compiled.ptx,
                                                              &compiled.cubin, &compiled.log};
  std::string payload;
  for (const std::string* field : fields) payload += *field;
  std::string entry(kMagic.data(), kMagic.size());
  append(entry, kFormatVersion);
  append(entry, static_cast<uint32_t>(kHeaderBytes));
  append(entry, key);
  for (const std::string* field : fields) append(entry, static_cast<uint64_t>(field->size()));
  append(entry, fnv1a64(payload));
  return entry + payload;
}

// The entry's kernel, or why it cannot be trusted.
std::variant<CompiledKernel, std::string> decodeEntry(const std::string& bytes, uint64_t key) {
  if (bytes.size() < kHeaderBytes) return fmt::format("truncated ({} bytes, shorter than its header)", bytes.size());
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) return std::string("not a kernel cache entry (bad magic)");
  if (const auto version = readAt<uint32_t>(bytes, 8); version != kFormatVersion)
    return fmt::format("stale (format version {}, expected {})", version, kFormatVersion);
  if (readAt<uint32_t>(bytes, 12) != kHeaderBytes) return std::string("corrupt header (header size)");
  if (const auto entryKey = readAt<uint64_t>(bytes, 16); entryKey != key)
    return fmt::format("stale (key {:016x}, expected {:016x})", entryKey, key);
  std::array<uint64_t, kFieldCount> sizes;
  uint64_t payloadBytes = 0;
  for (size_t i = 0; i < kFieldCount; ++i) {
    sizes[i] = readAt<uint64_t>(bytes, 24 + 8 * i);
    if (sizes[i] > bytes.size()) return std::string("corrupt header (field size)");
    payloadBytes += sizes[i];
  }
  if (kHeaderBytes + payloadBytes != bytes.size())
    return fmt::format("truncated or corrupt ({} bytes, its header says {})", bytes.size(), kHeaderBytes + payloadBytes);
  const std::string_view payload(bytes.data() + kHeaderBytes, payloadBytes);
  if (fnv1a64(payload) != readAt<uint64_t>(bytes, 24 + 8 * kFieldCount)) return std::string("corrupt (checksum mismatch)");
  std::array<std::string, kFieldCount> fields;
  size_t offset = 0;
  for (size_t i = 0; i < kFieldCount; ++i) {
    fields[i] = std::string(payload.substr(offset, sizes[i]));
    offset += sizes[i];
  }
  return CompiledKernel{.name = fields[0], .arch = fields[1], .ptx = fields[2], .cubin = fields[3], .log = fields[4]};
}

// One line, written at once, so that warnings of parallel compiles do not interleave.
void warn(const std::string& message) {
  const std::string line = "llmc: warning: " + message + "\n";
  std::fputs(line.c_str(), stderr);
}

// A name no other writer, thread or process, uses at the same time.
fs::path temporaryPath(const fs::path& entry) {
  static std::atomic<uint64_t> counter = 0;
  return fs::path(fmt::format("{}.tmp-{}-{:x}-{}", entry.string(), getpid(),
                              std::hash<std::thread::id>()(std::this_thread::get_id()), counter++));
}

}  // namespace

uint64_t kernelCacheKey(const KernelSource& kernel) {
  Fnv1a64 hash;
  hash.addField(kernel.name).addField(kernel.source).addField(kernel.arch);
  hash.addField(fmt::format("{} options", kernel.options.size()));
  for (const std::string& option : kernel.options) hash.addField(option);
  hash.addField(kKernelLanguageStandard).addField(nvrtcVersionString());
  hash.addField(fmt::format("{:016x}", deviceHeadersDigest()));
  return hash.value();
}

KernelCache::KernelCache(fs::path directory) : directory_(std::move(directory)) {
  std::error_code error;
  fs::create_directories(directory_, error);
  if (error) throw std::runtime_error(fmt::format("cannot create the kernel cache {}: {}", directory_.string(), error.message()));
}

fs::path KernelCache::defaultDirectory() {
  if (const char* dir = std::getenv("LLMC_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "llmc/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache/llmc/kernels";
  throw std::runtime_error("no kernel cache folder: set LLMC_CACHE_DIR (HOME is not set)");
}

fs::path KernelCache::entryPath(const KernelSource& kernel) const { return entryPath(kernelCacheKey(kernel)); }

fs::path KernelCache::entryPath(uint64_t key) const { return directory_ / fmt::format("{:016x}.kernel", key); }

std::optional<CompiledKernel> KernelCache::find(const KernelSource& kernel) const {
  const uint64_t key = kernelCacheKey(kernel);
  const fs::path path = entryPath(key);
  std::error_code error;
  if (!fs::exists(path, error)) return std::nullopt;
  auto decoded = decodeEntry(readFile(path), key);
  if (auto* why = std::get_if<std::string>(&decoded)) {
    warn(fmt::format("kernel cache entry {} is {}; compiling kernel {} again", path.string(), *why, kernel.name));
    return std::nullopt;
  }
  auto& compiled = std::get<CompiledKernel>(decoded);
  if (compiled.name != kernel.name || compiled.arch != kernel.arch) {
    warn(fmt::format("kernel cache entry {} holds kernel {} for {}, not {} for {}; compiling it again", path.string(),
                     compiled.name, compiled.arch, kernel.name, kernel.arch));
    return std::nullopt;
  }
  return std::move(compiled);
}

void KernelCache::store(const KernelSource& kernel, const CompiledKernel& compiled) const {
  const uint64_t key = kernelCacheKey(kernel);
  const fs::path path = entryPath(key);
  const fs::path temporary = temporaryPath(path);
  const std::string entry = encodeEntry(key, compiled);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(entry.data(), static_cast<std::streamsize>(entry.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      warn(fmt::format("cannot write the kernel cache entry {} of kernel {}", temporary.string(), kernel.name));
      return;
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);  // atomic: readers see the old entry or the new one
  if (error) {
    warn(fmt::format("cannot rename {} to {}: {}", temporary.string(), path.string(), error.message()));
    fs::remove(temporary, error);
  }
}

}  // namespace llmc::cuda
