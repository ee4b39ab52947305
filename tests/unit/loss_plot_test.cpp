// The loss plot: main.log read back (resumed runs, malformed lines) and drawn
// as an SVG.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <string>

#include "data_test_support.h"
#include "loss_plot.h"

using namespace llmc;
using namespace llmc::testing;
using Curve = std::vector<std::pair<int64_t, double>>;

namespace {

// The number of x,y pairs in the points attribute of the element with this class.
size_t pointCount(const std::string& svg, const std::string& cls) {
  size_t at = svg.find("class=\"" + cls + "\"");
  if (at == std::string::npos) return 0;
  size_t start = svg.find("points=\"", at);
  REQUIRE(start != std::string::npos);
  start += 8;
  size_t end = svg.find('"', start);
  REQUIRE(end != std::string::npos);
  std::string points = svg.substr(start, end - start);
  size_t count = 0;
  bool inToken = false;
  for (char c : points) {
    if (c == ' ') inToken = false;
    else if (!inToken) inToken = true, ++count;
  }
  return count;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

size_t countOf(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

// Well-formed enough: one root, every element closed (opening tags = closing
// tags + self-closing ones), no non-finite numbers printed.
void checkSvgShape(const std::string& svg) {
  CHECK(svg.rfind("<svg ", 0) == 0);
  CHECK(svg.size() >= 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(countOf(svg, "<svg") == 1);
  const size_t opening = countOf(svg, "<") - countOf(svg, "</");
  CHECK(opening == countOf(svg, "</") + countOf(svg, "/>"));
  CHECK(lower(svg).find("nan") == std::string::npos);
  CHECK(svg.find("inf\"") == std::string::npos);
  CHECK(svg.find("inf,") == std::string::npos);
}

std::string plot(const LossCurves& curves, const std::filesystem::path& dir, const std::string& title = "run") {
  const std::string path = (dir / "loss.svg").string();
  writeLossPlotSvg(curves, path, title);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  return readFileBytes(path);
}

}  // namespace

TEST_CASE("readTrainLog: train and val curves; a resumed run replaces the steps it logs again", "[train][plot]") {
  DataTempDir dir("loss_plot_read");
  const auto log = dir.path / "main.log";
  writeFile(log,
            "s:0 tel:10.827224\n"
            "s:1 trl:10.792729 norm:1.9557 lr:1.500000e-03 ms:496.8\n"
            "s:2 trl:10.5 norm:1.79 lr:3.0e-03 ms:369.3 someday:whatever\n"
            "\n"
            "s:3 trl:10.4 norm:1.8 lr:3.0e-03 ms:300\n"
            "s:3 tel:10.45\n"
            "s:4 trl:10.3 norm:1.8 lr:3.0e-03 ms:300\n"
            "s:5 trl:10.2 norm:1.8 lr:3.0e-03 ms:300\n"
            // resumed from the checkpoint at step 3
            "s:3 tel:10.46\n"
            "s:4 trl:10.25 norm:1.8 lr:3.0e-03 ms:300\r\n"
            "s:5 trl:10.1 norm:1.8 lr:3.0e-03 ms:300\n"
            "s:5 tel:10.2\n");
  LossCurves c = readTrainLog(log.string());
  CHECK(c.train == Curve{{1, 10.792729}, {2, 10.5}, {3, 10.4}, {4, 10.25}, {5, 10.1}});
  CHECK(c.val == Curve{{0, 10.827224}, {3, 10.46}, {5, 10.2}});

  SECTION("a resumed run that stops earlier leaves no stale tail") {
    writeFile(log,
              "s:1 trl:5\ns:2 trl:4\ns:2 tel:4.5\ns:3 trl:3\ns:4 trl:2\ns:4 tel:2.5\n"
              "s:3 trl:3.5\n");  // resumed from step 2, stopped after step 3
    c = readTrainLog(log.string());
    CHECK(c.train == Curve{{1, 5}, {2, 4}, {3, 3.5}});
    CHECK(c.val == Curve{{2, 4.5}});
  }
  SECTION("llm.c's order (validation before the step's training line) is no resume") {
    writeFile(log, "s:0 tel:11\ns:0 trl:10.9 lr:0.0006 norm:3.2\ns:1 trl:10.7 lr:0.0006 norm:3.1\ns:1 eval:0.25\n");
    c = readTrainLog(log.string());
    CHECK(c.train == Curve{{0, 10.9}, {1, 10.7}});
    CHECK(c.val == Curve{{0, 11}});
  }
  SECTION("nan and inf are losses") {
    writeFile(log, "s:1 trl:nan\ns:2 trl:-nan\ns:3 trl:inf\ns:4 trl:2.5\n");
    c = readTrainLog(log.string());
    REQUIRE(c.train.size() == 4);
    CHECK(std::isnan(c.train[0].second));
    CHECK(std::isnan(c.train[1].second));
    CHECK(std::isinf(c.train[2].second));
    CHECK(c.train[3] == std::pair<int64_t, double>{4, 2.5});
  }
}

TEST_CASE("readTrainLog: a malformed line is an error naming file:line", "[train][plot]") {
  DataTempDir dir("loss_plot_bad");
  const auto log = dir.path / "main.log";
  const std::string where = log.string() + ":3: ";
  auto failsWith = [&](const std::string& third, const std::string& what) {
    writeFile(log, "s:0 tel:10.8\ns:1 trl:10.7 norm:1.9\n" + third + "\ns:3 trl:10.5\n");
    REQUIRE_THROWS_WITH(readTrainLog(log.string()), Catch::StartsWith(where) && Catch::Contains(what));
  };
  failsWith("s:2 trl:abc norm:1.9", "loss 'trl:abc' is not a number");
  failsWith("s:2 tel:", "loss 'tel:' is not a number");
  failsWith("s:2x trl:10.6", "step 's:2x' is not an integer");
  failsWith("s:-2 trl:10.6", "step -2 is negative");
  failsWith("trl:10.6 norm:1.9", "no step field");
  failsWith("s:2 trl 10.6", "field 'trl' is not key:value");
  failsWith("s:2 trl:10.6 trl:10.5", "field 'trl' appears twice");
  REQUIRE_THROWS_WITH(readTrainLog((dir.path / "none.log").string()), Catch::Contains("none.log: cannot open"));
}

TEST_CASE("writeLossPlotSvg: curves, legend, ticks; non-finite losses skipped and noted", "[train][plot]") {
  DataTempDir dir("loss_plot_svg");
  LossCurves c;
  c.train = {{1, 10.792729}, {2, 10.5}, {3, NAN}, {4, 10.3}, {5, 10.1}, {6, INFINITY}};
  c.val = {{0, 10.827224}, {3, 10.46}, {6, 10.2}};
  const std::string svg = plot(c, dir.path, "tiny <run> & co");
  checkSvgShape(svg);
  CHECK(pointCount(svg, "train") == 4);
  CHECK(pointCount(svg, "val") == 3);
  CHECK(countOf(svg, "<circle") == 3 + 1);  // val points, and the legend's val marker
  CHECK(svg.find("train-smoothed") == std::string::npos);  // too few points for a moving average
  CHECK(svg.find(">train loss</text>") != std::string::npos);
  CHECK(svg.find(">val loss</text>") != std::string::npos);
  CHECK(svg.find(">tiny &lt;run&gt; &amp; co</text>") != std::string::npos);
  CHECK(svg.find("not drawn: 2 train and 0 val losses") != std::string::npos);
  CHECK(svg.find("last: train 10.1000 at step 5, val 10.2000 at step 6") != std::string::npos);
  // Round ticks: steps 0..6 by 1, losses 10.1..10.9 by 0.1.
  for (const char* label : {">0</text>", ">6</text>", ">10.1</text>", ">10.5</text>", ">10.9</text>"})
    CHECK(svg.find(label) != std::string::npos);
  CHECK(svg.find(">7</text>") == std::string::npos);
  CHECK(svg.find(">10.50</text>") == std::string::npos);
}

TEST_CASE("writeLossPlotSvg: many points get a moving average; edge cases draw", "[train][plot]") {
  DataTempDir dir("loss_plot_edges");
  SECTION("a long run") {
    LossCurves c;
    for (int64_t s = 1; s <= 500; ++s) c.train.emplace_back(s, 3 + 8.0 / std::sqrt(static_cast<double>(s)));
    for (int64_t s = 0; s <= 500; s += 50) c.val.emplace_back(s, 3.2 + 8.0 / std::sqrt(static_cast<double>(s + 1)));
    const std::string svg = plot(c, dir.path);
    checkSvgShape(svg);
    CHECK(pointCount(svg, "train") == 500);
    CHECK(pointCount(svg, "train-smoothed") == 500);
    CHECK(pointCount(svg, "val") == 11);
    CHECK(svg.find(">train, moving average</text>") != std::string::npos);
    CHECK(svg.find("not drawn") == std::string::npos);
    CHECK(svg.find(">500</text>") != std::string::npos);
  }
  SECTION("empty curves") {
    const std::string svg = plot(LossCurves{}, dir.path);
    checkSvgShape(svg);
    CHECK(svg.find("no losses logged yet") != std::string::npos);
    CHECK(svg.find("<polyline") == std::string::npos);
  }
  SECTION("only non-finite losses") {
    const std::string svg = plot(LossCurves{{{1, NAN}}, {{0, -INFINITY}}}, dir.path);
    checkSvgShape(svg);
    CHECK(svg.find("no finite losses to draw") != std::string::npos);
    CHECK(svg.find("not drawn: 1 train and 1 val losses") != std::string::npos);
  }
  SECTION("a single point") {
    const std::string svg = plot(LossCurves{{}, {{0, 10.83}}}, dir.path);
    checkSvgShape(svg);
    CHECK(pointCount(svg, "val") == 1);
    CHECK(svg.find(">val loss</text>") != std::string::npos);
    CHECK(svg.find(">train loss</text>") == std::string::npos);
  }
  SECTION("a very long run is thinned to a few points per pixel column") {
    LossCurves c;
    for (int64_t s = 1; s <= 100000; ++s) c.train.emplace_back(s, 3 + (s % 1000 == 0 ? 5 : 0));
    const std::string svg = plot(c, dir.path);
    checkSvgShape(svg);
    CHECK(pointCount(svg, "train") <= 4 * 700);
    CHECK(pointCount(svg, "train") >= 700);
    CHECK(svg.find(">8</text>") != std::string::npos);  // the spikes set the top of the axis
  }
}

TEST_CASE("writeLossPlot: OUTDIR/main.log to OUTDIR/loss.svg", "[train][plot]") {
  DataTempDir dir("loss_plot_dir");
  writeFile(dir.path / "main.log", "s:0 tel:10.8\ns:1 trl:10.7 norm:1.9 lr:1e-3 ms:5\ns:2 trl:10.6 norm:1.9 lr:1e-3 ms:5\n");
  writeLossPlot(dir.path.string() + "/");
  const std::string svg = readFileBytes(dir.path / "loss.svg");
  checkSvgShape(svg);
  CHECK(svg.find("llmc-train loss: " + dir.path.filename().string()) != std::string::npos);
  CHECK(pointCount(svg, "train") == 2);
  CHECK(pointCount(svg, "val") == 1);
  CHECK_FALSE(std::filesystem::exists(dir.path / "loss.svg.tmp"));
}
