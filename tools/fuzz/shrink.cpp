#include "shrink.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace llmc::fuzz {

namespace {

bool sameAxes(const Value& a, const Value& b) {
  if (a.axes.size() != b.axes.size()) return false;
  for (const std::string& x : a.axes)
    if (std::find(b.axes.begin(), b.axes.end(), x) == b.axes.end()) return false;
  return true;
}

// Value v as an input of its own type, what computed it dropped.
std::optional<DiagramSpec> asInput(const DiagramSpec& spec, size_t statement) {
  DiagramSpec s = spec;
  const int v = s.statements[statement].result;
  Value& value = s.values[static_cast<size_t>(v)];
  value.input = true;
  value.param = true;
  value.masked = false;
  s.statements.erase(s.statements.begin() + static_cast<long>(statement));
  s.prune();
  return s;
}

// Uses of the statement's value read its k-th operand instead.
std::optional<DiagramSpec> bypass(const DiagramSpec& spec, size_t statement, size_t k) {
  const Statement& st = spec.statements[statement];
  const int v = st.result, a = st.args[k];
  const Value& from = spec.values[static_cast<size_t>(v)];
  const Value& to = spec.values[static_cast<size_t>(a)];
  if (to.dtype != from.dtype || !sameAxes(from, to) || to.masked) return std::nullopt;
  DiagramSpec s = spec;
  for (Statement& later : s.statements)
    for (int& arg : later.args)
      if (arg == v) arg = a;
  if (s.output == v) s.output = a;
  s.prune();
  return s;
}

std::vector<int64_t> smallerSizes(int64_t size) {
  std::set<int64_t> out;
  for (int64_t s : {int64_t(1), int64_t(3), int64_t(5), int64_t(7), size / 2 | 1, size - 2})
    if (s >= 1 && s < size) out.insert(s);
  return {out.begin(), out.end()};
}

}  // namespace

DiagramSpec shrink(DiagramSpec spec, const std::function<bool(const DiagramSpec&)>& stillFails, double seconds,
                   ShrinkStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  auto timeLeft = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
  };
  ShrinkStats local;
  ShrinkStats& st = stats ? *stats : local;
  auto attempt = [&](const std::optional<DiagramSpec>& candidate) {
    if (!candidate || !candidate->valid() || !timeLeft()) return false;
    ++st.tried;
    if (!stillFails(*candidate)) return false;
    ++st.kept;
    spec = *candidate;
    return true;
  };
  bool progress = true;
  while (progress && timeLeft()) {
    progress = false;
    // Sizes first: every later candidate then compiles and runs faster.
    for (size_t a = 0; a < spec.axes.size() && !progress; ++a) {
      if (spec.axes[a].rule != AxisRule::Root) continue;
      for (int64_t size : smallerSizes(spec.axes[a].size)) {
        DiagramSpec s = spec;
        s.axes[a].size = size;
        if ((progress = attempt(s))) break;
      }
    }
    if (progress) continue;
    // Statements, nearest the output first: one success drops everything
    // only it needed.
    for (size_t i = spec.statements.size(); i-- > 0 && !progress;) progress = attempt(asInput(spec, i));
    for (size_t i = spec.statements.size(); i-- > 0 && !progress;)
      for (size_t k = 0; k < spec.statements[i].args.size() && !progress; ++k) progress = attempt(bypass(spec, i, k));
    if (progress) continue;
    for (size_t v = 0; v < spec.values.size() && !progress; ++v) {
      if (!spec.values[v].param || spec.wrt().size() < 2) continue;
      DiagramSpec s = spec;
      s.values[v].param = false;
      progress = attempt(s);
    }
  }
  return spec;
}

}  // namespace llmc::fuzz
