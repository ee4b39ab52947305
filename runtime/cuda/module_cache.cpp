#include "module_cache.h"

#include "lowering/gemm_tiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "atomic_file.h"
#include "cache_folder.h"
#include "fnv1a.h"
#include "kernel_cache.h"
#include "private_folder.h"
#include "sha256.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace llmc::cuda {

namespace {

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Bump when the JSON layout changes, or what the compiler emits for the same diagrams (the key
// holds the diagrams, options and target file, not the compiler): 5, streams on wgmma and TMA;
// 6, the entry's first line holds the SHA-256 of the JSON after it; 7, a parameter's offset
// (constant bases) and flat points; 8, buffers that lie within others (an output's parts); 9, at
// strides of their own (a concatenation's interleaved parts); 10, the launches' sources after the
// JSON, unescaped.
constexpr int kFormat = 10;

// An entry: this prefix, the SHA-256 of the body in hex, a newline, the body (moduleToText).
constexpr std::string_view kEntryPrefix = "llmc plan sha256 ";
constexpr size_t kEntryHeaderBytes = kEntryPrefix.size() + 64 + 1;
// Far above any plan (d48's training step: 22 MB, nearly all of it CUDA source).
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

// The module of an entry whose digest matches its body, or why it is not to
// be used. The digest (d48's step: 22 MB) is taken on a thread beside the
// parse, which a mismatch then discards.
CudaModule verifiedModule(const std::string& entry) {
  if (entry.size() < kEntryHeaderBytes || !entry.starts_with(kEntryPrefix) || entry[kEntryHeaderBytes - 1] != '\n')
    throw std::runtime_error("not a plan cache entry of this format (no SHA-256 line)");
  const std::string_view body(entry.data() + kEntryHeaderBytes, entry.size() - kEntryHeaderBytes);
  std::future<bool> digestMatches = std::async(std::launch::async, [&] {
    return sha256Hex(body) == std::string_view(entry).substr(kEntryPrefix.size(), 64);
  });
  std::optional<CudaModule> module;
  std::exception_ptr parseError;
  try {
    module = moduleFromText(body);
  } catch (...) {
    parseError = std::current_exception();
  }
  if (!digestMatches.get()) throw std::runtime_error("its SHA-256 does not match its contents");
  if (parseError) std::rethrow_exception(parseError);
  return std::move(*module);
}

}  // namespace

uint64_t moduleCacheKey(const fs::path& diagramsDir, const std::string& description, const std::string& targetFile) {
  Fnv1a64 hash;
  hash.addField(fmt::format("llmc module cache {}", kFormat));
  hash.addField(description);
  hash.addField(targetFile.empty() ? "" : readFile(targetFile));
  hash.addField(gemmTileOverride());  // a tile named for every GEMM makes another plan
  std::vector<fs::path> diagrams;
  for (const auto& entry : fs::recursive_directory_iterator(diagramsDir))
    if (entry.is_regular_file() && entry.path().extension() == ".dg") diagrams.push_back(entry.path());
  std::sort(diagrams.begin(), diagrams.end());
  for (const fs::path& d : diagrams) hash.addField(fs::relative(d, diagramsDir).string()).addField(readFile(d));
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    hash.addField(self.string());
    hash.addField(std::to_string(fs::file_size(self, error)));
    hash.addField(std::to_string(fs::last_write_time(self, error).time_since_epoch().count()));
  }
  return hash.value();
}

ModuleCache::ModuleCache(fs::path directory)
    : directory_(std::move(directory)), usable_(openCacheFolder(directory_, "plan cache")) {}

fs::path ModuleCache::defaultDirectory() {
  if (const char* dir = std::getenv("LLMC_CACHE_DIR"); dir && *dir) return fs::path(dir) / "plans";
  return KernelCache::defaultDirectory().parent_path() / "plans";
}

fs::path ModuleCache::path(uint64_t key) const { return directory_ / fmt::format("{:016x}.module", key); }

std::optional<CudaModule> ModuleCache::find(uint64_t key) const {
  if (!usable_) return std::nullopt;
  const fs::path p = path(key);
  try {
    const std::optional<std::string> entry = readRegularFile(p, kMaxEntryBytes);
    if (!entry) return std::nullopt;
    return verifiedModule(*entry);
  } catch (const std::exception& e) {
    // A parser's message can quote a long stretch of the entry: its start says enough.
    std::string why = e.what();
    if (why.size() > 160) why = why.substr(0, 160) + "...";
    cacheWarning(fmt::format("module cache entry {} is unusable ({}); planning again", p.string(), why));
    return std::nullopt;
  }
}

void ModuleCache::store(uint64_t key, const CudaModule& module) const {
  if (!usable_) return;
  const std::string body = moduleToText(module);
  // A fresh temporary renamed into place (common/atomic_file.h); not synced:
  // a torn entry after a crash fails its SHA-256.
  try {
    writeFileAtomically(path(key), fmt::format("{}{}\n{}", kEntryPrefix, sha256Hex(body), body),
                        {.mode = 0600, .sync = false, .followOwnLinks = false});
  } catch (const std::exception& e) {
    cacheWarning(fmt::format("cannot store a plan in the module cache: {}", e.what()));
  }
}

CudaModule ModuleCache::findOrPlan(uint64_t key, const std::function<CudaModule()>& plan, bool* hit) const {
  if (std::optional<CudaModule> cached = find(key)) {
    if (hit) *hit = true;
    return std::move(*cached);
  }
  if (hit) *hit = false;
  CudaModule module = plan();
  store(key, module);
  return module;
}

std::string moduleToText(const CudaModule& module) {
  json buffers = json::array();
  for (const BufferDesc& b : module.buffers) {
    json axes = json::array();
    for (const Axis& a : b.axes) axes.push_back({a.name, a.size});
    buffers.push_back({{"node", b.node}, {"name", b.name}, {"dtype", b.dtype}, {"ctype", b.ctype}, {"axes", axes},
                       {"elements", b.elements}, {"bytes", b.bytes}, {"graph_input", b.graphInput},
                       {"graph_outputs", b.graphOutputs}, {"within", b.within}, {"within_offset", b.withinOffset},
                       {"within_strides", b.withinStrides}});
  }
  json launches = json::array();
  for (const KernelLaunch& l : module.launches) {
    json params = json::array();
    for (const LaunchParam& p : l.params) params.push_back({p.buffer, p.written, p.offsetElements});
    json maps = json::array();
    for (const TensorMapParam& m : l.tensorMaps)
      maps.push_back({{"operand", m.operand}, {"buffer", m.buffer}, {"offset_bytes", m.offsetBytes}, {"dims", m.dims},
                      {"strides_bytes", m.stridesBytes}, {"box", m.box}, {"swizzle", m.swizzle}});
    launches.push_back({{"name", l.name}, {"kernel", l.kernel}, {"role", l.role}, {"grid", l.grid},
                        {"block", l.block}, {"dynamic_smem_bytes", l.dynamicSmemBytes}, {"tensor_maps", maps},
                        {"params", params}, {"in_place", l.inPlace}, {"tensor_cores", l.instructions.tensorCores},
                        {"source_bytes", l.source.size()}});
  }
  // dump() escapes every newline within a string: the first one ends the JSON.
  std::string text =
      json{{"format", kFormat}, {"arch", module.arch}, {"buffers", buffers}, {"launches", launches}}.dump() + "\n";
  for (const KernelLaunch& l : module.launches) text += l.source;
  return text;
}

CudaModule moduleFromText(std::string_view text) {
  const size_t jsonEnd = text.find('\n');
  if (jsonEnd == std::string_view::npos) throw std::runtime_error("no end to the JSON");
  const json j = json::parse(text.substr(0, jsonEnd));  // throws json::parse_error, a std::exception
  std::string_view sources = text.substr(jsonEnd + 1);
  if (j.at("format").get<int>() != kFormat) throw std::runtime_error("format: another version of the cache");
  CudaModule m;
  m.arch = j.at("arch").get<std::string>();
  for (const json& b : j.at("buffers")) {
    BufferDesc d;
    d.node = b.at("node").get<NodeId>();
    d.name = b.at("name").get<std::string>();
    d.dtype = b.at("dtype").get<std::string>();
    d.ctype = b.at("ctype").get<std::string>();
    for (const json& a : b.at("axes")) d.axes.push_back(Axis{a.at(0).get<std::string>(), a.at(1).get<int64_t>()});
    d.elements = b.at("elements").get<int64_t>();
    d.bytes = b.at("bytes").get<int64_t>();
    d.graphInput = b.at("graph_input").get<bool>();
    d.graphOutputs = b.at("graph_outputs").get<std::vector<std::string>>();
    d.within = b.at("within").get<int>();
    d.withinOffset = b.at("within_offset").get<int64_t>();
    d.withinStrides = b.at("within_strides").get<std::vector<int64_t>>();
    m.buffers.push_back(std::move(d));
  }
  const int buffers = static_cast<int>(m.buffers.size());
  for (const BufferDesc& d : m.buffers) {
    if (d.within < 0) continue;
    // The element past the part's last, within its holder.
    int64_t end = d.withinOffset + d.elements;
    bool strided = !d.withinStrides.empty();
    if (strided) {
      strided = d.withinStrides.size() == d.axes.size();
      end = d.withinOffset + 1;
      for (size_t i = 0; strided && i < d.axes.size(); ++i) {
        strided = d.withinStrides[i] >= 0;
        end += (d.axes[i].size - 1) * d.withinStrides[i];
      }
    }
    const bool malformed = !d.withinStrides.empty() && !strided;
    if (malformed || d.within >= buffers || m.buffers[static_cast<size_t>(d.within)].within >= 0 || d.withinOffset < 0 ||
        end > m.buffers[static_cast<size_t>(d.within)].elements)
      throw std::runtime_error(fmt::format("buffers: {} lies outside buffer {}", d.name, d.within));
  }
  auto bufferIndex = [&](const json& v) {
    const int b = v.get<int>();
    if (b < 0 || b >= buffers) throw std::runtime_error(fmt::format("launches: buffer {} of {}", b, buffers));
    return b;
  };
  for (const json& l : j.at("launches")) {
    KernelLaunch k;
    k.name = l.at("name").get<std::string>();
    k.kernel = l.at("kernel").get<int>();
    k.role = l.at("role").get<std::string>();
    k.grid = l.at("grid").get<std::array<int64_t, 3>>();
    k.block = l.at("block").get<int>();
    k.dynamicSmemBytes = l.at("dynamic_smem_bytes").get<int64_t>();
    for (const json& t : l.at("tensor_maps")) {
      TensorMapParam p;
      p.operand = t.at("operand").get<std::string>();
      p.buffer = bufferIndex(t.at("buffer"));
      p.offsetBytes = t.at("offset_bytes").get<int64_t>();
      p.dims = t.at("dims").get<std::array<uint64_t, 4>>();
      p.stridesBytes = t.at("strides_bytes").get<std::array<uint64_t, 3>>();
      p.box = t.at("box").get<std::array<uint32_t, 4>>();
      p.swizzle = t.at("swizzle").get<std::string>();
      k.tensorMaps.push_back(p);
    }
    for (const json& p : l.at("params"))
      k.params.push_back({bufferIndex(p.at(0)), p.at(1).get<bool>(), p.at(2).get<int64_t>()});
    for (const json& p : l.at("in_place")) k.inPlace.push_back({bufferIndex(p.at(0)), bufferIndex(p.at(1))});
    k.instructions.tensorCores = l.at("tensor_cores").get<std::string>();
    const size_t sourceBytes = l.at("source_bytes").get<size_t>();
    if (sourceBytes > sources.size())
      throw std::runtime_error(fmt::format("launches: {}'s source of {} bytes past the entry's end", k.name, sourceBytes));
    k.source = std::string(sources.substr(0, sourceBytes));
    sources.remove_prefix(sourceBytes);
    m.launches.push_back(std::move(k));
  }
  if (!sources.empty()) throw std::runtime_error(fmt::format("{} bytes after the last launch's source", sources.size()));
  return m;
}

}  // namespace llmc::cuda
