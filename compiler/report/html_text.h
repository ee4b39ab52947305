// Text put in the HTML report (html_report.h), its inline SVG and the loss plot
// (runtime/train/loss_plot.cpp): escaped so
// that a kernel's name, a composite's path or a file's name is shown as
// written and never read as markup; numbers with SI prefixes.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace llmc {

// `text` safe in an HTML or SVG element's content and in a quoted attribute.
inline std::string escapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// 1.23e12, "FLOP/s" -> "1.23 TFLOP/s"; 3 significant digits.
inline std::string withSiPrefix(double value, const std::string& unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  double v = value;
  while (std::fabs(v) >= 1000 && i < 6) v /= 1000, ++i;
  return fmt::format("{:.3g} {}{}", v, prefixes[i], unit);
}

}  // namespace llmc
