// Composites written out by hand, as a user would: softmax (with and without
// stop_gradient on its maximum, sometimes followed by a maximum, an absolute
// value or a division over the same axis), layernorm, rmsnorm, and attention
// (causal or not, with a bias on the scores, multi-query keys and values that
// lack the head axis). Each is a few statements, so that the shrinker can
// take them apart.
#include <fmt/format.h>

#include <cmath>

#include "generator_state.h"

namespace llmc::fuzz {

namespace {

// Softmax of `x` over `axis`; returns the probabilities' value.
int softmaxOver(Generator& g, int x, const std::string& axis) {
  const Value v = g.value(x);
  const bool stop = g.chance(0.5);
  Value m = v;
  m.axes = without(v.axes, {axis});
  m.masked = false;
  const int mx = g.emit(m, {x}, stop ? fmt::format("stop_gradient(max($0, {}))", axis) : fmt::format("max($0, {})", axis), "softmax");
  Value e = v;
  e.masked = false;
  e.bound = 1;
  e.lo = v.masked ? 0 : std::exp(-2 * v.bound);
  const int ex = g.emit(e, {x, mx}, "exp($0 - $1)", "softmax");
  Value z = m;
  z.bound = double(g.elements({axis}));
  z.lo = 1;  // the maximum's own term is exp(0)
  const int zx = g.emit(z, {ex}, fmt::format("sum($0, {})", axis), "softmax");
  if (!v.masked && g.chance(0.25)) {  // log-softmax: x - (m + log(z))
    Value l = m;
    l.bound = v.bound + std::log(z.bound);
    l.lo = -1;
    const int lse = g.emit(l, {mx, zx}, "$0 + log($1)", "log_softmax");
    Value r = v;
    r.bound = 2 * v.bound + std::log(z.bound);
    r.lo = -1;
    return g.emit(r, {x, lse}, "$0 - $1", "log_softmax");
  }
  Value p = e;
  p.lo = e.lo / z.bound;
  return g.emit(p, {ex, zx}, "$0 / $1", "softmax");
}

// What the issue saw break: a maximum, an absolute value or a division over
// the softmax's own axis after it.
int afterSoftmax(Generator& g, int p, const std::string& axis) {
  const Value v = g.value(p);
  Value r = v;
  switch (g.uniform(0, 2)) {
    case 0: {
      r.axes = without(v.axes, {axis});
      return g.emit(r, {p}, fmt::format("max($0, {})", axis), "softmax_then");
    }
    case 1: {
      r.lo = 0;
      return g.emit(r, {p}, "abs($0 - 0.5)", "softmax_then");
    }
    default: {
      Value m = v;
      m.axes = without(v.axes, {axis});
      m.lo = std::max(v.lo, 1.0 / double(g.elements({axis})));  // the largest probability is at least 1/n
      if (v.lo < 0) return p;  // a log-softmax: not positive
      const int mx = g.emit(m, {p}, fmt::format("max($0, {})", axis), "softmax_then");
      r.bound = v.bound / m.lo;
      return g.emit(r, {p, mx}, "$0 / $1", "softmax_then");
    }
  }
}

}  // namespace

bool Generator::softmax() {
  const int x = pick([&](const Value& v) { return !v.axes.empty() && v.bound <= 1e4; });
  if (x < 0) return false;
  const std::string axis = choose(value(x).axes);
  const int p = softmaxOver(*this, x, axis);
  if (chance(0.4)) afterSoftmax(*this, p, axis);
  return true;
}

// A normalisation: a layernorm's statistics over one axis, its gain and bias
// along it; or, now and then, statistics over several axes at once, the gain
// and bias along those (a group norm's channels in a group and positions) or
// along the axes kept (a batch norm's channels, over the batch and the image).
bool Generator::layernorm() {
  const int x = pick([&](const Value& v) { return !v.axes.empty() && v.bound <= 1e3; });
  if (x < 0) return false;
  const Value v = value(x);
  std::vector<std::string> over = {choose(v.axes)};
  if (v.axes.size() >= 2 && chance(0.4)) {
    for (const std::string& a : v.axes)
      if (a != over[0] && chance(0.6)) over.push_back(a);
    if (over.size() == v.axes.size() && chance(0.7)) over.pop_back();  // mostly an axis kept
  }
  const std::vector<std::string> kept = without(v.axes, over);
  const std::vector<std::string> scaled = over.size() > 1 && !kept.empty() && chance(0.5) ? kept : over;
  const int w = addInput(v.dtype, scaled), b = addInput(v.dtype, scaled);
  std::string count;
  for (const std::string& a : over) count += (count.empty() ? "" : " * ") + fmt::format("size({})", a);
  const std::string axes = fmt::format("{}", fmt::join(over, ", "));
  Value row = v;
  row.axes = kept;
  row.lo = -1;
  const int mean = emit(row, {x}, fmt::format("sum($0, {}) / ({})", axes, count), "layernorm");
  Value centred = v;
  centred.bound = 2 * v.bound;
  centred.lo = -1;
  const int xc = emit(centred, {x, mean}, "$0 - $1", "layernorm");
  Value var = row;
  var.bound = centred.bound * centred.bound;
  var.lo = 0;
  const int vr = emit(var, {xc}, fmt::format("sum($0 * $0, {}) / ({})", axes, count), "layernorm");
  Value r = row;
  r.bound = 1 / std::sqrt(1e-5);
  r.lo = 1 / std::sqrt(var.bound + 1e-5);
  const int rs = emit(r, {vr}, "rsqrt($0 + 0.00001)", "layernorm");
  Value y = v;
  y.bound = std::sqrt(double(elements(over))) * 4 + 4;
  y.lo = -1;
  emit(y, {xc, rs, w, b}, "$0 * $1 * $2 + $3", "layernorm");
  return true;
}

bool Generator::rmsnorm() {
  const int x = pick([&](const Value& v) { return !v.axes.empty() && v.bound <= 1e3; });
  if (x < 0) return false;
  const Value v = value(x);
  const std::string c = choose(v.axes);
  const int w = addInput(v.dtype, {c});
  Value ms = v;
  ms.axes = without(v.axes, {c});
  ms.bound = v.bound * v.bound;
  ms.lo = 0;
  const int m = emit(ms, {x}, fmt::format("sum($0 * $0, {}) / size({})", c, c), "rmsnorm");
  Value y = v;
  y.bound = std::sqrt(double(elements({c}))) * 4;
  y.lo = -1;
  emit(y, {x, m, w}, "$0 * rsqrt($1 + 0.00001) * $2", "rmsnorm");
  return true;
}

// A mixture of experts: y = contract(x, gather(experts, route, e), c), each
// row's expert (or its top few, along a new axis) chosen by a router's
// scores x·w over c: the contraction the one-hot-gathers pass may make one
// GEMM over all the experts.
bool Generator::mixtureOfExperts() {
  const int x = pick([&](const Value& v) { return !v.axes.empty() && v.bound <= 1e3; });
  if (x < 0) return false;
  const Value v = value(x);
  const std::string c = choose(v.axes);
  const std::string e = newAxis({.rule = AxisRule::Root, .size = uniform(2, 6)});
  const std::string o = newRootAxis(std::max<int64_t>(1, options_.maxElements / std::max<int64_t>(1, elements(v.axes))));
  const int64_t count = chance(0.5) ? 0 : uniform(1, std::min<int64_t>(2, size(e)));
  std::vector<std::string> rows = without(v.axes, {c});
  std::string route = fmt::format("argmax(contract($0, $1, {}), {})", c, e);
  std::string k;
  if (count > 0) {
    k = newAxis({.rule = AxisRule::Count, .n = count});
    rows.push_back(k);
    route = fmt::format("topk(contract($0, $1, {}), {} -> {}, {})", c, e, k, count);
  }
  Value y = v;
  y.dtype = "f32";  // a contraction sums in f32
  y.axes = unionAxes(rows, {o});
  y.bound = v.bound * 4 * double(elements({c}));
  y.lo = -1;
  if (!fits(y.axes) || !fits(unionAxes(v.axes, {e})) || y.bound > 1e6) return false;
  const int router = addInput(v.dtype, {e, c});
  const int experts = addInput(v.dtype, {e, c, o});
  emit(y, {x, router, experts}, fmt::format("contract($0, gather($2, {}, {}), {})", route, e, c), "experts");
  if (count > 0) spec_.statements.back().creates = {k};
  return true;
}

// o[h t d] = softmax_kv(q·k / sqrt(d) (+ bias) (causal)) · v, with its own
// inputs; multi-query: k and v lack h.
bool Generator::attention() {
  // Head sizes and sequence lengths as attention has them (the tensor-core
  // streams' tiles) half of the time, random ones otherwise.
  const bool tiled = chance(0.5);
  const std::string h = newRootAxis(chance(0.5) ? 4 : 1);
  const std::string t = tiled ? newAxis({.rule = AxisRule::Root, .size = choose(std::vector<int64_t>{64, 100, 128, 200})})
                              : newRootAxis(65);
  const std::string d = tiled ? newAxis({.rule = AxisRule::Root, .size = choose(std::vector<int64_t>{16, 32, 64, 80})})
                              : newRootAxis(81);
  const bool causal = chance(0.5);
  const std::string kv = causal ? newAxis({.rule = AxisRule::Same, .of = {t}})
                         : tiled ? newAxis({.rule = AxisRule::Root, .size = choose(std::vector<int64_t>{64, 96, 128, 200})})
                                 : newRootAxis(65);
  const bool multiQuery = chance(0.35);
  if (!fits({h, t, kv}) || !fits({h, t, d}) || !fits({h, kv, d})) return false;
  const std::string dtype = randomFloatDtype();
  const int q = addInput(dtype, {h, t, d});
  const int k = addInput(dtype, multiQuery ? std::vector<std::string>{kv, d} : std::vector<std::string>{h, kv, d});
  const int v = addInput(chance(0.5) ? dtype : "f32", multiQuery ? std::vector<std::string>{kv, d} : std::vector<std::string>{h, kv, d});
  Value s{.dtype = "f32", .axes = {h, t, kv}};
  s.bound = 16 * std::sqrt(double(elements({d})));
  int scores = emit(s, {q, k}, fmt::format("contract($0, $1, {}) * rsqrt(size({}))", d, d), "attention");
  if (chance(0.4)) {
    const int bias = addInput("f32", chance(0.5) ? std::vector<std::string>{t, kv} : std::vector<std::string>{h, t, kv});
    s.bound += 4;
    scores = emit(s, {scores, bias}, "$0 + $1", "attention");
  }
  if (causal) {
    Value masked = s;
    masked.masked = true;
    scores = emit(masked, {scores}, fmt::format("where(pos({}) <= pos({}), $0, -inf)", kv, t), "attention");
  }
  int p = softmaxOver(*this, scores, kv);
  if (chance(0.3)) p = afterSoftmax(*this, p, kv);
  Value o = value(p);
  o.axes = {h, t, d};
  o.bound = value(p).bound * 4 * double(elements({kv}));
  o.lo = -1;
  o.masked = false;
  if (value(p).axes.size() != 3) return true;  // a maximum took kv away: no product with v
  emit(o, {p, v}, fmt::format("contract($0, {}, {})", operand(v, "f32", 1), kv), "attention");
  return true;
}

}  // namespace llmc::fuzz
