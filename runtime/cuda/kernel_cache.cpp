#include "kernel_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <variant>
#include <vector>

#include "atomic_file.h"
#include "cache_folder.h"
#include "fnv1a.h"
#include "kernel_classes.h"
#include "private_folder.h"
#include "sha256.h"

namespace llmc::cuda {

namespace fs = std::filesystem;

namespace {

constexpr std::array<char, 8> kMagic = {'l', 'l', 'm', 'c', 'K', 'R', 'N', 'L'};
// Bump when the layout below changes: older entries then read as stale.
// 2: a SHA-256 of the whole entry instead of an FNV-1a checksum of the payload.
constexpr uint32_t kFormatVersion = 2;

// The header, in the host's byte order (a cache belongs to one machine):
//   magic[8] formatVersion:u32 headerBytes:u32 key:u64
//   nameBytes archBytes ptxBytes cubinBytes logBytes:u64 sha256[32]
// then the payload: name, arch, PTX, CUBIN, log. The SHA-256 covers every
// byte of the entry but its own 32.
constexpr size_t kFieldCount = 5;
constexpr size_t kDigestOffset = 8 + 4 + 4 + 8 + 8 * kFieldCount;
constexpr size_t kHeaderBytes = kDigestOffset + 32;
// Larger than any kernel's PTX and CUBIN together: a bigger file is not read.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

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

// The SHA-256 of an entry's bytes but its digest field.
Sha256::Digest entryDigest(std::string_view entry) {
  return Sha256().add(entry.substr(0, kDigestOffset)).add(entry.substr(kHeaderBytes)).finish();
}

std::string encodeEntry(uint64_t key, const CompiledKernel& compiled) {
  const std::array<const std::string*, kFieldCount> fields = {&compiled.name, &compiled.arch, &compiled.ptx,
                                                              &compiled.cubin, &compiled.log};
  std::string entry(kMagic.data(), kMagic.size());
  append(entry, kFormatVersion);
  append(entry, static_cast<uint32_t>(kHeaderBytes));
  append(entry, key);
  for (const std::string* field : fields) append(entry, static_cast<uint64_t>(field->size()));
  entry.append(32, '\0');
  for (const std::string* field : fields) entry += *field;
  const Sha256::Digest digest = entryDigest(entry);
  std::memcpy(entry.data() + kDigestOffset, digest.data(), digest.size());
  return entry;
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
  const Sha256::Digest digest = entryDigest(bytes);
  if (std::memcmp(digest.data(), bytes.data() + kDigestOffset, digest.size()) != 0)
    return std::string("corrupt (its SHA-256 does not match its contents)");
  const std::string_view payload(bytes.data() + kHeaderBytes, payloadBytes);
  std::array<std::string, kFieldCount> fields;
  size_t offset = 0;
  for (size_t i = 0; i < kFieldCount; ++i) {
    fields[i] = std::string(payload.substr(offset, sizes[i]));
    offset += sizes[i];
  }
  return CompiledKernel{.name = fields[0], .arch = fields[1], .ptx = fields[2], .cubin = fields[3], .log = fields[4]};
}

void warn(const std::string& message) { cacheWarning(message); }

}  // namespace

uint64_t kernelCacheKey(const KernelSource& kernel) {
  Fnv1a64 hash;
  // The canonical form, not the text: the layers' copies of a kernel, which
  // differ only in numbered names, share one entry (kernel_classes.h).
  hash.addField(compiledSourceForm(kernel)).addField(kernel.arch);
  hash.addField(fmt::format("{} options", kernel.options.size()));
  for (const std::string& option : kernel.options) hash.addField(option);
  hash.addField(kKernelLanguageStandard).addField(nvrtcVersionString());
  hash.addField(fmt::format("{:016x}", deviceHeadersDigest()));
  return hash.value();
}

KernelCache::KernelCache(fs::path directory)
    : directory_(std::move(directory)), usable_(openCacheFolder(directory_, "kernel cache")) {}

fs::path KernelCache::defaultDirectory() {
  if (const char* dir = std::getenv("LLMC_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "llmc/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache/llmc/kernels";
  throw std::runtime_error("no kernel cache folder: set LLMC_CACHE_DIR (HOME is not set)");
}

fs::path KernelCache::entryPath(const KernelSource& kernel) const { return entryPath(kernelCacheKey(kernel)); }

fs::path KernelCache::entryPath(uint64_t key) const { return directory_ / fmt::format("{:016x}.kernel", key); }

std::optional<CompiledKernel> KernelCache::find(const KernelSource& kernel) const {
  if (!usable_) return std::nullopt;
  const uint64_t key = kernelCacheKey(kernel);
  const fs::path path = entryPath(key);
  std::optional<std::string> bytes;
  try {
    bytes = readRegularFile(path, kMaxEntryBytes);
  } catch (const std::exception& e) {
    warn(fmt::format("kernel cache entry {} is unusable ({}); compiling kernel {} again", path.string(), e.what(),
                     kernel.name));
    return std::nullopt;
  }
  if (!bytes) return std::nullopt;
  auto decoded = decodeEntry(*bytes, key);
  if (auto* why = std::get_if<std::string>(&decoded)) {
    warn(fmt::format("kernel cache entry {} is {}; compiling kernel {} again", path.string(), *why, kernel.name));
    return std::nullopt;
  }
  auto& compiled = std::get<CompiledKernel>(decoded);
  // Its name may be another's: the entry point of a kernel of the same class,
  // which this one launches under that name.
  if (compiled.arch != kernel.arch) {
    warn(fmt::format("kernel cache entry {} holds kernel {} for {}, not {} for {}; compiling it again", path.string(),
                     compiled.name, compiled.arch, kernel.name, kernel.arch));
    return std::nullopt;
  }
  return std::move(compiled);
}

void KernelCache::store(const KernelSource& kernel, const CompiledKernel& compiled) const {
  if (!usable_) return;
  const uint64_t key = kernelCacheKey(kernel);
  // A fresh temporary renamed into place (common/atomic_file.h): readers see
  // the old entry or the new one, and concurrent writers of one entry are
  // safe. Not synced: a torn entry after a crash fails its SHA-256.
  try {
    writeFileAtomically(entryPath(key), encodeEntry(key, compiled),
                        {.mode = 0600, .sync = false, .followOwnLinks = false});
  } catch (const std::exception& e) {
    warn(fmt::format("cannot store kernel {} in the kernel cache: {}", kernel.name, e.what()));
  }
}

}  // namespace llmc::cuda
