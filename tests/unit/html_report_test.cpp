// The HTML report's pieces that a diagram can't easily reach: text escaped
// for the page, the roofline's FLOP count, and kernels off its scale (no
// floating-point work, no bytes at the level), which the lit test's plans
// don't have (tests/lit/report/html_report.dg checks whole pages).
#include <catch2/catch.hpp>

#include <regex>

#include "planning/target.h"
#include "report/html_text.h"
#include "report/roofline.h"

namespace {

llmc::PlannedKernel kernel(int id, const std::string& name, std::map<std::string, double> work, double gmemBytes,
                           double seconds) {
  llmc::PlannedKernel k;
  k.kernel.id = id;
  k.kernel.name = name;
  k.cost.work = std::move(work);
  k.cost.levels = {{"GMEM", 0, 0, gmemBytes, 0}, {"L2", 0, 0, 2 * gmemBytes, 0}};
  k.cost.predicted = seconds;
  k.cost.engine = "CUDA cores";
  return k;
}

// The circle of the dot named `name`, as written.
std::string dotOf(const std::string& svg, const std::string& name) {
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<circle class=\"dot\" data-kernel=\"" + name + "\"[^>]*>")));
  return m.str();
}

double attribute(const std::string& element, const std::string& name) {
  std::smatch m;
  REQUIRE(std::regex_search(element, m, std::regex(" " + name + "=\"([-0-9.]+)\"")));
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("html report: text is escaped for elements and quoted attributes", "[report]") {
  CHECK(llmc::escapeHtml("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  CHECK(llmc::escapeHtml("k3_d_p") == "k3_d_p");
  CHECK(llmc::withSiPrefix(8.1e12, "B/s") == "8.1 TB/s");
  CHECK(llmc::withSiPrefix(989.4e12, "FLOP/s") == "989 TFLOP/s");
  CHECK(llmc::withSiPrefix(0.5, "") == "0.5 ");
}

TEST_CASE("html report: the roofline counts tensor-core and fp32 work, not the special functions", "[report]") {
  const llmc::PlannedKernel k =
      kernel(0, "k0", {{"tensor_bf16", 1e9}, {"fp32", 2e6}, {"fp32_contraction", 3e3}, {"sfu", 5e5}, {"int32", 7}}, 1, 1);
  CHECK(llmc::kernelFlops(k.cost) == 1e9 + 2e6 + 3e3);
}

TEST_CASE("html report: kernels off the roofline's scale sit on its edges, hollow", "[report]") {
  const llmc::Target target = llmc::loadTarget("sm_90a");
  const std::vector<llmc::PlannedKernel> kernels = {
      kernel(0, "k0_gemm", {{"tensor_bf16", 1e11}}, 1e8, 2e-4),   // 1000 FLOP/B, 500 TFLOP/s
      kernel(1, "k1_sum", {{"fp32", 1e7}}, 4e7, 1e-5),            // 0.25 FLOP/B, 1 TFLOP/s
      kernel(2, "k2_copy", {}, 4e7, 1e-5),                        // no FLOP: on the floor
      kernel(3, "k3_on_chip", {{"fp32", 1e6}}, 0, 2e-6)};         // no GMEM bytes: at the right edge
  const std::map<int, double> measured = {{1, 2e-5}};
  const std::string svg = llmc::rooflineSvg(kernels, target, &measured, "GMEM");
  const std::string gemm = dotOf(svg, "k0_gemm"), sum = dotOf(svg, "k1_sum"), copy = dotOf(svg, "k2_copy"),
                    onChip = dotOf(svg, "k3_on_chip");
  CHECK(attribute(gemm, "cx") > attribute(sum, "cx"));
  CHECK(attribute(gemm, "cy") < attribute(sum, "cy"));  // faster: higher up
  // The measured dot is ringed in black; the off-scale ones hollow, on the
  // frame's bottom (y 500) and right (x 720) edges.
  CHECK(sum.find("stroke=\"#000\"") != std::string::npos);
  CHECK(gemm.find("stroke=\"#000\"") == std::string::npos);
  CHECK(copy.find("fill=\"none\"") != std::string::npos);
  CHECK(attribute(copy, "cy") == 500);
  CHECK(onChip.find("fill=\"none\"") != std::string::npos);
  CHECK(attribute(onChip, "cx") == 720);
  // k1's rate is its measured one: 1e7 FLOP in 20 us, 500 GFLOP/s.
  CHECK(svg.find("k1_sum (CUDA cores): 10 MFLOP over 40 MB across GMEM = 0.25 FLOP/B; 20.00 us measured, 500 "
                 "GFLOP/s") != std::string::npos);
  // The roofs: GMEM's and L2's byte rates, the tensor cores' and fp32's peaks.
  CHECK(svg.find("GMEM 4.25 TB/s") != std::string::npos);
  CHECK(svg.find("L2 8.1 TB/s") != std::string::npos);
  CHECK(svg.find("tensor cores bf16 peak 989 TFLOP/s") != std::string::npos);
  CHECK(svg.find("fp32 peak 66.9 TFLOP/s") != std::string::npos);
}
