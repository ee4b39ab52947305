#include "run_line.h"

namespace llmc::fuzz {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The words of `line` split at blanks.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isSpace(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !isSpace(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

void readLine(std::string_view line, RunLineOptions& o) {
  const std::vector<std::string_view> w = words(line);
  for (size_t i = 0; i < w.size(); ++i) {
    const bool hasValue = i + 1 < w.size();
    if (w[i] == "--grad") {
      o.grad = true;
    } else if (w[i] == "--set" && hasValue) {
      if (!o.sizes.empty()) o.sizes += ',';
      o.sizes += w[++i];
    } else if (w[i] == "--entry" && hasValue) {
      if (o.entry.empty()) o.entry = w[i + 1];
      ++i;
    } else if (w[i] == "--loss" && hasValue) {
      if (o.loss.empty()) o.loss = w[i + 1];
      ++i;
    } else if (w[i] == "--wrt" && hasValue) {
      // As llmc-compile splits it: every comma starts another name.
      const std::string_view list = w[++i];
      if (!o.wrt.empty()) continue;
      for (size_t start = 0;;) {
        const size_t comma = list.find(',', start);
        o.wrt.emplace_back(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    }
  }
}

}  // namespace

RunLineOptions readRunLines(std::string_view text) {
  RunLineOptions o;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (const size_t run = line.find("RUN:"); run != std::string_view::npos) readLine(line.substr(run + 4), o);
    start = end + 1;
  }
  return o;
}

}  // namespace llmc::fuzz
