#include "report/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "report/html_text.h"

namespace llmc {

namespace {

// The drawing's frame in SVG pixels: the plot's box, the legend to its right.
constexpr double kWidth = 980, kHeight = 560;
constexpr double kLeft = 80, kRight = 720, kTop = 20, kBottom = 500;

// A log10 axis over whole decades, from a value to a pixel.
struct LogAxis {
  double lo = 1, hi = 10;          // values at the ends, powers of 10
  double pixelLo = 0, pixelHi = 1;  // their pixels
  double at(double v) const {
    return pixelLo + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (pixelHi - pixelLo);
  }
};

// The decades around `values` (positive), at least two of them, and above
// the largest at least `headroom` times it (room for a roof's label).
LogAxis decadesAround(const std::vector<double>& values, double pixelLo, double pixelHi, double headroom = 1) {
  double lo = *std::min_element(values.begin(), values.end()), hi = *std::max_element(values.begin(), values.end());
  LogAxis axis{std::pow(10.0, std::floor(std::log10(lo))), std::pow(10.0, std::ceil(std::log10(hi))), pixelLo, pixelHi};
  axis.hi = std::max({axis.hi, hi * headroom, axis.lo * 100});
  return axis;
}

// A horizontal roof: a compute unit's rate.
struct Ceiling {
  std::string label;
  double flops = 0;
  std::string colour;
  bool dashed = false;
};

// A sloped roof: a memory level's byte rate.
struct Slope {
  std::string label;
  double bandwidth = 0;
  std::string colour;
};

// A kernel's place: its operations, its bytes across the level, its time.
struct Dot {
  int row = 0;
  const PlannedKernel* kernel = nullptr;
  double flops = 0, bytes = 0, seconds = 0;
  bool measured = false;
};

// The compute roofs: each tensor-core unit the plan uses (bf16 where it uses
// none, to show what they would give) and the fp32 lanes, at the peak and,
// dashed, at what the target file says good code attains; where the plan
// has contractions on the CUDA cores, the rate the file gives them (their
// peak is the fp32 lanes').
std::vector<Ceiling> computeCeilings(const std::vector<PlannedKernel>& kernels, const Target& target) {
  std::set<std::string> tensorUnits;
  bool cudaCoreContractions = false;
  for (const auto& k : kernels)
    for (const auto& [unit, ops] : k.cost.work) {
      if (unit.rfind("tensor", 0) == 0 && ops > 0 && target.hasUnit(unit)) tensorUnits.insert(unit);
      if (unit == "fp32_contraction" && ops > 0) cudaCoreContractions = true;
    }
  if (tensorUnits.empty() && target.hasUnit("tensor_bf16")) tensorUnits.insert("tensor_bf16");
  std::vector<Ceiling> out;
  auto add = [&](const std::string& unit, const std::string& name, const std::string& colour) {
    const ComputeUnit& u = target.unit(unit);
    out.push_back({fmt::format("{} peak {}", name, withSiPrefix(u.peak, "FLOP/s")), u.peak, colour, false});
    if (u.attainable > 0 && u.attainable < u.peak)
      out.push_back({fmt::format("{} attainable {}", name, withSiPrefix(u.attainable, "FLOP/s")), u.attainable, colour,
                     true});
  };
  for (const std::string& unit : tensorUnits) add(unit, "tensor cores " + unit.substr(7), "#1f77b4");
  if (target.hasUnit("fp32")) add("fp32", "fp32", "#2ca02c");
  if (cudaCoreContractions && target.hasUnit("fp32_contraction")) {
    const ComputeUnit& u = target.unit("fp32_contraction");
    if (u.attainable > 0 && u.attainable < u.peak)
      out.push_back({fmt::format("contractions on the CUDA cores attainable {}", withSiPrefix(u.attainable, "FLOP/s")),
                     u.attainable, "#2ca02c", true});
  }
  return out;
}

// The memory roofs: GMEM's and L2's attainable byte rates (the model's).
std::vector<Slope> memorySlopes(const Target& target) {
  std::vector<Slope> out;
  const MemoryLevel& gmem = target.level("GMEM");
  out.push_back({fmt::format("GMEM {}", withSiPrefix(gmem.attainableBandwidth, "B/s")), gmem.attainableBandwidth,
                 "#d62728"});
  const MemoryLevel& l2 = target.level("L2");
  out.push_back({fmt::format("L2 {}", withSiPrefix(l2.attainableBandwidth, "B/s")), l2.attainableBandwidth, "#ff7f0e"});
  return out;
}

// The grid and the ticks: a line and a label a decade, and the axes' titles.
std::string grid(const LogAxis& x, const LogAxis& y, const std::string& level) {
  std::string out = "<g class=\"grid\">\n";
  for (double v = x.lo; v <= x.hi * 1.001; v *= 10) {
    const double px = x.at(v);
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>"
                       "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       px, kTop, kBottom, kBottom + 16, v);
  }
  for (double v = y.lo; v <= y.hi * 1.001; v *= 10) {
    const double py = y.at(v);
    out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>"
                       "<text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       kLeft, py, kRight, kLeft - 6, py + 4, withSiPrefix(v, ""));
  }
  out += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", kLeft, kTop, kRight - kLeft,
                     kBottom - kTop);
  out += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity "
                     "(FLOP per byte moved {})</text>\n",
                     (kLeft + kRight) / 2, kBottom + 38,
                     level == "GMEM" ? "between GMEM and L2" : "between L2 and the SMs");
  out += fmt::format("<text class=\"axis-title\" transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">"
                     "achieved FLOP/s</text>\n</g>\n",
                     (kTop + kBottom) / 2);
  return out;
}

// The roofs: the memory lines up to the highest compute level, and the
// compute levels across the plot, each labelled.
std::string roofs(const LogAxis& x, const LogAxis& y, const std::vector<Ceiling>& ceilings,
                  const std::vector<Slope>& slopes) {
  double top = 0;
  for (const Ceiling& c : ceilings) top = std::max(top, c.flops);
  std::string out = "<g class=\"roofs\">\n";
  // A peak's label above its line, an attainable rate's below (the two are
  // close: 800 and 989 TFLOP/s), at the left, where the memory lines are
  // far below them and the fastest kernels are not.
  for (const Ceiling& c : ceilings) {
    const double py = y.at(c.flops), labelY = c.dashed ? py + 13 : py - 4;
    out += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\"{}/>"
                       "<text class=\"roof-label\" x=\"{}\" y=\"{:.1f}\" fill=\"{}\">{}</text>\n",
                       kLeft, py, kRight, py, c.colour, c.dashed ? " stroke-dasharray=\"6 4\"" : "", kLeft + 4, labelY,
                       c.colour, escapeHtml(c.label));
  }
  // GMEM's label below its line, L2's above (the lines are close and parallel).
  for (const Slope& s : slopes) {
    // Where FLOP/s = bandwidth x intensity crosses the plot, up to the top roof.
    const double x0 = std::max(x.lo, y.lo / s.bandwidth), x1 = std::min(x.hi, (top > 0 ? top : y.hi) / s.bandwidth);
    if (x0 >= x1) continue;
    const double px0 = x.at(x0), py0 = y.at(s.bandwidth * x0), px1 = x.at(x1), py1 = y.at(s.bandwidth * x1);
    const double angle = std::atan2(py1 - py0, px1 - px0) * 180 / M_PI;
    const double lx = px0 + 0.55 * (px1 - px0), ly = py0 + 0.55 * (py1 - py0);
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>"
                       "<text class=\"roof-label\" transform=\"translate({:.1f} {:.1f}) rotate({:.1f})\" y=\"{}\" "
                       "text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                       px0, py0, px1, py1, s.colour, lx, ly, angle, &s == &slopes.front() ? 13 : -5, s.colour,
                       escapeHtml(s.label));
  }
  return out + "</g>\n";
}

// The legend: the engines' colours, then what a hollow or a ringed dot means.
std::string legend(const std::map<std::string, std::string>& colours, bool anyMeasured) {
  std::string out = "<g class=\"legend\">\n";
  double y = kTop + 10;
  for (const auto& [engine, colour] : colours) {
    out += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                       kRight + 20, y, colour, kRight + 30, y + 4, escapeHtml(engine.empty() ? "(none)" : engine));
    y += 18;
  }
  y += 8;
  if (anyMeasured) {
    out += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"5\" fill=\"#888\" stroke=\"#000\" stroke-width=\"2\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\">measured time</text>\n",
                       kRight + 20, y, kRight + 30, y + 4);
    y += 18;
    out += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"5\" fill=\"#888\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\">predicted (not measured)</text>\n",
                       kRight + 20, y, kRight + 30, y + 4);
    y += 18;
  }
  out += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"5\" fill=\"none\" stroke=\"#888\" stroke-width=\"2\"/>"
                     "<text x=\"{}\" y=\"{:.1f}\">off the scale (no FLOP,</text>"
                     "<text x=\"{}\" y=\"{:.1f}\">or no bytes at this level)</text>\n",
                     kRight + 20, y, kRight + 30, y + 4, kRight + 30, y + 18);
  return out + "</g>\n";
}

// A dot's tooltip: the kernel, its operations and bytes, its time and rate.
std::string dotTitle(const Dot& d, const std::string& level) {
  const PlannedKernel& k = *d.kernel;
  std::string text = fmt::format("{} ({}): {} over {} across {}", k.kernel.name, k.cost.engine.empty() ? "-" : k.cost.engine,
                                 withSiPrefix(d.flops, "FLOP"), withSiPrefix(d.bytes, "B"), level);
  if (d.bytes > 0 && d.flops > 0) text += fmt::format(" = {:.3g} FLOP/B", d.flops / d.bytes);
  text += fmt::format("; {:.2f} us {}", d.seconds * 1e6, d.measured ? "measured" : "predicted");
  if (d.seconds > 0 && d.flops > 0) text += fmt::format(", {}", withSiPrefix(d.flops / d.seconds, "FLOP/s"));
  return text;
}

}  // namespace

double kernelFlops(const KernelCost& cost) {
  double flops = 0;
  for (const auto& [unit, ops] : cost.work)
    if (unit.rfind("tensor", 0) == 0 || unit == "fp32" || unit == "fp32_contraction") flops += ops;
  return flops;
}

std::map<std::string, std::string> engineColours(const std::vector<PlannedKernel>& kernels) {
  static const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  std::map<std::string, std::string> colours;
  for (const auto& k : kernels) colours[k.cost.engine];
  int i = 0;
  for (auto& [engine, colour] : colours) colour = palette[i++ % std::size(palette)];
  return colours;
}

std::string rooflineSvg(const std::vector<PlannedKernel>& kernels, const Target& target,
                        const std::map<int, double>* measured, const std::string& level) {
  std::vector<Dot> dots;
  std::vector<double> xs, ys;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const PlannedKernel& k = kernels[i];
    Dot d{static_cast<int>(i), &k, kernelFlops(k.cost), k.cost.level(level).movedBytes, k.cost.predicted, false};
    if (measured)
      if (auto m = measured->find(k.kernel.id); m != measured->end()) d.seconds = m->second, d.measured = true;
    if (d.flops > 0 && d.bytes > 0) xs.push_back(d.flops / d.bytes);
    if (d.flops > 0 && d.seconds > 0) ys.push_back(d.flops / d.seconds);
    dots.push_back(d);
  }
  const std::vector<Ceiling> ceilings = computeCeilings(kernels, target);
  const std::vector<Slope> slopes = memorySlopes(target);
  // The ridge points (where a memory line meets a compute roof) are in
  // range, so the roof's shape shows even for a plan far below it.
  for (const Ceiling& c : ceilings) {
    ys.push_back(c.flops);
    for (const Slope& s : slopes) xs.push_back(c.flops / s.bandwidth);
  }
  if (xs.empty()) xs = {0.1, 100};
  if (ys.empty()) ys = {1e9, 1e15};
  const LogAxis x = decadesAround(xs, kLeft, kRight), y = decadesAround(ys, kBottom, kTop, 2.5);
  const std::map<std::string, std::string> colours = engineColours(kernels);

  std::string out = fmt::format(
      "<svg class=\"roofline\" data-level=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" role=\"img\">\n<title>roofline, x: FLOP per byte across {}</title>\n",
      level, kWidth, kHeight, kWidth, kHeight, level);
  out += grid(x, y, level) + roofs(x, y, ceilings, slopes) + legend(colours, measured != nullptr);
  out += "<g class=\"dots\">\n";
  for (const Dot& d : dots) {
    // Off the scale: no operations (on the floor) or no bytes (at the right edge).
    const bool offScale = d.flops <= 0 || d.bytes <= 0 || d.seconds <= 0;
    const double px = d.flops > 0 && d.bytes > 0 ? x.at(std::clamp(d.flops / d.bytes, x.lo, x.hi)) : d.bytes <= 0 ? kRight : kLeft;
    const double py = d.flops > 0 && d.seconds > 0 ? y.at(std::clamp(d.flops / d.seconds, y.lo, y.hi)) : kBottom;
    const std::string& colour = colours.at(d.kernel->cost.engine);
    out += fmt::format("<circle class=\"dot\" data-kernel=\"{}\" data-row=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" {}>"
                       "<title>{}</title></circle>\n",
                       escapeHtml(d.kernel->kernel.name), d.row, px, py,
                       offScale ? fmt::format("fill=\"none\" stroke=\"{}\" stroke-width=\"2\"", colour)
                       : d.measured ? fmt::format("fill=\"{}\" stroke=\"#000\" stroke-width=\"1.5\"", colour)
                                    : fmt::format("fill=\"{}\" fill-opacity=\"0.85\"", colour),
                       escapeHtml(dotTitle(d, level)));
  }
  return out + "</g>\n</svg>\n";
}

}  // namespace llmc
