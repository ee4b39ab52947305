#include "codegen/constant_bases.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>
#include <stdexcept>

namespace llmc {

namespace {

constexpr char kOpen = '\x01', kField = '\x1f', kClose = '\x02';

struct Marker {
  size_t begin = 0, end = 0;  // [begin, end) in the text
  std::string param;
  int64_t position = 0;
  int64_t elements = 0;
};

std::vector<Marker> markersIn(const std::string& text) {
  std::vector<Marker> markers;
  for (size_t at = text.find(kOpen); at != std::string::npos; at = text.find(kOpen, at + 1)) {
    const size_t first = text.find(kField, at), second = text.find(kField, first + 1), close = text.find(kClose, at);
    if (first == std::string::npos || second == std::string::npos || close == std::string::npos || second > close)
      throw std::logic_error("constant bases: a malformed marker");
    markers.push_back({at, close + 1, text.substr(at + 1, first - at - 1),
                       std::stoll(text.substr(first + 1, second - first - 1)),
                       std::stoll(text.substr(second + 1, close - second - 1))});
  }
  return markers;
}

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether every use of `param` in `text` is one the pointer may be moved
// under: an offset the writer marked for it (`param + MARK...`, `param[MARK...`,
// the marker perhaps behind parentheses or a cast to long long), its
// declaration (`* __restrict__ param,`, a functor's `* param;`), or its
// passing on whole (`functor{a, param}`).
bool onlyMarkedUses(const std::string& text, const std::string& param) {
  const std::string mark = std::string(1, kOpen) + param + kField;
  for (size_t at = text.find(param); at != std::string::npos; at = text.find(param, at + 1)) {
    const size_t end = at + param.size();
    if ((at > 0 && (isWordChar(text[at - 1]) || text[at - 1] == kOpen)) || (end < text.size() && isWordChar(text[end])))
      continue;  // another name, or the marker's own
    size_t i = end;
    auto skipBlanks = [&] { while (i < text.size() && text[i] == ' ') ++i; };
    skipBlanks();
    if (i < text.size() && (text[i] == '+' || text[i] == '[')) {
      ++i;
      // Parentheses, blanks and a (long long) cast between the operator and the marker.
      for (;;) {
        skipBlanks();
        if (text.compare(i, 11, "(long long)") == 0) i += 11;
        else if (i < text.size() && text[i] == '(') ++i;
        else break;
      }
      if (text.compare(i, mark.size(), mark) == 0) continue;
      return false;
    }
    const bool passedOn = i < text.size() && (text[i] == ',' || text[i] == ';' || text[i] == ')' || text[i] == '}');
    size_t j = at;
    while (j > 0 && text[j - 1] == ' ') --j;
    const bool afterPointer = j > 0 && (text[j - 1] == '*' || text.compare(j >= 12 ? j - 12 : 0, 12, "__restrict__") == 0);
    const bool inList = j > 0 && (text[j - 1] == '{' || text[j - 1] == ',');
    if (!(passedOn && (afterPointer || inList))) return false;
  }
  return true;
}

}  // namespace

std::string constantBaseMarker(const std::string& param, int64_t position, int64_t elements) {
  return fmt::format("{}{}{}{}{}{}{}", kOpen, param, kField, position, kField, elements, kClose);
}

std::string resolveConstantBases(const std::string& function, std::vector<LaunchParam>& params,
                                 const std::function<std::string(int)>& paramName) {
  const std::vector<Marker> markers = markersIn(function);
  if (markers.empty()) return function;
  // Each parameter's positions, and whether it may move.
  std::map<std::string, std::set<std::pair<int64_t, int64_t>>> positions;
  for (const Marker& m : markers) positions[m.param].insert({m.position, m.elements});
  std::map<std::string, int64_t> moved;  // param -> elements it moves by
  for (const auto& [param, at] : positions)
    if (at.size() == 1 && onlyMarkedUses(function, param)) moved[param] = at.begin()->second;
  for (LaunchParam& p : params)
    if (auto it = moved.find(paramName(p.buffer)); it != moved.end()) p.offsetElements = it->second;
  std::string out;
  size_t from = 0;
  for (const Marker& m : markers) {
    out.append(function, from, m.begin - from);
    out += moved.count(m.param) ? std::string("0") : std::to_string(m.position);
    from = m.end;
  }
  out.append(function, from, std::string::npos);
  return out;
}

}  // namespace llmc
