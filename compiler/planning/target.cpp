#include "planning/target.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <tuple>
#include <utility>
#include <nlohmann/json.hpp>

#include "data_folder.h"
#include "planning/gpu_query.h"

namespace llmc {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int64_t kRegisterBytes = 4;

template <typename Items>
auto& named(Items& items, std::string_view name, const std::string& file, const char* what) {
  for (auto& item : items)
    if (item.name == name) return item;
  throw TargetError(fmt::format("{}: no {} '{}'", file, what, name));
}

// The unit names every device must give, in the order Target::units lists them.
const std::initializer_list<std::string_view> kUnitNames = {"tensor_bf16", "tensor_f16", "tensor_tf32",
                                                            "fp32", "fp32_contraction",        "sfu",        "int32"};

// A value inside a target file with its place: `path` for error messages
// ("devices.H200.gmem"), `key` for Target::sources ("device.gmem").
class Field {
 public:
  Field(const json& value, std::string path, std::string key, const std::string& file)
      : value_(&value), path_(std::move(path)), key_(std::move(key)), file_(&file) {}

  const std::string& key() const { return key_; }

  [[noreturn]] void fail(const std::string& what) const {
    if (path_.empty()) throw TargetError(fmt::format("{}: {}", *file_, what));
    throw TargetError(fmt::format("{}: field '{}': {}", *file_, path_, what));
  }

  bool has(const std::string& name) const { return object().contains(name); }

  Field operator[](const std::string& name) const {
    const json& obj = object();
    auto it = obj.find(name);
    if (it == obj.end()) child(name, obj).fail("missing");
    return child(name, *it);
  }

  // Refuses fields other than `names`, so that a misspelt optional field is an
  // error rather than silently absent.
  void allowOnly(std::initializer_list<std::string_view> names) const {
    for (const auto& [name, value] : object().items())
      if (std::find(names.begin(), names.end(), name) == names.end())
        child(name, value).fail(fmt::format("unknown field (expected one of: {})", fmt::join(names, ", ")));
  }

  std::vector<std::string> names() const {
    std::vector<std::string> result;
    for (const auto& [name, value] : object().items()) result.push_back(name);
    return result;
  }

  std::vector<Field> elements() const {
    if (!value_->is_array()) fail(fmt::format("expected an array, found {}", typeName()));
    std::vector<Field> result;
    for (size_t i = 0; i < value_->size(); ++i) {
      std::string index = fmt::format("[{}]", i);
      result.emplace_back((*value_)[i], path_ + index, key_ + index, *file_);
    }
    return result;
  }

  std::string string() const {
    if (!value_->is_string()) fail(fmt::format("expected a string, found {}", typeName()));
    return value_->get<std::string>();
  }

  double number() const {
    if (!value_->is_number()) fail(fmt::format("expected a number, found {}", typeName()));
    return value_->get<double>();
  }

  bool isNumber() const { return value_->is_number(); }

  // A whole number, also when written as a float: capacities read best as 80e9.
  int64_t integer() const {
    if (value_->is_number_integer()) return value_->get<int64_t>();
    if (value_->is_number_float()) {
      double v = value_->get<double>();
      if (v == std::floor(v) && std::abs(v) < 0x1p62) return static_cast<int64_t>(v);
      fail(fmt::format("expected a whole number, found {}", v));
    }
    fail(fmt::format("expected a whole number, found {}", typeName()));
  }

  bool boolean() const {
    if (!value_->is_boolean()) fail(fmt::format("expected true or false, found {}", typeName()));
    return value_->get<bool>();
  }

 private:
  const json& object() const {
    if (!value_->is_object()) fail(fmt::format("expected an object, found {}", typeName()));
    return *value_;
  }

  Field child(const std::string& name, const json& value) const {
    auto join = [&](const std::string& prefix) { return prefix.empty() ? name : prefix + "." + name; };
    return Field(value, join(path_), join(key_), *file_);
  }

  std::string typeName() const {
    if (value_->is_number_integer()) return "an integer";
    if (value_->is_number()) return "a number";
    return fmt::format("{} {}", value_->is_object() || value_->is_array() ? "an" : "a", value_->type_name());
  }

  const json* value_;
  std::string path_, key_;
  const std::string* file_;
};

// Reads the figures of a target file: each is {"value": ..., "source": "..."},
// its source recorded in Target::sources.
class FigureReader {
 public:
  explicit FigureReader(Target& target) : target_(target) {}

  double positive(const Field& figure) {
    Field value = valueOf(figure);
    double v = value.number();
    if (!(v > 0)) value.fail("must be positive");
    return v;
  }

  int64_t positiveInteger(const Field& figure) {
    Field value = valueOf(figure);
    int64_t v = value.integer();
    if (v <= 0) value.fail("must be positive");
    return v;
  }

  int positiveInt(const Field& figure) {
    int64_t v = positiveInteger(figure);
    if (v > INT32_MAX) valueOf(figure).fail("too large");
    return static_cast<int>(v);
  }

  bool flag(const Field& figure) { return valueOf(figure).boolean(); }

  void source(const Field& owner) { target_.sources[owner.key()] = owner["source"].string(); }

 private:
  Field valueOf(const Field& figure) {
    figure.allowOnly({"value", "source"});
    source(figure);
    return figure["value"];
  }

  Target& target_;
};

json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TargetError(fmt::format("{}: cannot open the target file", path));
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw TargetError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

MmaIssuer readIssuer(const Field& f) {
  std::string s = f.string();
  if (s == "warp") return MmaIssuer::Warp;
  if (s == "warpgroup") return MmaIssuer::Warpgroup;
  f.fail(fmt::format("expected \"warp\" or \"warpgroup\", found \"{}\"", s));
}

std::vector<OperandSource> readOperandSources(const Field& f) {
  std::vector<OperandSource> sources;
  for (const Field& e : f.elements()) {
    std::string s = e.string();
    if (s == "registers")
      sources.push_back(OperandSource::Registers);
    else if (s == "smem")
      sources.push_back(OperandSource::SMEM);
    else
      e.fail(fmt::format("expected \"registers\" or \"smem\", found \"{}\"", s));
  }
  if (sources.empty()) f.fail("must name at least one operand source");
  return sources;
}

int readShapeDim(const Field& f) {
  int64_t v = f.integer();
  if (v <= 0 || v > 1024) f.fail("must be between 1 and 1024");
  return static_cast<int>(v);
}

TensorCoreShape readShape(const Field& f, FigureReader& figures) {
  f.allowOnly({"instruction", "m", "n", "k", "input", "accumulator", "executed_by", "a_from", "b_from",
               "source"});
  TensorCoreShape s;
  s.instruction = f["instruction"].string();
  s.m = readShapeDim(f["m"]);
  s.k = readShapeDim(f["k"]);
  // n is one number, or a range {"min", "max", "step"} (wgmma: 8 to 256 in steps of 8).
  Field n = f["n"];
  if (n.isNumber()) {
    s.nMin = s.nMax = s.nStep = readShapeDim(n);
  } else {
    n.allowOnly({"min", "max", "step"});
    s.nMin = readShapeDim(n["min"]);
    s.nMax = readShapeDim(n["max"]);
    s.nStep = readShapeDim(n["step"]);
    if (s.nMax < s.nMin || (s.nMax - s.nMin) % s.nStep != 0)
      n.fail("max must be min plus a whole number of steps");
  }
  s.inputType = f["input"].string();
  s.accumulatorType = f["accumulator"].string();
  s.executedBy = readIssuer(f["executed_by"]);
  s.aFrom = readOperandSources(f["a_from"]);
  s.bFrom = readOperandSources(f["b_from"]);
  figures.source(f);
  return s;
}

void readSM(const Field& sm, Target& t, FigureReader& figures) {
  sm.allowOnly({"warp_size", "warps_per_warpgroup", "max_threads_per_block", "max_warps_per_sm",
                "max_blocks_per_sm", "max_cluster_size", "registers", "smem"});
  t.warpSize = figures.positiveInt(sm["warp_size"]);
  t.warpsPerWarpgroup = figures.positiveInt(sm["warps_per_warpgroup"]);
  t.maxThreadsPerBlock = figures.positiveInt(sm["max_threads_per_block"]);
  t.maxWarpsPerSM = figures.positiveInt(sm["max_warps_per_sm"]);
  t.maxBlocksPerSM = figures.positiveInt(sm["max_blocks_per_sm"]);
  t.maxClusterSize = figures.positiveInt(sm["max_cluster_size"]);

  Field regs = sm["registers"];
  regs.allowOnly({"per_sm", "max_per_block", "max_per_thread", "bytes_per_clock"});
  t.registersPerSM = figures.positiveInt(regs["per_sm"]);
  t.maxRegistersPerBlock = figures.positiveInt(regs["max_per_block"]);
  t.maxRegistersPerThread = figures.positiveInt(regs["max_per_thread"]);
  double regBytesPerClock = figures.positive(regs["bytes_per_clock"]);

  Field smem = sm["smem"];
  smem.allowOnly({"bytes_per_sm", "max_bytes_per_block", "bytes_per_clock"});
  MemoryLevel shared{"SMEM", LevelScope::SM, figures.positiveInteger(smem["bytes_per_sm"]),
                     figures.positiveInteger(smem["max_bytes_per_block"]), 0, 0, 0};
  double smemBytesPerClock = figures.positive(smem["bytes_per_clock"]);

  // Per-SM, per-clock figures times the SMs and the clock: the device's rate.
  const double perClock = t.smCount * t.clockHz;
  shared.bandwidth = shared.attainableBandwidth = smemBytesPerClock * perClock;
  MemoryLevel registers{"REG",
                        LevelScope::SM,
                        t.registersPerSM * kRegisterBytes,
                        t.maxRegistersPerBlock * kRegisterBytes,
                        t.maxRegistersPerThread * kRegisterBytes,
                        regBytesPerClock * perClock,
                        regBytesPerClock * perClock};
  t.levels.push_back(shared);
  t.levels.push_back(registers);
}

// GMEM and L2: {"capacity_bytes", "bandwidth_bytes_per_s", "attainable_bandwidth_bytes_per_s",
// "latency_s"}, the third optional where `attainableRequired` is false, the last optional.
MemoryLevel readDeviceLevel(const Field& f, const std::string& name, bool attainableRequired,
                            FigureReader& figures) {
  f.allowOnly({"capacity_bytes", "bandwidth_bytes_per_s", "attainable_bandwidth_bytes_per_s", "latency_s"});
  MemoryLevel level{name, LevelScope::Device, figures.positiveInteger(f["capacity_bytes"]), 0, 0,
                    figures.positive(f["bandwidth_bytes_per_s"]), 0};
  level.maxPerBlock = level.capacity;
  level.attainableBandwidth = attainableRequired || f.has("attainable_bandwidth_bytes_per_s")
                                  ? figures.positive(f["attainable_bandwidth_bytes_per_s"])
                                  : level.bandwidth;
  if (f.has("latency_s")) level.latency = figures.positive(f["latency_s"]);
  return level;
}

void readDevice(const Field& dev, Target& t, FigureReader& figures) {
  dev.allowOnly({"device_names", "sm_count", "clock_hz", "interconnect", "gmem", "l2", "units"});
  for (const Field& name : dev["device_names"].elements()) name.string();  // checked; detectTarget matches them
  t.smCount = figures.positiveInt(dev["sm_count"]);
  t.clockHz = figures.positive(dev["clock_hz"]);
  if (dev.has("interconnect")) {
    Field link = dev["interconnect"];
    link.allowOnly({"name", "bandwidth_bytes_per_s", "attainable_bandwidth_bytes_per_s"});
    t.interconnect = link["name"].string();
    t.interconnectBandwidth = figures.positive(link["bandwidth_bytes_per_s"]);
    t.interconnectAttainable = figures.positive(link["attainable_bandwidth_bytes_per_s"]);
  }
  t.levels.push_back(readDeviceLevel(dev["gmem"], "GMEM", true, figures));
  t.levels.push_back(readDeviceLevel(dev["l2"], "L2", false, figures));

  Field units = dev["units"];
  units.allowOnly(kUnitNames);
  for (std::string_view name : kUnitNames) {
    Field u = units[std::string(name)];
    u.allowOnly({"peak", "attainable", "warp_mma_attainable"});
    ComputeUnit unit{std::string(name), figures.positive(u["peak"]), 0};
    unit.attainable = u.has("attainable") ? figures.positive(u["attainable"]) : unit.peak;
    unit.warpMmaAttainable = u.has("warp_mma_attainable") ? figures.positive(u["warp_mma_attainable"]) : unit.attainable;
    t.units.push_back(unit);
  }
}

// A parsed target file.
struct TargetFile {
  std::string path;
  json doc;

  Field root() const { return Field(doc, "", "", path); }

  Field devices() const { return root()["devices"]; }

  // Device fields are recorded under "device." in Target::sources, whichever the device.
  Field deviceField(const std::string& name) const {
    return Field(doc["devices"][name], "devices." + name, "device", path);
  }

  // The device named `device`, or the file's default when it is empty. A
  // name matches whatever its case, spaces, hyphens and underscores
  // ("h100-sxm" is "H100 SXM").
  std::string deviceName(const std::string& device) const {
    std::string name = device.empty() ? root()["default_device"].string() : device;
    auto folded = [](const std::string& s) {
      std::string out;
      for (unsigned char c : s)
        if (c != ' ' && c != '-' && c != '_') out += static_cast<char>(std::tolower(c));
      return out;
    };
    for (const std::string& known : devices().names())
      if (folded(known) == folded(name)) name = known;
    if (!devices().has(name)) {
      Field where = device.empty() ? root()["default_device"] : root();
      where.fail(fmt::format("no device '{}'; the devices are: {}", name, fmt::join(devices().names(), ", ")));
    }
    return name;
  }

  std::pair<int, int> computeCapability() const {
    Field cc = root()["compute_capability"];
    cc.allowOnly({"major", "minor"});
    return {static_cast<int>(cc["major"].integer()), static_cast<int>(cc["minor"].integer())};
  }

  // The device whose "device_names" has a part of `reported` (the driver's
  // name, "NVIDIA H200"), or "" for none.
  std::string matchDevice(const std::string& reported) const {
    for (const std::string& name : devices().names())
      for (const Field& part : devices()[name]["device_names"].elements())
        if (reported.find(part.string()) != std::string::npos) return name;
    return "";
  }

  Target read(const std::string& device) const {
    Field root = this->root();
    root.allowOnly({"arch", "description", "compute_capability", "default_device", "sm", "memory_access",
                    "features", "overheads", "tile_library", "tensor_core_shapes", "devices"});
    Target t;
    FigureReader figures(t);
    t.file = path;
    t.arch = root["arch"].string();
    root["description"].string();  // checked; for readers of the file
    std::tie(t.computeCapabilityMajor, t.computeCapabilityMinor) = computeCapability();
    t.device = deviceName(device);
    // The device first: the per-SM rates below need its SM count and clock.
    readDevice(deviceField(t.device), t, figures);
    readSM(root["sm"], t, figures);

    Field access = root["memory_access"];
    access.allowOnly({"coalescing_segment_bytes", "vector_access_bytes"});
    t.coalescingBytes = figures.positiveInt(access["coalescing_segment_bytes"]);
    t.vectorAccessBytes = figures.positiveInt(access["vector_access_bytes"]);

    Field features = root["features"];
    features.allowOnly({"tma", "cp_async", "setmaxnreg"});
    t.hasTMA = figures.flag(features["tma"]);
    t.hasCpAsync = figures.flag(features["cp_async"]);
    t.hasSetmaxnreg = figures.flag(features["setmaxnreg"]);

    Field overheads = root["overheads"];
    overheads.allowOnly({"kernel_launch_s", "graph_kernel_launch_s", "block_sync_base_cycles",
                         "block_sync_cycles_per_warp", "global_f32_atomic_adds_per_s", "global_f32x2_atomic_adds_per_s",
                         "same_address_f32_atomic_add_s", "block_dispatch_s", "scan_bytes_per_s_per_sm"});
    t.launchOverhead = figures.positive(overheads["kernel_launch_s"]);
    t.graphLaunchOverhead = figures.positive(overheads["graph_kernel_launch_s"]);
    t.blockSyncBaseCycles = figures.positive(overheads["block_sync_base_cycles"]);
    t.blockSyncCyclesPerWarp = figures.positive(overheads["block_sync_cycles_per_warp"]);
    if (overheads.has("global_f32_atomic_adds_per_s"))
      t.atomicAddsPerSecond = figures.positive(overheads["global_f32_atomic_adds_per_s"]);
    if (overheads.has("global_f32x2_atomic_adds_per_s"))
      t.pairAtomicAddsPerSecond = figures.positive(overheads["global_f32x2_atomic_adds_per_s"]);
    if (overheads.has("same_address_f32_atomic_add_s"))
      t.sameAddressAtomicSeconds = figures.positive(overheads["same_address_f32_atomic_add_s"]);
    if (overheads.has("block_dispatch_s")) t.blockDispatchSeconds = figures.positive(overheads["block_dispatch_s"]);
    if (overheads.has("scan_bytes_per_s_per_sm"))
      t.scanBytesPerSecondPerSM = figures.positive(overheads["scan_bytes_per_s_per_sm"]);

    if (root.has("tile_library")) {
      Field tiles = root["tile_library"];
      tiles.allowOnly({"fill_s", "load_bytes_per_s_per_sm", "epilogue_bytes_per_s_per_sm", "epilogue_ops_per_s_per_sm",
                       "stream_step_s", "l2_bytes_per_s", "clusters",
                       "unaligned_row_bytes_per_s_16", "unaligned_row_bytes_per_s_32",
                       "unaligned_row_bytes_per_s_64"});
      t.tileFillSeconds = figures.positive(tiles["fill_s"]);
      t.tileLoadBytesPerSecondPerSM = figures.positive(tiles["load_bytes_per_s_per_sm"]);
      t.tileEpilogueBytesPerSecondPerSM = figures.positive(tiles["epilogue_bytes_per_s_per_sm"]);
      if (tiles.has("stream_step_s")) t.tensorStreamStepSeconds = figures.positive(tiles["stream_step_s"]);
      if (tiles.has("l2_bytes_per_s")) t.tileL2BytesPerSecond = figures.positive(tiles["l2_bytes_per_s"]);
      if (tiles.has("clusters")) t.tileClusters = figures.flag(tiles["clusters"]);
      if (tiles.has("epilogue_ops_per_s_per_sm"))
        t.tileEpilogueOpsPerSecondPerSM = figures.positive(tiles["epilogue_ops_per_s_per_sm"]);
      const char* unaligned[] = {"unaligned_row_bytes_per_s_16", "unaligned_row_bytes_per_s_32",
                                 "unaligned_row_bytes_per_s_64"};
      for (int i = 0; i < 3; ++i)
        if (tiles.has(unaligned[i])) t.unalignedRowBandwidth[i] = figures.positive(tiles[unaligned[i]]);
    }

    for (const Field& shape : root["tensor_core_shapes"].elements())
      t.tensorCoreShapes.push_back(readShape(shape, figures));
    return t;
  }
};

TargetFile openTargetFile(const std::string& path) { return TargetFile{path, readJson(path)}; }

std::string archPath(const std::string& arch) { return (fs::path(targetsDir()) / (arch + ".json")).string(); }

// "--arch sm_80 or --arch sm_90a"
std::string archOptions() {
  std::vector<std::string> options;
  for (const std::string& arch : knownArchs()) options.push_back("--arch " + arch);
  return fmt::format("{}", fmt::join(options, " or "));
}

// Puts what the driver reports for `gpu` in place of the data file's figures.
// The rates of a device the file lists are its own (datasheet, measured); a
// GPU it does not list gets the default device's, scaled to its SMs x clock
// (arithmetic, L2) and to its nominal memory bandwidth (attainable GMEM).
void applyGpu(Target& t, const GpuProperties& gpu, bool listed) {
  auto report = [&](auto& field, auto value, const std::string& key, const char* attribute) {
    if (value <= 0) return;  // not reported: the file's figure stands
    field = value;
    t.sources[key] = fmt::format("reported by the driver for this {} ({})", gpu.name, attribute);
  };
  auto rescaled = [&](const std::string& key, double factor) {
    if (auto it = t.sources.find(key); it != t.sources.end() && factor != 1)
      it->second += fmt::format("; scaled by {:.3f} to this {}", factor, gpu.name);
  };
  const double oldPerClock = t.smCount * t.clockHz;
  MemoryLevel& gmem = t.level("GMEM");
  MemoryLevel& l2 = t.level("L2");
  MemoryLevel& smem = t.level("SMEM");
  MemoryLevel& reg = t.level("REG");
  const double oldGmemBandwidth = gmem.bandwidth;

  report(t.smCount, gpu.smCount, "device.sm_count", "MULTIPROCESSOR_COUNT");
  report(t.clockHz, gpu.clockHz, "device.clock_hz", "CLOCK_RATE");
  report(gmem.capacity, gpu.memoryBytes, "device.gmem.capacity_bytes", "cuDeviceTotalMem");
  report(gmem.bandwidth, gpu.memoryBandwidth, "device.gmem.bandwidth_bytes_per_s",
         "2 x MEMORY_CLOCK_RATE x GLOBAL_MEMORY_BUS_WIDTH");
  report(l2.capacity, gpu.l2Bytes, "device.l2.capacity_bytes", "L2_CACHE_SIZE");
  report(smem.capacity, gpu.smemBytesPerSM, "sm.smem.bytes_per_sm", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR");
  report(smem.maxPerBlock, gpu.smemBytesPerBlock, "sm.smem.max_bytes_per_block",
         "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  report(t.registersPerSM, gpu.registersPerSM, "sm.registers.per_sm", "MAX_REGISTERS_PER_MULTIPROCESSOR");
  report(t.maxRegistersPerBlock, gpu.registersPerBlock, "sm.registers.max_per_block", "MAX_REGISTERS_PER_BLOCK");
  report(t.warpSize, gpu.warpSize, "sm.warp_size", "WARP_SIZE");
  report(t.maxThreadsPerBlock, gpu.maxThreadsPerBlock, "sm.max_threads_per_block", "MAX_THREADS_PER_BLOCK");
  report(t.maxWarpsPerSM, gpu.maxThreadsPerSM / t.warpSize, "sm.max_warps_per_sm",
         "MAX_THREADS_PER_MULTIPROCESSOR / WARP_SIZE");
  report(t.maxBlocksPerSM, gpu.maxBlocksPerSM, "sm.max_blocks_per_sm", "MAX_BLOCKS_PER_MULTIPROCESSOR");
  gmem.maxPerBlock = gmem.capacity;
  l2.maxPerBlock = l2.capacity;
  reg.capacity = kRegisterBytes * t.registersPerSM;
  reg.maxPerBlock = kRegisterBytes * t.maxRegistersPerBlock;

  // SMEM and register bandwidths are per-SM, per-clock figures times both.
  const double scale = t.smCount * t.clockHz / oldPerClock;
  for (MemoryLevel* level : {&smem, &reg}) {
    level->bandwidth *= scale;
    level->attainableBandwidth *= scale;
  }
  t.sources["device"] = fmt::format("the driver's name for the GPU: {}", gpu.name);
  if (listed) return;
  t.device = gpu.name;
  for (ComputeUnit& u : t.units) {
    u.peak *= scale;
    u.attainable *= scale;
    u.warpMmaAttainable *= scale;
    rescaled("device.units." + u.name + ".peak", scale);
    rescaled("device.units." + u.name + ".attainable", scale);
    rescaled("device.units." + u.name + ".warp_mma_attainable", scale);
  }
  l2.bandwidth *= scale;
  l2.attainableBandwidth *= scale;
  rescaled("device.l2.bandwidth_bytes_per_s", scale);
  rescaled("device.l2.attainable_bandwidth_bytes_per_s", scale);
  const double memoryScale = gmem.bandwidth / oldGmemBandwidth;
  gmem.attainableBandwidth *= memoryScale;
  rescaled("device.gmem.attainable_bandwidth_bytes_per_s", memoryScale);
}

}  // namespace

bool TensorCoreShape::acceptsN(int n) const {
  return n >= nMin && n <= nMax && (n - nMin) % nStep == 0;
}

const MemoryLevel& Target::level(std::string_view name) const { return named(levels, name, file, "memory level"); }
MemoryLevel& Target::level(std::string_view name) { return named(levels, name, file, "memory level"); }
const ComputeUnit& Target::unit(std::string_view name) const { return named(units, name, file, "compute unit"); }

bool Target::hasUnit(std::string_view name) const {
  return std::any_of(units.begin(), units.end(), [&](const ComputeUnit& u) { return u.name == name; });
}

bool Target::hasWgmma() const {
  return std::any_of(tensorCoreShapes.begin(), tensorCoreShapes.end(),
                     [](const TensorCoreShape& s) { return s.executedBy == MmaIssuer::Warpgroup; });
}

std::vector<TensorCoreShape> Target::shapesFor(std::string_view inputType) const {
  std::vector<TensorCoreShape> shapes;
  for (const auto& s : tensorCoreShapes)
    if (s.inputType == inputType) shapes.push_back(s);
  return shapes;
}

bool Target::hasShapesFor(std::string_view inputType) const {
  return std::any_of(tensorCoreShapes.begin(), tensorCoreShapes.end(),
                     [&](const TensorCoreShape& s) { return s.inputType == inputType; });
}

std::string targetsDir() {
  try {
    return findDataFolder({"LLMC_TARGETS", "targets", LLMC_TARGETS_DIR, "compiler/targets"}).string();
  } catch (const std::runtime_error& e) {
    throw TargetError(e.what());  // the tools report it as they report a bad target file
  }
}

std::vector<std::string> knownArchs() {
  std::vector<std::string> archs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(targetsDir(), ec))
    if (entry.path().extension() == ".json") archs.push_back(entry.path().stem().string());
  std::sort(archs.begin(), archs.end());
  return archs;
}

Target loadTarget(const std::string& archOrPath, const std::string& device) {
  const bool isPath = archOrPath.ends_with(".json") || archOrPath.find('/') != std::string::npos;
  const std::string path = isPath ? archOrPath : archPath(archOrPath);
  if (!isPath && !fs::exists(path)) {
    const std::vector<std::string> known = knownArchs();
    throw TargetError(fmt::format("unknown arch '{}': the known archs are {} (target files in {})", archOrPath,
                                  known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", ")), targetsDir()));
  }
  TargetFile file = openTargetFile(path);
  Target t = file.read(device);
  if (!isPath && t.arch != archOrPath)
    file.root()["arch"].fail(fmt::format("says '{}' but the file is {}.json", t.arch, archOrPath));
  return t;
}

Target loadTargetFor(const std::string& arch, const std::string& gpuName) {
  const Target byDefault = loadTarget(arch);
  const std::string device = openTargetFile(byDefault.file).matchDevice(gpuName);
  return device.empty() ? byDefault : loadTarget(arch, device);
}

Target detectTarget() {
  GpuProperties gpu;
  try {
    gpu = queryGpu(0);
  } catch (const NoGpuError& e) {
    throw TargetError(fmt::format("--arch auto: no CUDA GPU found ({}): give {}", e.what(), archOptions()));
  }
  // The arch is the one whose file has the GPU's compute capability.
  for (const std::string& arch : knownArchs()) {
    TargetFile file = openTargetFile(archPath(arch));
    if (file.computeCapability() != std::pair{gpu.computeCapabilityMajor, gpu.computeCapabilityMinor}) continue;
    const std::string device = file.matchDevice(gpu.name);
    Target t = file.read(device);
    applyGpu(t, gpu, !device.empty());
    return t;
  }
  throw TargetError(fmt::format(
      "--arch auto: the GPU '{}' has compute capability {}.{}, which no target file in {} describes: give {}",
      gpu.name, gpu.computeCapabilityMajor, gpu.computeCapabilityMinor, targetsDir(), archOptions()));
}

}  // namespace llmc
