// Target descriptions: the data files load and are self-consistent, a broken
// file is refused with the file and field named, and --arch auto reads the GPU
// (or says that there is none).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data_test_support.h"
#include "planning/target.h"

namespace fs = std::filesystem;
using llmc::detectTarget;
using llmc::knownArchs;
using llmc::loadTarget;
using llmc::MmaIssuer;
using llmc::OperandSource;
using llmc::Target;
using llmc::TargetError;
using llmc::testing::DataTempDir;
using llmc::testing::writeFile;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

const std::string kTargetsDir = LLMC_SOURCE_DIR "/compiler/targets";

struct ArchDevice {
  std::string arch, device;
};
const std::vector<ArchDevice> kDevices = {
    {"sm_80", "A100 80GB SXM"}, {"sm_80", "A100 40GB SXM"}, {"sm_90a", "H200"}, {"sm_90a", "H100 SXM"}};

nlohmann::json readTargetJson(const std::string& arch) {
  std::ifstream in(kTargetsDir + "/" + arch + ".json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Writes `doc` to `dir`/name and returns the path.
std::string writeJson(const DataTempDir& dir, const std::string& name, const nlohmann::json& doc) {
  const fs::path path = dir.path / name;
  writeFile(path, doc.dump(2));
  return path.string();
}

std::string loadError(const std::string& archOrPath, const std::string& device = "") {
  try {
    loadTarget(archOrPath, device);
  } catch (const TargetError& e) {
    return e.what();
  }
  FAIL("loadTarget(\"" << archOrPath << "\") did not throw");
  return "";
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool hasShape(const Target& t, const std::string& instruction, const std::string& input, MmaIssuer issuer) {
  for (const auto& s : t.tensorCoreShapes)
    if (s.instruction == instruction && s.inputType == input && s.executedBy == issuer) return true;
  return false;
}

}  // namespace

TEST_CASE("target: the data files of both archs load, with their default devices", "[target]") {
  CHECK(knownArchs() == std::vector<std::string>{"sm_80", "sm_90a"});
  const Target hopper = loadTarget("sm_90a");
  CHECK(hopper.arch == "sm_90a");
  CHECK(hopper.device == "H200");
  CHECK(hopper.computeCapabilityMajor == 9);
  CHECK(hopper.computeCapabilityMinor == 0);
  CHECK(hopper.smCount == 132);
  CHECK(hopper.level("GMEM").attainableBandwidth == 4.25e12);
  CHECK(hopper.level("GMEM").latency == 4.4e-7);
  CHECK(hopper.level("L2").latency == 0);  // none given
  CHECK(hopper.unit("tensor_bf16").attainable == 800e12);

  const Target ampere = loadTarget("sm_80");
  CHECK(ampere.arch == "sm_80");
  CHECK(ampere.device == "A100 80GB SXM");
  CHECK(ampere.computeCapabilityMajor == 8);
  CHECK(ampere.smCount == 108);
  CHECK(ampere.level("SMEM").capacity == 164 * 1024);

  // A path works as well as an arch name.
  CHECK(loadTarget(kTargetsDir + "/sm_80.json", "A100 40GB SXM").level("GMEM").bandwidth == 1.555e12);
}

TEST_CASE("target: every device is self-consistent", "[target]") {
  for (const auto& [arch, device] : kDevices) {
    INFO(arch << " " << device);
    const Target t = loadTarget(arch, device);
    CHECK(t.device == device);

    std::vector<std::string> names;
    for (const auto& l : t.levels) names.push_back(l.name);
    REQUIRE(names == std::vector<std::string>{"GMEM", "L2", "SMEM", "REG"});
    for (const auto& l : t.levels) {
      INFO(l.name);
      CHECK(l.capacity > 0);
      CHECK(l.maxPerBlock > 0);
      CHECK(l.maxPerBlock <= l.capacity);
      CHECK(l.bandwidth > 0);
      CHECK(l.attainableBandwidth > 0);
      CHECK(l.attainableBandwidth <= l.bandwidth);
    }
    const auto &gmem = t.level("GMEM"), &l2 = t.level("L2"), &smem = t.level("SMEM"), &reg = t.level("REG");
    // Smaller and faster going down the hierarchy.
    CHECK(gmem.capacity > l2.capacity);
    CHECK(l2.capacity > smem.capacity);
    CHECK(smem.capacity > reg.maxPerThread);
    CHECK(gmem.bandwidth < l2.bandwidth);
    CHECK(l2.bandwidth < smem.bandwidth);
    CHECK(smem.bandwidth < reg.bandwidth);
    CHECK(gmem.attainableBandwidth < l2.attainableBandwidth);
    CHECK(reg.maxPerThread == 255 * 4);
    CHECK(reg.capacity == 65536 * 4);

    for (const auto& u : t.units) {
      INFO(u.name);
      CHECK(u.peak > 0);
      CHECK(u.attainable > 0);
      CHECK(u.attainable <= u.peak);
    }
    CHECK(t.unit("tensor_bf16").peak > t.unit("tensor_tf32").peak);
    CHECK(t.unit("tensor_tf32").peak > t.unit("fp32").peak);
    CHECK(t.unit("fp32").peak > t.unit("sfu").peak);

    CHECK(t.warpSize == 32);
    CHECK(t.warpsPerWarpgroup == 4);
    CHECK(t.maxThreadsPerBlock == 1024);
    CHECK(t.maxWarpsPerSM * t.warpSize >= t.maxThreadsPerBlock);
    CHECK(t.maxBlocksPerSM > 0);
    CHECK(t.registersPerSM == 65536);
    CHECK(t.maxRegistersPerThread == 255);
    CHECK(t.coalescingBytes == 128);
    CHECK(t.vectorAccessBytes == 16);
    CHECK(t.hasCpAsync);
    CHECK(t.launchOverhead > t.graphLaunchOverhead);
    CHECK(t.blockSyncSeconds(8) > 0);

    // Every figure says where it came from.
    for (const auto& [field, source] : t.sources) {
      INFO(field);
      CHECK_FALSE(source.empty());
    }
    CHECK(t.sources.count("device.gmem.attainable_bandwidth_bytes_per_s") == 1);
    CHECK(t.sources.count("sm.smem.bytes_per_sm") == 1);
    CHECK(t.sources.count("device.units.tensor_bf16.peak") == 1);
  }
  CHECK_THAT(loadTarget("sm_90a", "H200").sources.at("device.units.tensor_bf16.attainable"),
             Contains("measured on the H200"));
}

TEST_CASE("target: tensor-core shapes and Hopper-only features", "[target]") {
  const Target hopper = loadTarget("sm_90a");
  const Target ampere = loadTarget("sm_80");
  for (const Target* t : {&hopper, &ampere}) {
    INFO(t->arch);
    CHECK(hasShape(*t, "mma.sync.aligned.m16n8k16", "bf16", MmaIssuer::Warp));
    CHECK(hasShape(*t, "mma.sync.aligned.m16n8k8", "tf32", MmaIssuer::Warp));
    for (const auto& s : t->shapesFor("bf16")) {
      if (s.executedBy != MmaIssuer::Warp) continue;
      CHECK(s.m == 16);
      CHECK(s.k == 16);
      CHECK(s.acceptsN(8));
      CHECK_FALSE(s.acceptsN(16));
      CHECK(s.accumulatorType == "f32");
    }
  }

  CHECK(hopper.hasWgmma());
  CHECK_FALSE(ampere.hasWgmma());
  CHECK_FALSE(hasShape(ampere, "wgmma.mma_async.sync.aligned", "bf16", MmaIssuer::Warpgroup));
  bool sawWgmma = false;
  for (const auto& s : hopper.shapesFor("bf16")) {
    if (s.executedBy != MmaIssuer::Warpgroup) continue;
    sawWgmma = true;
    CHECK(s.instruction == "wgmma.mma_async.sync.aligned");
    CHECK(s.m == 64);
    CHECK(s.k == 16);
    CHECK(s.acceptsN(8));
    CHECK(s.acceptsN(136));
    CHECK(s.acceptsN(256));
    CHECK_FALSE(s.acceptsN(12));
    CHECK_FALSE(s.acceptsN(264));
    CHECK(s.aFrom == std::vector<OperandSource>{OperandSource::SMEM, OperandSource::Registers});
    CHECK(s.bFrom == std::vector<OperandSource>{OperandSource::SMEM});
  }
  CHECK(sawWgmma);

  CHECK(hopper.hasTMA);
  CHECK(hopper.hasSetmaxnreg);
  CHECK(hopper.hasClusters());
  CHECK_FALSE(ampere.hasTMA);
  CHECK_FALSE(ampere.hasSetmaxnreg);
  CHECK_FALSE(ampere.hasClusters());
  CHECK(hopper.level("SMEM").capacity == 228 * 1024);
  CHECK(hopper.level("SMEM").maxPerBlock == 227 * 1024);
}

TEST_CASE("target: a malformed file is refused, naming the file and the field", "[target]") {
  DataTempDir dir("target_malformed");

  SECTION("missing field") {
    auto doc = readTargetJson("sm_90a");
    doc["devices"]["H200"]["gmem"].erase("bandwidth_bytes_per_s");
    const std::string path = writeJson(dir, "missing.json", doc);
    const std::string error = loadError(path);
    CHECK_THAT(error, StartsWith(path + ": "));
    CHECK_THAT(error, Contains("field 'devices.H200.gmem.bandwidth_bytes_per_s': missing"));
  }
  SECTION("wrong type") {
    auto doc = readTargetJson("sm_80");
    doc["sm"]["max_warps_per_sm"]["value"] = "64";
    const std::string path = writeJson(dir, "wrong_type.json", doc);
    CHECK_THAT(loadError(path),
               Contains(path + ": field 'sm.max_warps_per_sm.value': expected a whole number, found a string"));
  }
  SECTION("an object where a figure's value should be") {
    auto doc = readTargetJson("sm_80");
    doc["devices"]["A100 80GB SXM"]["units"]["fp32"]["peak"]["value"] = nlohmann::json::object();
    const std::string path = writeJson(dir, "object.json", doc);
    CHECK_THAT(loadError(path), Contains("field 'devices.A100 80GB SXM.units.fp32.peak.value': expected a number, "
                                         "found an object"));
  }
  SECTION("not positive") {
    auto doc = readTargetJson("sm_90a");
    doc["devices"]["H200"]["sm_count"]["value"] = 0;
    const std::string path = writeJson(dir, "zero.json", doc);
    CHECK_THAT(loadError(path), Contains("field 'devices.H200.sm_count.value': must be positive"));
  }
  SECTION("a latency that is not positive") {
    auto doc = readTargetJson("sm_90a");
    doc["devices"]["H200"]["gmem"]["latency_s"]["value"] = -4.4e-7;
    const std::string path = writeJson(dir, "latency.json", doc);
    CHECK_THAT(loadError(path), Contains("field 'devices.H200.gmem.latency_s.value': must be positive"));
  }
  SECTION("misspelt field") {
    auto doc = readTargetJson("sm_90a");
    doc["devices"]["H200"]["units"]["fp32"]["atainable"] = doc["devices"]["H200"]["units"]["fp32"]["peak"];
    const std::string path = writeJson(dir, "typo.json", doc);
    CHECK_THAT(loadError(path), Contains("field 'devices.H200.units.fp32.atainable': unknown field (expected one "
                                         "of: peak, attainable, warp_mma_attainable)"));
  }
  SECTION("bad tensor-core shape") {
    auto doc = readTargetJson("sm_90a");
    doc["tensor_core_shapes"][0]["executed_by"] = "block";
    const std::string path = writeJson(dir, "shape.json", doc);
    CHECK_THAT(loadError(path), Contains("field 'tensor_core_shapes[0].executed_by': expected \"warp\" or "
                                         "\"warpgroup\", found \"block\""));
  }
  SECTION("not JSON") {
    const fs::path path = dir.path / "broken.json";
    writeFile(path, "{\"arch\": \"sm_80\",\n");
    CHECK_THAT(loadError(path.string()), StartsWith(path.string() + ": not valid JSON: "));
  }
  SECTION("no such file") {
    const std::string path = (dir.path / "absent.json").string();
    CHECK(loadError(path) == path + ": cannot open the target file");
  }
}

TEST_CASE("target: an unknown arch or device lists the known ones", "[target]") {
  CHECK_THAT(loadError("sm_75"), StartsWith("unknown arch 'sm_75': the known archs are sm_80, sm_90a"));
  CHECK_THAT(loadError("sm_90a", "B200"),
             EndsWith("sm_90a.json: no device 'B200'; the devices are: H100 SXM, H200"));

  // A file whose arch is not its name is refused.
  DataTempDir dir("target_env");
  auto doc = readTargetJson("sm_80");
  doc["arch"] = "sm_86";
  writeJson(dir, "sm_80.json", doc);
  ScopedEnv env("LLMC_TARGETS", dir.path.string());
  CHECK(knownArchs() == std::vector<std::string>{"sm_80"});
  CHECK_THAT(loadError("sm_80"), Contains("field 'arch': says 'sm_86' but the file is sm_80.json"));
  CHECK_THAT(loadError("sm_90a"), StartsWith("unknown arch 'sm_90a': the known archs are sm_80"));
}

TEST_CASE("target: a GPU's name picks its device of the arch's file, else the default", "[target]") {
  using llmc::loadTargetFor;
  const Target h100 = loadTargetFor("sm_90a", "NVIDIA H100 80GB HBM3");
  CHECK(h100.device == "H100 SXM");
  CHECK(h100.level("GMEM").attainableBandwidth == loadTarget("sm_90a", "H100 SXM").level("GMEM").attainableBandwidth);
  CHECK(h100.level("GMEM").attainableBandwidth < loadTarget("sm_90a").level("GMEM").attainableBandwidth);
  CHECK(loadTargetFor("sm_90a", "NVIDIA H200").device == "H200");
  CHECK(loadTargetFor("sm_80", "NVIDIA A100-SXM4-40GB").device == "A100 40GB SXM");
  // A GPU the file does not list: its default device.
  CHECK(loadTargetFor("sm_90a", "NVIDIA H800").device == loadTarget("sm_90a").device);
}

TEST_CASE("target: --arch auto reads the GPU, or says there is none", "[target]") {
  // Decided apart from detectTarget, so that a GPU it fails to see is a failure.
  const bool gpuPresent = fs::exists("/dev/nvidia0");
  if (gpuPresent) {
    const Target t = detectTarget();
    CHECK((t.arch == "sm_80" || t.arch == "sm_90a"));
    CHECK(t.smCount > 0);
    CHECK(t.clockHz > 0);
    CHECK(t.level("GMEM").capacity > t.level("L2").capacity);
    CHECK(t.level("SMEM").maxPerBlock <= t.level("SMEM").capacity);
    CHECK_THAT(t.sources.at("device.sm_count"), Contains("reported by the driver"));
  } else {
    CHECK_THROWS_WITH(detectTarget(), StartsWith("--arch auto: no CUDA GPU found (") &&
                                          EndsWith("): give --arch sm_80 or --arch sm_90a"));
  }
}
