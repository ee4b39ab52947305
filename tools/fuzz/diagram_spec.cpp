#include "diagram_spec.h"

#include <fmt/format.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <set>

namespace llmc::fuzz {

const AxisDef* DiagramSpec::findAxis(const std::string& name) const {
  for (const AxisDef& a : axes)
    if (a.name == name) return &a;
  return nullptr;
}

std::optional<int64_t> DiagramSpec::sizeOf(const std::string& name) const {
  const AxisDef* a = findAxis(name);
  if (!a) return std::nullopt;
  switch (a->rule) {
    case AxisRule::Root: {
      if (a->size < 1) return std::nullopt;
      if (!a->sliceOf.empty()) {
        auto parent = sizeOf(a->sliceOf);
        if (!parent || a->lo + a->size > *parent) return std::nullopt;
      }
      return a->size;
    }
    case AxisRule::Quotient: {
      auto whole = sizeOf(a->of.at(0)), part = sizeOf(a->of.at(1));
      if (!whole || !part || *whole % *part != 0 || *whole / *part < 1) return std::nullopt;
      return *whole / *part;
    }
    case AxisRule::Product: {
      int64_t p = 1;
      for (const std::string& o : a->of) {
        auto s = sizeOf(o);
        if (!s) return std::nullopt;
        p *= *s;
      }
      return p;
    }
    case AxisRule::Multiple: {
      auto s = sizeOf(a->of.at(0));
      if (!s) return std::nullopt;
      return a->n * *s;
    }
    case AxisRule::Same: return sizeOf(a->of.at(0));
    case AxisRule::Count: return a->n;
  }
  return std::nullopt;
}

bool DiagramSpec::valid() const {
  for (const AxisDef& a : axes)
    if (!sizeOf(a.name)) return false;
  return true;
}

int64_t DiagramSpec::elements(const std::vector<std::string>& names) const {
  int64_t n = 1;
  for (const std::string& a : names) n *= sizeOf(a).value_or(1);
  return n;
}

int DiagramSpec::producer(int v) const {
  for (size_t s = 0; s < statements.size(); ++s)
    if (statements[s].result == v) return static_cast<int>(s);
  return -1;
}

void DiagramSpec::prune() {
  std::set<int> live = {output};
  for (size_t s = statements.size(); s-- > 0;)
    if (live.count(statements[s].result))
      for (int a : statements[s].args) live.insert(a);
  std::erase_if(statements, [&](const Statement& s) { return !live.count(s.result); });
  for (Value& v : values)
    if (v.input && !live.count(static_cast<int>(&v - values.data()))) v.name.clear();  // printed no more
  // The loss is differentiated against at least one float input.
  if (wrt().empty())
    for (Value& v : values)
      if (v.input && !v.name.empty() && v.dtype != "i32") {
        v.param = true;
        break;
      }
}

std::vector<std::string> DiagramSpec::wrt() const {
  std::vector<std::string> names;
  if (!fileText.empty()) return fileWrt;
  for (const Value& v : values)
    if (v.input && v.param && !v.name.empty()) names.push_back(v.name);
  return names;
}

namespace {

std::string typeText(const DiagramSpec& spec, const Value& v, bool sizes) {
  std::string t = v.dtype + "[";
  for (size_t i = 0; i < v.axes.size(); ++i) {
    if (i) t += " ";
    t += v.axes[i];
    if (sizes) t += fmt::format(":{}", spec.sizeOf(v.axes[i]).value_or(0));
  }
  return t + "]";
}

// `$i` -> the name of the i-th argument, `#axis#` -> the axis's size.
std::string expand(const DiagramSpec& spec, const Statement& s) {
  std::string out;
  const std::string& t = s.text;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '$') {
      size_t j = i + 1;
      while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
      out += spec.values.at(static_cast<size_t>(s.args.at(std::stoul(t.substr(i + 1, j - i - 1))))).name;
      i = j - 1;
    } else if (t[i] == '#') {
      size_t j = t.find('#', i + 1);
      out += fmt::format("{}", spec.sizeOf(t.substr(i + 1, j - i - 1)).value_or(0));
      i = j;
    } else {
      out += t[i];
    }
  }
  return out;
}

}  // namespace

std::string printDiagram(const DiagramSpec& spec, const std::string& header) {
  if (!spec.fileText.empty()) return spec.fileText;
  std::string text = header;
  for (const Statement& s : spec.statements)
    if (!s.helper.empty()) text += s.helper + "\n";
  const Value& y = spec.values.at(static_cast<size_t>(spec.output));
  Value weights{.name = "wy", .dtype = "f32", .axes = y.axes, .input = true};
  std::vector<std::string> inputs;
  for (const Value& v : spec.values)
    if (v.input && !v.name.empty())
      inputs.push_back(fmt::format("{}{}: {}", v.param ? "param " : "", v.name, typeText(spec, v, true)));
  inputs.push_back(fmt::format("wy: {}", typeText(spec, weights, true)));
  std::set<std::string> known;
  for (const Value& v : spec.values)
    if (v.input && !v.name.empty()) known.insert(v.axes.begin(), v.axes.end());
  for (const Statement& s : spec.statements) known.insert(s.creates.begin(), s.creates.end());
  Value anchor{.name = "anchor", .dtype = "f32"};
  for (const Statement& s : spec.statements)
    for (const std::string& a : s.needs)
      if (!known.count(a)) {
        known.insert(a);
        anchor.axes.push_back(a);
      }
  if (!anchor.axes.empty()) inputs.push_back(fmt::format("anchor: {}", typeText(spec, anchor, true)));
  Value out = y;
  out.dtype = "f32";
  text += fmt::format("diagram fuzz({}) -> (y: {}, loss: f32[])\n", fmt::join(inputs, ", "), typeText(spec, out, false));
  for (const Statement& s : spec.statements)
    text += fmt::format("  {} = {}\n", spec.values.at(static_cast<size_t>(s.result)).name, expand(spec, s));
  text += fmt::format("  y = {}\n", y.dtype == "f32" ? y.name : fmt::format("f32({})", y.name));
  if (y.axes.empty()) text += "  loss = y * wy\n";
  else text += fmt::format("  loss = sum(y * wy, {})\n", fmt::join(y.axes, ", "));
  return text + "end\n";
}

}  // namespace llmc::fuzz

namespace llmc::fuzz {

std::string inputsHeader(const DiagramSpec& spec) {
  std::string text;
  for (const Value& v : spec.values) {
    if (!v.input || v.name.empty()) continue;
    if (!v.indexAxis.empty()) text += fmt::format("# fuzz-input: {} index {}\n", v.name, spec.sizeOf(v.indexAxis).value_or(1));
    else if (v.lo > 0) text += fmt::format("# fuzz-input: {} positive\n", v.name);
  }
  return text + fmt::format("# fuzz-wrt: {}\n", fmt::join(spec.wrt(), ","));
}

DiagramSpec readDiagram(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  DiagramSpec spec;
  std::string line;
  while (std::getline(in, line)) {
    spec.fileText += line + "\n";
    std::istringstream words(line);
    std::string hash, key, name, kind;
    words >> hash >> key;
    if (hash != "#") continue;
    if (key == "fuzz-seed:") words >> spec.seed;
    if (key == "fuzz-wrt:") {
      std::string list;
      words >> list;
      for (size_t start = 0; start < list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        spec.fileWrt.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    }
    if (key != "fuzz-input:") continue;
    words >> name >> kind;
    Value v{.name = name, .dtype = kind == "index" ? "i32" : "f32", .input = true};
    if (kind == "index") words >> v.indexBound;
    else v.lo = 0.5, v.bound = 2;
    spec.values.push_back(v);
  }
  return spec;
}

}  // namespace llmc::fuzz
