#include "loss_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "atomic_file.h"
#include "report/html_text.h"

namespace llmc {

namespace {

// --- reading main.log ---------------------------------------------------------

[[noreturn]] void badLine(const std::string& path, int64_t lineNumber, const std::string& line,
                          const std::string& what) {
  std::string shown = line.size() > 120 ? line.substr(0, 117) + "..." : line;
  throw std::runtime_error(fmt::format("{}:{}: {} (line: \"{}\")", path, lineNumber, what, shown));
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isSpace(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !isSpace(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

// Drops the entries of `curve` at steps >= first.
void dropFrom(std::map<int64_t, double>& curve, int64_t first) { curve.erase(curve.lower_bound(first), curve.end()); }

int64_t lastStep(const std::map<int64_t, double>& curve) {
  return curve.empty() ? INT64_MIN : curve.rbegin()->first;
}

std::vector<std::pair<int64_t, double>> toVector(const std::map<int64_t, double>& curve) {
  return {curve.begin(), curve.end()};
}

// --- drawing -----------------------------------------------------------------

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 76, kRight = 776, kTop = 62, kBottom = 430;
constexpr const char* kTrainColour = "#1f77b4";
constexpr const char* kValColour = "#d62728";
constexpr size_t kSmoothFrom = 20;  // points of the training curve before an overlay is drawn

// 1, 2 or 5 times a power of ten, near range / target.
double niceStep(double range, int target) {
  double raw = range / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / magnitude;
  double nice = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  return nice * magnitude;
}

// An axis from lo to hi, both multiples of step.
struct Axis {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> ticks() const {
    std::vector<double> out;
    for (int i = 0;; ++i) {
      double v = lo + i * step;
      if (v > hi + step * 1e-6) break;
      out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    }
    return out;
  }
};

Axis niceAxis(double dataMin, double dataMax, int target, bool integral) {
  Axis a;
  a.step = niceStep(dataMax - dataMin, target);
  if (integral) a.step = std::max(1.0, std::round(a.step));
  a.lo = std::floor(dataMin / a.step + 1e-9) * a.step;
  a.hi = std::ceil(dataMax / a.step - 1e-9) * a.step;
  if (a.hi <= a.lo) a.hi = a.lo + a.step;
  return a;
}

std::string tickLabel(double v, double step, bool integral) {
  if (integral) return fmt::format("{}", static_cast<int64_t>(std::llround(v)));
  int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

using Points = std::vector<std::pair<double, double>>;  // (step, loss), finite

// Screen coordinates of points, thinned when there are many more points than
// pixel columns: each column keeps its first, lowest, highest and last point,
// in order, so spikes survive.
Points toScreen(const Points& points, const Axis& x, const Axis& y) {
  Points screen;
  screen.reserve(points.size());
  for (auto [s, v] : points)
    screen.emplace_back(kLeft + (s - x.lo) / (x.hi - x.lo) * (kRight - kLeft),
                        kBottom - (v - y.lo) / (y.hi - y.lo) * (kBottom - kTop));
  if (screen.size() <= 4 * static_cast<size_t>(kRight - kLeft)) return screen;
  Points thinned;
  size_t i = 0;
  while (i < screen.size()) {
    size_t j = i;
    const double column = std::floor(screen[i].first);
    while (j < screen.size() && std::floor(screen[j].first) == column) ++j;
    if (j - i <= 4) {
      thinned.insert(thinned.end(), screen.begin() + static_cast<ptrdiff_t>(i), screen.begin() + static_cast<ptrdiff_t>(j));
    } else {
      size_t lo = i, hi = i;
      for (size_t k = i; k < j; ++k) {
        if (screen[k].second > screen[lo].second) lo = k;  // screen y grows downwards
        if (screen[k].second < screen[hi].second) hi = k;
      }
      std::vector<size_t> keep{i, lo, hi, j - 1};
      std::sort(keep.begin(), keep.end());
      keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
      for (size_t k : keep) thinned.push_back(screen[k]);
    }
    i = j;
  }
  return thinned;
}

std::string pointList(const Points& screen) {
  std::string out;
  for (auto [px, py] : screen) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{:.1f},{:.1f}", px, py);
  }
  return out;
}

// A centred moving average over the points (by index), half-width about
// n/40, kept symmetric (so narrower) near the ends: the steep start of a run
// is followed, not flattened.
Points movingAverage(const Points& points) {
  const size_t n = points.size();
  const size_t half = std::max<size_t>(2, n / 40);
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + points[i].second;
  Points out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t h = std::min({half, i, n - 1 - i});
    const size_t a = i - h, b = i + h + 1;
    out.emplace_back(points[i].first, (prefix[b] - prefix[a]) / static_cast<double>(b - a));
  }
  return out;
}

Points finitePoints(const std::vector<std::pair<int64_t, double>>& curve, int64_t& skipped) {
  Points out;
  for (auto [s, v] : curve) {
    if (std::isfinite(v))
      out.emplace_back(static_cast<double>(s), v);
    else
      ++skipped;
  }
  return out;
}

std::string lossLabel(double v) { return fmt::format("{:.4f}", v); }

std::string renderSvg(const LossCurves& curves, const std::string& title) {
  int64_t skippedTrain = 0, skippedVal = 0;
  const Points train = finitePoints(curves.train, skippedTrain);
  const Points val = finitePoints(curves.val, skippedVal);

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escapeHtml(title));

  // Subtitle: the last point of each curve.
  std::vector<std::string> last;
  if (!train.empty())
    last.push_back(fmt::format("train {} at step {}", lossLabel(train.back().second),
                               static_cast<int64_t>(train.back().first)));
  if (!val.empty())
    last.push_back(
        fmt::format("val {} at step {}", lossLabel(val.back().second), static_cast<int64_t>(val.back().first)));
  if (!last.empty()) {
    std::string text = "last: " + last[0] + (last.size() > 1 ? ", " + last[1] : "");
    svg += fmt::format("<text x=\"{}\" y=\"46\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", kWidth / 2,
                       escapeHtml(text));
  }

  const double midX = (kLeft + kRight) / 2, midY = (kTop + kBottom) / 2;
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", midX, kBottom + 40);
  svg += fmt::format("<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">loss</text>\n",
                     midY);

  if (train.empty() && val.empty()) {
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft,
                       kTop, kRight - kLeft, kBottom - kTop);
    const char* message = skippedTrain + skippedVal > 0 ? "no finite losses to draw" : "no losses logged yet";
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#777\" font-size=\"14\">{}</text>\n",
                       midX, midY, message);
  } else {
    double xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
    for (const Points* p : {&train, &val}) {
      for (auto [s, v] : *p) {
        xMin = std::min(xMin, s), xMax = std::max(xMax, s);
        yMin = std::min(yMin, v), yMax = std::max(yMax, v);
      }
    }
    if (xMax == xMin) xMin = std::max(0.0, xMin - 1), xMax = xMin + 2;
    if (yMax - yMin < 1e-9 * std::max(1.0, std::abs(yMax))) {
      double pad = std::max(0.05, std::abs(yMax) * 0.05);
      yMin -= pad, yMax += pad;
    } else {  // a margin, so that the lowest and highest points are off the frame
      const double pad = 0.03 * (yMax - yMin);
      yMin = yMin >= 0 ? std::max(0.0, yMin - pad) : yMin - pad;
      yMax += pad;
    }
    const Axis x = niceAxis(xMin, xMax, 8, true), y = niceAxis(yMin, yMax, 6, false);

    // Grid and tick labels.
    svg += "<g stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
    for (double t : x.ticks()) {
      double px = kLeft + (t - x.lo) / (x.hi - x.lo) * (kRight - kLeft);
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>\n", px, kTop, kBottom);
    }
    for (double t : y.ticks()) {
      double py = kBottom - (t - y.lo) / (y.hi - y.lo) * (kBottom - kTop);
      svg += fmt::format("<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\"/>\n", py, kLeft, kRight);
    }
    svg += "</g>\n<g fill=\"#333\">\n";
    for (double t : x.ticks()) {
      double px = kLeft + (t - x.lo) / (x.hi - x.lo) * (kRight - kLeft);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px, kBottom + 18,
                         tickLabel(t, x.step, true));
    }
    for (double t : y.ticks()) {
      double py = kBottom - (t - y.lo) / (y.hi - y.lo) * (kBottom - kTop);
      svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, py + 4,
                         tickLabel(t, y.step, false));
    }
    svg += "</g>\n";
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft,
                       kTop, kRight - kLeft, kBottom - kTop);

    // Curves: training (thin, lighter under its moving average), then validation.
    const bool smooth = train.size() >= kSmoothFrom;
    if (!train.empty()) {
      svg += fmt::format(
          "<polyline class=\"train\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\"{} stroke-linejoin=\"round\" "
          "points=\"{}\"/>\n",
          kTrainColour, smooth ? " stroke-opacity=\"0.35\"" : "", pointList(toScreen(train, x, y)));
      if (train.size() == 1) {
        auto p = toScreen(train, x, y)[0];
        svg += fmt::format("<circle class=\"train-point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n",
                           p.first, p.second, kTrainColour);
      }
    }
    if (smooth) {
      svg += fmt::format(
          "<polyline class=\"train-smoothed\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
          "stroke-linejoin=\"round\" points=\"{}\"/>\n",
          kTrainColour, pointList(toScreen(movingAverage(train), x, y)));
    }
    if (!val.empty()) {
      const Points screen = toScreen(val, x, y);
      svg += fmt::format(
          "<polyline class=\"val\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-linejoin=\"round\" "
          "points=\"{}\"/>\n",
          kValColour, pointList(screen));
      if (screen.size() <= 200) {
        svg += fmt::format("<g class=\"val-points\" fill=\"{}\">\n", kValColour);
        for (auto [px, py] : screen) svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>\n", px, py);
        svg += "</g>\n";
      }
    }

    // Legend, top right inside the plot (loss curves fall, so it is usually empty there).
    std::vector<std::pair<std::string, std::string>> entries;  // label, marker
    if (!train.empty()) {
      entries.emplace_back("train loss", fmt::format("stroke=\"{}\" stroke-width=\"1\"{}", kTrainColour,
                                                     smooth ? " stroke-opacity=\"0.35\"" : ""));
      if (smooth) entries.emplace_back("train, moving average", fmt::format("stroke=\"{}\" stroke-width=\"2\"", kTrainColour));
    }
    if (!val.empty()) entries.emplace_back("val loss", fmt::format("stroke=\"{}\" stroke-width=\"1.5\"", kValColour));
    const double legendW = 190, legendH = 10 + 18 * static_cast<double>(entries.size());
    const double lx = kRight - legendW - 10, ly = kTop + 10;
    svg += fmt::format("<g class=\"legend\">\n<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"white\" "
                       "fill-opacity=\"0.9\" stroke=\"#bbb\"/>\n",
                       lx, ly, legendW, legendH);
    for (size_t i = 0; i < entries.size(); ++i) {
      double cy = ly + 14 + 18 * static_cast<double>(i);
      svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>\n", lx + 10, cy, lx + 40, cy,
                         entries[i].second);
      if (entries[i].first == "val loss")
        svg += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", lx + 25, cy, kValColour);
      svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 48, cy + 4, entries[i].first);
    }
    svg += "</g>\n";
  }

  if (skippedTrain + skippedVal > 0) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#b00\">not drawn: {} train and {} val losses that "
        "are not finite numbers</text>\n",
        midX, kHeight - 10, skippedTrain, skippedVal);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

LossCurves readTrainLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  std::map<int64_t, double> train, val;
  std::string line;
  int64_t lineNumber = 0;
  while (std::getline(in, line)) {
    ++lineNumber;
    std::optional<int64_t> step;
    std::optional<double> trl, tel;
    std::vector<std::string_view> keys;
    for (std::string_view field : splitFields(line)) {
      size_t colon = field.find(':');
      if (colon == std::string_view::npos || colon == 0)
        badLine(path, lineNumber, line, fmt::format("field '{}' is not key:value", field));
      std::string_view key = field.substr(0, colon), value = field.substr(colon + 1);
      if (std::find(keys.begin(), keys.end(), key) != keys.end())
        badLine(path, lineNumber, line, fmt::format("field '{}' appears twice", key));
      keys.push_back(key);
      const char* end = value.data() + value.size();
      if (key == "s") {
        int64_t s = 0;
        auto [ptr, ec] = std::from_chars(value.data(), end, s);
        if (value.empty() || ec != std::errc() || ptr != end)
          badLine(path, lineNumber, line, fmt::format("step 's:{}' is not an integer", value));
        if (s < 0) badLine(path, lineNumber, line, fmt::format("step {} is negative", s));
        step = s;
      } else if (key == "trl" || key == "tel") {
        double v = 0;
        auto [ptr, ec] = std::from_chars(value.data(), end, v);
        // Out of range ("1e999") reads as infinite: drawn as not finite, not an error.
        if (ec == std::errc::result_out_of_range && ptr == end) v = value[0] == '-' ? -INFINITY : INFINITY;
        else if (value.empty() || ec != std::errc() || ptr != end)
          badLine(path, lineNumber, line, fmt::format("loss '{}:{}' is not a number", key, value));
        (key == "trl" ? trl : tel) = v;
      }
    }
    if (keys.empty()) continue;  // a blank line
    if (!step) badLine(path, lineNumber, line, "no step field 's:'");
    const int64_t s = *step;
    // A step that does not move the log forward starts a resumed (or new)
    // run: what the earlier run logged from there on is dropped. "s:N tel"
    // comes before "s:N trl" in llm.c's logs and llmc's (whose older logs,
    // numbering training steps from 1, have it after); all read the same way.
    if (trl) {
      if (lastStep(train) >= s || lastStep(val) > s) dropFrom(train, s), dropFrom(val, s + 1);
      train[s] = *trl;
    }
    if (tel) {
      if (lastStep(val) >= s || lastStep(train) > s) dropFrom(val, s), dropFrom(train, s + 1);
      val[s] = *tel;
    }
  }
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read failed", path));
  return LossCurves{toVector(train), toVector(val)};
}

void writeLossPlotSvg(const LossCurves& curves, const std::string& svgPath, const std::string& title) {
  const std::string svg = renderSvg(curves, title);
  writeFileAtomically(svgPath, svg);  // whole or not at all (common/atomic_file.h)
}

void writeLossPlot(const std::string& outputDir) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(outputDir).lexically_normal();
  std::string name = dir.filename().string();
  if (name.empty() || name == ".") name = dir.parent_path().filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::absolute(dir).lexically_normal().filename().string();
  if (name.empty()) name = outputDir;
  const LossCurves curves = readTrainLog((dir / "main.log").string());
  writeLossPlotSvg(curves, (dir / "loss.svg").string(), fmt::format("llmc-train loss: {}", name));
}

}  // namespace llmc
