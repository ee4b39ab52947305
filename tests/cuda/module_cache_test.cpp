// The module cache: a module survives the trip through JSON whole, a second
// lookup finds what the first planned, a changed diagram or description
// plans anew, and a broken entry is replanned rather than trusted.
#include "module_cache.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "codegen/emit_cuda.h"
#include "cuda_test_support.h"
#include "driver/pipeline.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace fs = std::filesystem;
using llmc::testing::CacheTempDir;

namespace {

// A GPT-2 training step small enough to plan in a moment; its GEMMs carry
// tensor maps, its scatter-adds clear launches, its weight gradients parts
// that lie within their outputs.
llmc::CudaModule plannedStep(const std::string& path = "diagrams/gpt2/model.dg", const std::string& entry = "gpt2",
                             llmc::SizeBindings sizes = {{"B", 2}, {"T", 64}, {"maxT", 64}, {"L", 2}, {"C", 64},
                                                         {"H", 2}, {"V", 100}, {"Vp", 128}}) {
  const llmc::Target target = llmc::loadTarget("sm_90a");
  llmc::PipelineOptions p;
  p.path = std::string(LLMC_SOURCE_DIR) + "/" + path;
  p.entry = entry;
  p.sizes = std::move(sizes);
  p.grad = true;
  p.target = &target;
  const llmc::Graph g = llmc::compileToIR(p);
  return llmc::emitCuda(g, llmc::planKernels(g, target, p.cost), target, {});
}

void requireSame(const llmc::CudaModule& a, const llmc::CudaModule& b) {
  REQUIRE(a.arch == b.arch);
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const auto &x = a.buffers[i], &y = b.buffers[i];
    CHECK((x.node == y.node && x.name == y.name && x.dtype == y.dtype && x.ctype == y.ctype && x.axes == y.axes &&
           x.elements == y.elements && x.bytes == y.bytes && x.graphInput == y.graphInput &&
           x.graphOutputs == y.graphOutputs && x.within == y.within && x.withinOffset == y.withinOffset &&
           x.withinStrides == y.withinStrides));
  }
  REQUIRE(a.launches.size() == b.launches.size());
  for (size_t i = 0; i < a.launches.size(); ++i) {
    const auto &x = a.launches[i], &y = b.launches[i];
    INFO(x.name);
    CHECK((x.name == y.name && x.kernel == y.kernel && x.role == y.role && x.grid == y.grid && x.block == y.block &&
           x.dynamicSmemBytes == y.dynamicSmemBytes && x.source == y.source));
    REQUIRE(x.params.size() == y.params.size());
    for (size_t k = 0; k < x.params.size(); ++k)
      CHECK((x.params[k].buffer == y.params[k].buffer && x.params[k].written == y.params[k].written));
    REQUIRE(x.tensorMaps.size() == y.tensorMaps.size());
    for (size_t k = 0; k < x.tensorMaps.size(); ++k) {
      const auto &m = x.tensorMaps[k], &n = y.tensorMaps[k];
      CHECK((m.operand == n.operand && m.buffer == n.buffer && m.offsetBytes == n.offsetBytes && m.dims == n.dims &&
             m.stridesBytes == n.stridesBytes && m.box == n.box && m.swizzle == n.swizzle));
    }
    CHECK(x.instructions.tensorCores.empty() == y.instructions.tensorCores.empty());
    CHECK(x.inPlace == y.inPlace);
  }
}

}  // namespace

TEST_CASE("a module comes back from its text whole", "[module_cache]") {
  const llmc::CudaModule module = plannedStep();
  REQUIRE(std::any_of(module.launches.begin(), module.launches.end(), [](const auto& l) { return !l.tensorMaps.empty(); }));
  REQUIRE(std::any_of(module.launches.begin(), module.launches.end(), [](const auto& l) { return !l.inPlace.empty(); }));
  // The weight gradients of the two layers lie in their stacked outputs.
  REQUIRE(std::any_of(module.buffers.begin(), module.buffers.end(), [](const auto& b) { return b.within >= 0 && b.withinOffset > 0; }));
  const std::string text = llmc::cuda::moduleToText(module);
  requireSame(module, llmc::cuda::moduleFromText(text));
  // A source cut short or run on is refused, not read into the next launch's.
  CHECK_THROWS_WITH(llmc::cuda::moduleFromText(text.substr(0, text.size() - 1)), Catch::Matchers::Contains("past the entry's end"));
  CHECK_THROWS_WITH(llmc::cuda::moduleFromText(text + "x"), Catch::Matchers::Contains("after the last launch's source"));
}

TEST_CASE("a module of another diagram, odd sizes, renamed axes, comes back whole", "[module_cache]") {
  // The fused gated MLP's training step: a join's parts written in place at strides of their own.
  for (const char* entry : {"fused_gated_mlp_loss", "fused_gated_mlp_renamed"}) {
    INFO(entry);
    const llmc::CudaModule module =
        plannedStep("tests/diagrams/fused_gated_mlp.dg", entry, {{"N", 300}, {"C", 72}, {"F", 104}});
    REQUIRE(std::any_of(module.buffers.begin(), module.buffers.end(), [](const auto& b) { return b.within >= 0; }));
    requireSame(module, llmc::cuda::moduleFromText(llmc::cuda::moduleToText(module)));
  }
}

TEST_CASE("the module cache plans once, and again when a diagram changes", "[module_cache]") {
  CacheTempDir dir("module_cache");
  fs::copy(std::string(LLMC_SOURCE_DIR) + "/diagrams", dir.path / "diagrams", fs::copy_options::recursive);
  const llmc::cuda::ModuleCache cache(dir.path / "plans");
  const std::string target = llmc::loadTarget("sm_90a").file;
  int planned = 0;
  auto plan = [&] {
    ++planned;
    return plannedStep();
  };
  const uint64_t key = llmc::cuda::moduleCacheKey(dir.path / "diagrams", "gpt2 B=2", target);
  bool hit = true;
  const llmc::CudaModule first = cache.findOrPlan(key, plan, &hit);
  CHECK_FALSE(hit);
  const llmc::CudaModule second = cache.findOrPlan(key, plan, &hit);
  CHECK(hit);
  CHECK(planned == 1);
  requireSame(first, second);

  CHECK(llmc::cuda::moduleCacheKey(dir.path / "diagrams", "gpt2 B=4", target) != key);
  // A tile named for every GEMM (lowering/gemm_tiles.h) makes another plan.
  setenv("LLMC_GEMM_TILE", "128x256", 1);
  const uint64_t forced = llmc::cuda::moduleCacheKey(dir.path / "diagrams", "gpt2 B=2", target);
  unsetenv("LLMC_GEMM_TILE");
  CHECK(forced != key);
  CHECK(llmc::cuda::moduleCacheKey(dir.path / "diagrams", "gpt2 B=2", target) == key);
  std::ofstream(dir.path / "diagrams" / "lib" / "softmax.dg", std::ios::app) << "\n# edited\n";
  CHECK(llmc::cuda::moduleCacheKey(dir.path / "diagrams", "gpt2 B=2", target) != key);
}

TEST_CASE("a broken module cache entry is planned again", "[module_cache]") {
  CacheTempDir dir("module_cache_broken");
  const llmc::cuda::ModuleCache cache(dir.path);
  const llmc::CudaModule module = plannedStep();
  cache.store(7, module);
  const fs::path entry = dir.path / "0000000000000007.module";
  REQUIRE(fs::exists(entry));
  fs::resize_file(entry, fs::file_size(entry) / 2);  // a torn write
  CHECK_FALSE(cache.find(7).has_value());
  int planned = 0;
  bool hit = true;
  cache.findOrPlan(7, [&] { ++planned; return module; }, &hit);
  CHECK_FALSE(hit);
  CHECK(planned == 1);
  CHECK(cache.find(7).has_value());
}

TEST_CASE("a module cache entry altered on disk is refused by its SHA-256, replanned and rewritten", "[module_cache]") {
  CacheTempDir dir("module_cache_tampered");
  const llmc::cuda::ModuleCache cache(dir.path);
  const llmc::CudaModule module = plannedStep();
  cache.store(9, module);
  const fs::path entry = dir.path / "0000000000000009.module";
  std::string bytes;
  {
    std::ifstream in(entry, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(bytes.starts_with("llmc plan sha256 "));
  // Still valid JSON, still a plan: a launch's block size changed.
  const size_t at = bytes.find("\"block\":");
  REQUIRE(at != std::string::npos);
  std::string altered = bytes;
  altered[at + 8] = altered[at + 8] == '1' ? '2' : '1';
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << altered;
  int planned = 0;
  bool hit = true;
  llmc::testing::StderrCapture capture;
  cache.findOrPlan(9, [&] { ++planned; return module; }, &hit);
  const std::string warning = capture.text();
  CHECK_FALSE(hit);
  CHECK(planned == 1);
  CHECK(warning == "llmc: warning: module cache entry " + entry.string() +
                       " is unusable (its SHA-256 does not match its contents); planning again\n");
  std::ifstream in(entry, std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == bytes);
}

TEST_CASE("a module cache folder others can write into is not used", "[module_cache]") {
  CacheTempDir dir("module_cache_untrusted");
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_all);  // 0770
  llmc::testing::StderrCapture capture;
  const llmc::cuda::ModuleCache cache(dir.path);
  CHECK_FALSE(cache.usable());
  int planned = 0;
  const llmc::CudaModule module = plannedStep();
  cache.findOrPlan(3, [&] { ++planned; return module; });
  cache.findOrPlan(3, [&] { ++planned; return module; });
  CHECK(planned == 2);
  CHECK(fs::is_empty(dir.path));
  CHECK_THAT(capture.text(), Catch::Matchers::Contains("not using the plan cache " + dir.path.string() +
                                                       ": it is writable by its group or by others (mode 0770"));
}
