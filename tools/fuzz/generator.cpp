// The generator's core: axes, inputs, and one random primitive operation at a
// time, each typed as docs/language.md section 6 types it, with bounds on the
// values kept so that the oracle stays defined: exp only of bounded values,
// log, rsqrt, sqrt and division only of positive ones.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "generator_state.h"

namespace llmc::fuzz {

namespace {

// Keywords, built-ins and the names the printer uses: never an axis name.
const std::set<std::string> kReserved = {
    "abs", "bf16", "bool", "broadcast", "concat", "contract", "exp", "f16", "f32", "f64", "gather", "i32", "log",
    "max", "maximum", "merge", "minimum", "pos", "rename", "rsqrt", "scatter_add", "size", "slice", "split", "sqrt",
    "pad", "stack", "stop_gradient", "sum", "tanh", "u16", "where", "diagram", "end", "for", "in", "import", "param", "inf", "pi",
    "argmax", "argmin", "topk", "scan", "inclusive", "exclusive",
    "and", "or", "not", "require",
    "y", "wy", "loss", "fuzz"};

// Values larger than this are not made: the losses stay far from overflow in
// f32 and bf16, and finite differences keep their precision.
constexpr double kMaxBound = 1e6;
// The most elements a running sum's mask over positions may take (runningScan):
// 2 GB of f64 in the interpreter.
constexpr int64_t kQuadraticScanElements = int64_t{1} << 28;

Value derived(const Value& x) {
  Value v = x;
  v.name.clear();
  v.input = v.param = false;
  v.indexAxis.clear();
  return v;
}

}  // namespace

bool contains(const std::vector<std::string>& a, const std::string& x) { return std::find(a.begin(), a.end(), x) != a.end(); }

std::vector<std::string> unionAxes(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out = a.size() >= b.size() ? a : b;
  for (const std::string& x : a.size() >= b.size() ? b : a)
    if (!contains(out, x)) out.push_back(x);
  return out;
}

std::vector<std::string> without(const std::vector<std::string>& a, const std::vector<std::string>& drop) {
  std::vector<std::string> out;
  for (const std::string& x : a)
    if (!contains(drop, x)) out.push_back(x);
  return out;
}

Generator::Generator(uint64_t seed, const GeneratorOptions& options) : options_(options), rng_(seed) { spec_.seed = seed; }

int64_t Generator::uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
bool Generator::chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

// Mostly letters; now and then ending in digits or _N, or another axis's
// name with _N after it ("a" and "a_3"): the names generated code derives
// from axes (i_AXIS, i8_AXIS) must stay apart whatever users call them.
std::string Generator::freshAxisName() {
  for (;;) {
    std::string name;
    if (!usedNames_.empty() && chance(0.1)) {
      auto it = usedNames_.begin();
      std::advance(it, uniform(0, static_cast<int64_t>(usedNames_.size()) - 1));
      name = *it + "_" + std::to_string(uniform(0, 12));
    } else {
      const int64_t length = uniform(1, 3);
      for (int64_t i = 0; i < length; ++i) name += static_cast<char>('a' + uniform(0, 25));
      if (chance(0.1)) name += std::to_string(uniform(0, 9));
      else if (chance(0.05)) name += "_" + std::to_string(uniform(0, 12));
    }
    if (!kReserved.count(name) && !usedNames_.count(name)) {
      usedNames_.insert(name);
      return name;
    }
  }
}

// Mostly small (the interpreter runs every diagram many times for finite
// differences), sometimes up to maxSize; odd more often than not, as tile
// sizes never are; one in five a multiple of 8 or 16, as the tensor cores'
// tiles want (other sizes keep matmuls on CUDA cores).
int64_t Generator::randomSize(int64_t limit) {
  limit = std::max<int64_t>(1, std::min(limit, options_.maxSize));
  const int64_t r = uniform(0, 99);
  if (r >= 80 && limit >= 16) {
    const int64_t unit = chance(0.5) ? 8 : 16;
    return unit * uniform(1, std::min<int64_t>(limit, 1024) / unit);
  }
  int64_t s = r < 35 ? uniform(1, 8) : r < 68 ? uniform(9, 64) : uniform(65, std::max<int64_t>(65, options_.maxSize));
  s = std::min(s, limit);
  if (s % 2 == 0 && chance(0.7)) s = s + 1 <= limit ? s + 1 : s - 1;
  return std::max<int64_t>(1, s);
}

std::string Generator::newAxis(AxisDef def) {
  def.name = freshAxisName();
  spec_.axes.push_back(def);
  return def.name;
}

std::string Generator::newRootAxis(int64_t limit) { return newAxis({.rule = AxisRule::Root, .size = randomSize(limit)}); }

std::string Generator::randomFloatDtype() { return options_.lowPrecision && chance(0.25) ? "bf16" : "f32"; }

int Generator::addInput(const std::string& dtype, std::vector<std::string> axes, double lo) {
  Value v{.name = fmt::format("in{}", nextValue_++), .dtype = dtype, .axes = std::move(axes), .input = true};
  v.param = chance(0.6);
  // Inputs are N(0, 1) (|x| <= 4 but for a few in 10^4), or uniform in [0.5, 2] where positive.
  v.lo = lo > 0 ? 0.5 : -1;
  v.bound = lo > 0 ? 2 : 4;
  spec_.values.push_back(v);
  return static_cast<int>(spec_.values.size()) - 1;
}

int Generator::addIndexInput(std::vector<std::string> axes, const std::string& indexAxis) {
  Value v{.name = fmt::format("ix{}", nextValue_++), .dtype = "i32", .axes = std::move(axes), .input = true};
  v.indexAxis = indexAxis;
  spec_.values.push_back(v);
  return static_cast<int>(spec_.values.size()) - 1;
}

int Generator::emit(Value v, std::vector<int> args, std::string text, std::string what) {
  v.name = fmt::format("v{}", nextValue_++);
  v.input = v.param = false;
  if (v.lo >= 0 && v.lo < 1e-30) v.lo = 0;
  spec_.values.push_back(v);
  const int id = static_cast<int>(spec_.values.size()) - 1;
  spec_.statements.push_back({id, std::move(args), std::move(text), std::move(what)});
  return id;
}

int Generator::pick(const std::function<bool(const Value&)>& accept) {
  std::vector<int> candidates;
  for (size_t i = 0; i < spec_.values.size(); ++i) {
    const Value& v = spec_.values[i];
    if (v.dtype != "i32" && !v.masked && (!accept || accept(v))) candidates.push_back(static_cast<int>(i));
  }
  if (candidates.empty()) return -1;
  // Recent values more often: chains, not a flat fan of unrelated operations.
  if (candidates.size() > 3 && chance(0.6)) candidates.erase(candidates.begin(), candidates.end() - 3);
  return choose(candidates);
}

std::string Generator::operand(int id, const std::string& dtype, int i) const {
  return value(id).dtype == dtype ? fmt::format("${}", i) : fmt::format("{}(${})", dtype, i);
}

bool Generator::unary() {
  const int x = pick();
  if (x < 0) return false;
  const Value& v = value(x);
  std::vector<std::string> fns = {"tanh", "abs", "neg"};
  if (v.bound <= 5) fns.push_back("exp");
  if (v.lo > 0) fns.insert(fns.end(), {"log", "rsqrt", "sqrt"});
  const std::string fn = choose(fns);
  Value r = derived(v);
  if (fn == "exp") r.bound = std::exp(v.bound), r.lo = std::exp(-v.bound);
  else if (fn == "log") r.bound = std::max(std::abs(std::log(v.lo)), std::abs(std::log(v.bound))), r.lo = v.lo >= 1 ? std::log(v.lo) : -1;
  else if (fn == "rsqrt") r.bound = 1 / std::sqrt(v.lo), r.lo = 1 / std::sqrt(v.bound);
  else if (fn == "sqrt") r.bound = std::sqrt(v.bound), r.lo = std::sqrt(v.lo);
  else if (fn == "tanh") r.bound = std::min(1.0, v.bound), r.lo = v.lo >= 0 ? 0 : -1;
  else if (fn == "abs") r.lo = 0;
  else r.lo = -1;
  emit(r, {x}, fn == "neg" ? "-$0" : fn + "($0)", fn);
  return true;
}

bool Generator::binary() {
  const int a = pick();
  if (a < 0) return false;
  const std::string op = choose(std::vector<std::string>{"+", "-", "*"});
  const Value& va = value(a);
  const int b = chance(0.25) ? -1 : pick([&](const Value& v) { return fits(unionAxes(va.axes, v.axes)); });
  Value r = derived(va);
  if (b < 0) {  // a number
    const double number = choose(std::vector<double>{0.5, 1.5, 2, 3, 0.25});
    r.bound = op == "*" ? va.bound * number : va.bound + number;
    r.lo = op == "*" ? (va.lo >= 0 ? va.lo * number : -1) : op == "+" && va.lo >= 0 ? va.lo + number : -1;
    emit(r, {a}, fmt::format("$0 {} {}", op, number), "binary");
    return true;
  }
  const Value& vb = value(b);
  r.axes = unionAxes(va.axes, vb.axes);
  r.bound = op == "*" ? va.bound * vb.bound : va.bound + vb.bound;
  if (r.bound > kMaxBound) return false;
  r.lo = op == "*" && va.lo >= 0 && vb.lo >= 0 ? va.lo * vb.lo : op == "+" && va.lo >= 0 && vb.lo >= 0 ? va.lo + vb.lo : -1;
  emit(r, {a, b}, fmt::format("$0 {} {}", op, operand(b, va.dtype, 1)), "binary");
  return true;
}

bool Generator::divide() {
  const int a = pick();
  if (a < 0) return false;
  const Value& va = value(a);
  int b = pick([&](const Value& v) { return v.lo >= 0.01 && fits(unionAxes(va.axes, v.axes)); });
  if (b < 0 || chance(0.3)) {  // a positive input over some of a's axes
    std::vector<std::string> axes;
    for (const std::string& x : va.axes)
      if (chance(0.5)) axes.push_back(x);
    b = addInput(value(a).dtype, axes, 0.5);
  }
  const Value& vb = value(b);
  const Value& va2 = value(a);
  Value r = derived(va2);
  r.axes = unionAxes(va2.axes, vb.axes);
  r.bound = va2.bound / vb.lo;
  if (r.bound > kMaxBound) return false;
  r.lo = va2.lo >= 0 ? va2.lo / vb.bound : -1;
  emit(r, {a, b}, fmt::format("$0 / {}", operand(b, va2.dtype, 1)), "divide");
  return true;
}

bool Generator::extremum() {
  const int a = pick();
  if (a < 0) return false;
  const Value& va = value(a);
  const std::string fn = chance(0.5) ? "maximum" : "minimum";
  const int b = chance(0.3) ? -1 : pick([&](const Value& v) { return fits(unionAxes(va.axes, v.axes)); });
  Value r = derived(va);
  if (b < 0) {  // ReLU and its mirror
    r.lo = fn == "maximum" ? std::max(va.lo, 0.0) : -1;
    emit(r, {a}, fn + "($0, 0)", fn);
    return true;
  }
  const Value& vb = value(b);
  r.axes = unionAxes(va.axes, vb.axes);
  r.bound = std::max(va.bound, vb.bound);
  r.lo = fn == "maximum" ? std::max(va.lo, vb.lo) : va.lo >= 0 && vb.lo >= 0 ? std::min(va.lo, vb.lo) : -1;
  emit(r, {a, b}, fmt::format("{}($0, {})", fn, operand(b, va.dtype, 1)), fn);
  return true;
}

bool Generator::reduce() {
  const int x = pick([](const Value& v) { return !v.axes.empty(); });
  if (x < 0) return false;
  const Value& v = value(x);
  std::vector<std::string> axes = {choose(v.axes)};
  if (v.axes.size() > 1 && chance(0.3)) {
    const std::string other = choose(v.axes);
    if (other != axes[0]) axes.push_back(other);
  }
  if (chance(0.15) && v.dtype != "i32" && !v.masked) return runningScan(x, axes[0]);
  const bool isSum = chance(0.6);
  Value r = derived(v);
  r.axes = without(v.axes, axes);
  if (isSum) {
    r.bound = v.bound * double(elements(axes));
    r.lo = v.lo >= 0 ? v.lo * double(elements(axes)) : -1;
    if (r.bound > kMaxBound) return false;
  }
  emit(r, {x}, fmt::format("{}($0, {})", isSum ? "sum" : "max", fmt::join(axes, ", ")), isSum ? "sum" : "max");
  return true;
}

// A scan of value x along one of its axes: a running sum or maximum, a
// running product, or a linear recurrence h = c h + x with |c| <= 1; now
// and then in the IR's printed form (s -> s, reverse, lagged), which makes a
// scan node at once. Products are of factors near 1 (their bound
// e^(1/2) at any length) or of tanh's, which may hold zeros.
bool Generator::runningScan(int x, const std::string& axis) {
  const Value& v = value(x);
  const double n = double(elements({axis}));
  const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
  const std::string op = u < 0.3 ? "sum" : u < 0.45 ? "max" : u < 0.6 ? "prod" : u < 0.8 ? "linear" : "user";
  if (op == "user") return userOperatorScan(x, axis);
  const bool exclusive = op != "max" && chance(0.4);  // (an exclusive maximum starts at -inf)
  // Written as the language writes a running sum, a scan is a sum over a
  // mask of the positions before each (the masked-sums pass makes it a scan
  // node): quadratic in the axis, which the interpreter holds whole. Past
  // kQuadraticScanElements the printed form, a scan node at once.
  const bool quadratic = double(elements(v.axes)) * n > double(kQuadraticScanElements);
  if (quadratic && op == "prod") return false;
  const bool printed = op != "prod" && (chance(0.3) || quadratic);
  const bool lagged = printed && op == "linear" && !exclusive && chance(0.5);
  std::string form = printed ? fmt::format("{0} -> {0}", axis) : axis;
  if (exclusive) form += ", exclusive";
  if (printed && chance(0.6)) form += ", reverse";
  if (lagged) form += ", lagged";
  Value r = derived(v);
  if (op == "sum") {
    r.bound = v.bound * n;
    r.lo = v.lo >= 0 ? (exclusive ? 0 : v.lo) : -1;
  } else if (op == "prod") {
    const bool nearOne = chance(0.5);
    r.bound = nearOne ? 1.7 : 1;
    r.lo = nearOne ? 0.3 : -1;
    const std::string factor = nearOne ? fmt::format("1 + {} * tanh($0)", 0.5 / n) : "tanh($0)";
    emit(r, {x}, fmt::format("scan(prod, {}, {})", factor, form), "scan");
    return true;
  } else if (op == "linear") {
    r.bound = v.bound * n;
    r.lo = v.lo >= 0 ? 0 : -1;
    const int c = chance(0.3) ? -1 : pick([&](const Value& w) { return fits(unionAxes(v.axes, w.axes)); });
    if (r.bound > kMaxBound) return false;
    if (c < 0) {
      emit(r, {x}, fmt::format("scan(linear, 0.9, $0, {})", form), "scan");
      return true;
    }
    r.axes = unionAxes(v.axes, value(c).axes);
    emit(r, {x, c}, fmt::format("scan(linear, 0.5 * tanh({}) + 0.5, $0, {})", operand(c, v.dtype, 1), form), "scan");
    return true;
  }
  if (r.bound > kMaxBound) return false;
  emit(r, {x}, fmt::format("scan({}, $0, {})", op, form), "scan");
  return true;
}

// A scan over an operator the diagram writes (a diagram of two numbers),
// of a family associative by construction: g^-1(g(a) + g(b)) for a
// logsumexp (g = exp), a + b + k a b = ((1 + k a)(1 + k b) - 1) / k with
// k small for the axis (the running value stays within e^(1/2) of a sum's
// bound), and "the later where it passes a threshold, else the earlier",
// which does not commute. Smooth where the oracle differentiates (no
// square roots at 0); inclusive or exclusive with a value, now and then
// reversed in the printed form.
bool Generator::userOperatorScan(int x, const std::string& axis) {
  const Value& v = value(x);
  const double n = double(elements({axis}));
  const std::string name = fmt::format("op{}", nextValue_);
  const int family = std::uniform_int_distribution<int>(0, 2)(rng_);
  std::string body;
  Value r = derived(v);
  r.dtype = "f32";
  r.lo = -1;
  if (family == 0) {
    body = "  m = maximum(a, b)\n  c = m + log(exp(a - m) + exp(b - m))\n";
    r.bound = v.bound + std::log(n);
  } else if (family == 1) {
    const double k = 0.5 / (n * std::max(1.0, v.bound));
    body = fmt::format("  c = a + b + {} * a * b\n", k);
    r.bound = v.bound * n * 1.7;
  } else {
    body = fmt::format("  c = where(b > {}, b, a)\n", chance(0.5) ? 0.25 : -0.5);
    r.bound = v.bound;
  }
  if (r.bound > kMaxBound) return false;
  std::string form = chance(0.3) ? fmt::format("{0} -> {0}, reverse", axis) : axis;
  if (chance(0.4)) {
    const double first = family == 0 ? -1.5 : 0;  // any number: the value before the first position
    form += fmt::format(", exclusive, {}", first);
    r.bound = std::max(r.bound, 1.5);
  }
  emit(r, {x}, fmt::format("scan({}, {}, {})", name, operand(x, "f32", 0), form), "scan");
  spec_.statements.back().helper = fmt::format("diagram {}(a: f32[], b: f32[]) -> c: f32[]\n{}end\n", name, body);
  return true;
}

bool Generator::contraction() {
  const int a = pick([](const Value& v) { return !v.axes.empty(); });
  if (a < 0) return false;
  const std::vector<std::string> aAxes = value(a).axes;
  auto sharesAxis = [&](const Value& v) { return without(v.axes, aAxes).size() < v.axes.size(); };
  int b = chance(0.5) ? -1 : pick(sharesAxis);
  auto shared = [&](int id) {
    std::vector<std::string> s;
    for (const std::string& x : value(id).axes)
      if (contains(aAxes, x)) s.push_back(x);
    return s;
  };
  if (b >= 0 && shared(b).empty()) b = -1;
  if (b < 0) {  // a weight: some of a's axes (those left out are axes it lacks), maybe one of its own
    std::vector<std::string> axes = {choose(aAxes)};
    for (const std::string& x : aAxes)
      if (x != axes[0] && chance(0.4)) axes.push_back(x);
    if (chance(0.7)) axes.push_back(newRootAxis(std::max<int64_t>(1, options_.maxElements / elements(axes))));
    std::shuffle(axes.begin(), axes.end(), rng_);
    b = addInput(value(a).dtype, axes);
  }
  std::vector<std::string> common = shared(b), summed;
  for (const std::string& x : common)
    if (chance(0.5)) summed.push_back(x);
  if (summed.empty()) summed.push_back(choose(common));
  const Value& va = value(a);
  const Value& vb = value(b);
  Value r = derived(va);
  r.dtype = "f32";
  r.axes = without(unionAxes(va.axes, vb.axes), summed);
  r.bound = va.bound * vb.bound * double(elements(summed));
  r.lo = va.lo >= 0 && vb.lo >= 0 ? va.lo * vb.lo * double(elements(summed)) : -1;
  if (!fits(r.axes) || r.bound > kMaxBound) return false;
  emit(r, {a, b}, fmt::format("contract($0, {}, {})", operand(b, va.dtype, 1), fmt::join(summed, ", ")), "contract");
  return true;
}

bool Generator::gatherOp() {
  const int t = pick([](const Value& v) { return !v.axes.empty(); });
  if (t < 0) return false;
  const Value table = value(t);
  const std::string along = choose(table.axes);
  if (chance(0.3) && routedGather(t, along)) return true;
  std::vector<std::string> indexAxes;  // batched over some of the table's other axes
  for (const std::string& x : table.axes)
    if (x != along && chance(0.4)) indexAxes.push_back(x);
  if (indexAxes.empty() || chance(0.5)) indexAxes.push_back(newRootAxis(33));
  const std::vector<std::string> result = unionAxes(indexAxes, without(table.axes, {along}));
  if (!fits(result)) return false;
  const int index = addIndexInput(indexAxes, along);
  Value r = derived(table);
  r.axes = indexAxes;
  for (const std::string& x : without(table.axes, indexAxes))
    if (x != along) r.axes.push_back(x);
  emit(r, {t, index}, fmt::format("gather($0, $1, {})", along), "gather");
  return true;
}

// gather(table, argmax(s, a), a), argmin's, or topk's of s along a new axis
// (1 to 3 positions): the index of the largest entries of a value s with the
// gathered axis a (the table itself at times: its maximum), as a router
// chooses experts. The choice carries no gradient; the gather does.
bool Generator::routedGather(int t, const std::string& along) {
  int s = chance(0.3) ? t : pick([&](const Value& v) { return contains(v.axes, along); });
  if (s < 0) s = t;
  const Value table = value(t);
  std::vector<std::string> indexAxes = without(value(s).axes, {along});
  const int64_t count = chance(0.6) ? 0 : uniform(1, std::min<int64_t>(3, size(along)));
  std::string index = fmt::format("{}($1, {})", chance(0.8) ? "argmax" : "argmin", along);
  std::string k;
  if (count > 0) {
    k = newAxis({.rule = AxisRule::Count, .n = count});
    indexAxes.push_back(k);
    index = fmt::format("topk($1, {} -> {}, {})", along, k, count);
  }
  Value r = derived(table);
  r.axes = indexAxes;
  for (const std::string& x : without(table.axes, indexAxes))
    if (x != along) r.axes.push_back(x);
  if (!fits(r.axes)) return false;
  emit(r, {t, s}, fmt::format("gather($0, {}, {})", index, along), count > 0 ? "topk" : "argmax");
  if (count > 0) spec_.statements.back().creates = {k};
  return true;
}

bool Generator::scatterOp() {
  const int x = pick([](const Value& v) { return !v.axes.empty(); });
  if (x < 0) return false;
  const Value values = value(x);
  std::vector<std::string> others;
  for (const AxisDef& a : spec_.axes)
    if (!contains(values.axes, a.name)) others.push_back(a.name);
  const std::string along = !others.empty() && chance(0.5) ? choose(others) : newRootAxis(33);
  std::vector<std::string> indexAxes, summed;
  for (const std::string& a : values.axes)
    if (chance(0.6)) indexAxes.push_back(a);
  if (indexAxes.empty()) indexAxes.push_back(choose(values.axes));
  for (const std::string& a : indexAxes)
    if (chance(0.5)) summed.push_back(a);
  Value r = derived(values);
  r.axes = {along};
  for (const std::string& a : without(values.axes, summed)) r.axes.push_back(a);
  r.bound = values.bound * double(elements(summed));
  r.lo = values.lo >= 0 ? 0 : -1;
  if (!fits(r.axes) || r.bound > kMaxBound) return false;
  const int index = addIndexInput(indexAxes, along);
  std::string text = fmt::format("scatter_add($0, $1, {}", along);
  for (const std::string& s : summed) text += ", " + s;
  emit(r, {x, index}, text + ")", "scatter_add");
  spec_.statements.back().needs = {along};
  return true;
}

bool Generator::whereOp() {
  const int x = pick();
  if (x < 0) return false;
  const Value vx = value(x);
  std::vector<int> args = {x};
  std::string cond;
  std::vector<std::string> axes = vx.axes;
  int64_t kind = uniform(0, 2);
  if (kind == 0 && vx.axes.size() >= 2) {
    std::vector<std::string> two = vx.axes;
    std::shuffle(two.begin(), two.end(), rng_);
    cond = fmt::format("pos({}) <= pos({})", two[0], two[1]);
  } else if (kind <= 1 && !vx.axes.empty()) {
    const std::string a = choose(vx.axes);
    cond = fmt::format("pos({}) < {}", a, uniform(1, size(a)));
  } else {
    kind = 2;
    const int c = pick([&](const Value& v) { return fits(unionAxes(vx.axes, v.axes)); });
    if (c < 0) return false;
    cond = fmt::format("$1 > {}", chance(0.5) ? "0" : "0.5");
    args.push_back(c);
    axes = unionAxes(axes, value(c).axes);
  }
  if (kind < 2 && chance(0.3)) {  // a mask of two conditions (a window: inside one bound and another)
    const std::string a = choose(vx.axes);
    const std::string second = fmt::format("pos({}) >= {}", a, uniform(0, size(a) - 1));
    cond = fmt::format("{} {} {}{}", cond, chance(0.5) ? "and" : "or", chance(0.3) ? "not " : "", second);
  }
  Value r = derived(vx);
  std::string other;
  const int y = chance(0.5) ? -1 : pick([&](const Value& v) { return fits(unionAxes(axes, v.axes)); });
  if (y < 0) {
    const double number = choose(std::vector<double>{0, -1, 2.5});
    other = fmt::format("{}", number);
    r.lo = vx.lo >= 0 && number >= 0 ? 0 : -1;
  } else {
    other = operand(y, vx.dtype, int(args.size()));
    args.push_back(y);
    axes = unionAxes(axes, value(y).axes);
    r.bound = std::max(vx.bound, value(y).bound);
    r.lo = vx.lo >= 0 && value(y).lo >= 0 ? std::min(vx.lo, value(y).lo) : -1;
  }
  r.axes = axes;
  emit(r, args, fmt::format("where({}, $0, {})", cond, other), "where");
  return true;
}

bool Generator::axisOp() {
  const int x = pick([](const Value& v) { return !v.axes.empty(); });
  if (x < 0) return false;
  const Value v = value(x);
  Value r = derived(v);
  const std::string a = choose(v.axes);
  const int64_t kind = uniform(0, 3);
  auto replace = [&](const std::string& old, std::vector<std::string> with) {
    auto it = std::find(r.axes.begin(), r.axes.end(), old);
    it = r.axes.erase(it);
    r.axes.insert(it, with.begin(), with.end());
  };
  if (kind == 0) {  // split by a proper divisor
    std::vector<int64_t> divisors;
    for (int64_t f = 2; f < size(a); ++f)
      if (size(a) % f == 0) divisors.push_back(f);
    if (divisors.empty()) return false;
    const std::string g = newAxis({.rule = AxisRule::Root, .size = choose(divisors)});
    const std::string e = newAxis({.rule = AxisRule::Quotient, .of = {a, g}});
    replace(a, {g, e});
    emit(r, {x}, fmt::format("split($0, {} -> {}:#{}# {})", a, g, g, e), "split");
    spec_.statements.back().creates = {g, e};
  } else if (kind == 1 && v.axes.size() >= 2) {
    std::vector<std::string> two = v.axes;
    std::shuffle(two.begin(), two.end(), rng_);
    two.resize(2);
    const std::string m = newAxis({.rule = AxisRule::Product, .of = two});
    auto first = std::find_first_of(r.axes.begin(), r.axes.end(), two.begin(), two.end());
    *first = m;
    std::erase(r.axes, two[0]);
    std::erase(r.axes, two[1]);
    emit(r, {x}, fmt::format("merge($0, {} {} -> {})", two[0], two[1], m), "merge");
    spec_.statements.back().creates = {m};
  } else if (kind == 2 && size(a) >= 2) {
    const int64_t lo = uniform(0, size(a) - 1);
    const std::string b = newAxis({.rule = AxisRule::Root, .size = uniform(1, size(a) - lo), .sliceOf = a, .lo = lo});
    replace(a, {b});
    emit(r, {x}, fmt::format("slice($0, {} -> {}, {}, {} + #{}#)", a, b, lo, lo, b), "slice");
    spec_.statements.back().creates = {b};
  } else {
    const std::string b = newAxis({.rule = AxisRule::Same, .of = {a}});
    replace(a, {b});
    emit(r, {x}, fmt::format("rename($0, {} -> {})", a, b), "rename");
    spec_.statements.back().creates = {b};
  }
  return true;
}

bool Generator::broadcastOp() {
  const int x = pick();
  if (x < 0) return false;
  const Value v = value(x);
  std::vector<std::string> others;
  for (const AxisDef& a : spec_.axes)
    if (!contains(v.axes, a.name) && fits(unionAxes(v.axes, {a.name}))) others.push_back(a.name);
  if (others.empty()) return false;
  const std::string a = choose(others);
  Value r = derived(v);
  r.axes.push_back(a);
  emit(r, {x}, fmt::format("broadcast($0, {})", a), "broadcast");
  spec_.statements.back().needs = {a};
  return true;
}

bool Generator::concatOp() {
  const int x = pick([](const Value& v) { return !v.axes.empty(); });
  if (x < 0) return false;
  const Value v = value(x);
  const std::string a = choose(v.axes);
  const int64_t parts = chance(0.8) ? 2 : 3;
  if (elements(v.axes) * parts > options_.maxElements) return false;
  int other = pick([&](const Value& o) {
    return o.axes.size() == v.axes.size() && without(o.axes, v.axes).empty();
  });
  if (other < 0) other = x;
  // Joined along a, or side by side along a new axis (stack).
  const bool stack = chance(0.3);
  const std::string e = stack ? newAxis({.rule = AxisRule::Count, .n = parts})
                              : newAxis({.rule = AxisRule::Multiple, .of = {a}, .n = parts});
  Value r = derived(v);
  if (stack) r.axes.push_back(e);
  else std::replace(r.axes.begin(), r.axes.end(), a, e);
  r.bound = std::max(v.bound, value(other).bound);
  r.lo = v.lo >= 0 && value(other).lo >= 0 ? std::min(v.lo, value(other).lo) : -1;
  const std::string second = operand(other, v.dtype, 1);
  const std::string third = parts == 3 ? ", $0" : "";
  if (stack) emit(r, {x, other}, fmt::format("stack($0, {}{}, {})", second, third, e), "stack");
  else emit(r, {x, other}, fmt::format("concat($0, {}{}, {} -> {})", second, third, a, e), "concat");
  spec_.statements.back().creates = {e};
  return true;
}

bool Generator::castOp() {
  if (!options_.lowPrecision) return false;
  const int x = pick();
  if (x < 0) return false;
  Value r = derived(value(x));
  r.dtype = r.dtype == "f32" ? "bf16" : "f32";
  emit(r, {x}, r.dtype + "($0)", "cast");
  return true;
}

bool Generator::stopGradient() {
  const int x = pick();
  if (x < 0) return false;
  emit(derived(value(x)), {x}, "stop_gradient($0)", "stop_gradient");
  return true;
}

void Generator::finish() {
  std::set<int> read;
  for (const Statement& s : spec_.statements) read.insert(s.args.begin(), s.args.end());
  int out = -1;
  for (const Statement& s : spec_.statements)
    if (!value(s.result).masked) out = s.result;
  if (out < 0) out = pick();
  const size_t count = spec_.statements.size();  // emit appends
  for (size_t i = 0; i < count; ++i) {
    const int u = spec_.statements[i].result;
    if (u == out || read.count(u) || value(u).masked) continue;
    const Value& vo = value(out);
    const Value& vu = value(u);
    const std::vector<std::string> extra = without(vu.axes, vo.axes);
    Value r = derived(vo);
    std::string text = operand(u, vo.dtype, 1);
    double bound = vu.bound;
    if (!extra.empty()) {
      text = fmt::format("sum({}, {})", text, fmt::join(extra, ", "));
      bound *= double(elements(extra));
    }
    if (bound > kMaxBound) continue;
    r.bound = vo.bound + bound;
    r.lo = -1;
    out = emit(r, {out, u}, "$0 + " + text, "fold");
  }
  spec_.output = out;
}

DiagramSpec Generator::run() {
  std::vector<std::string> roots;
  const int64_t rootCount = uniform(2, 4);
  for (int64_t i = 0; i < rootCount; ++i) roots.push_back(newRootAxis(options_.maxSize));
  const int64_t inputCount = uniform(1, 3);
  for (int64_t i = 0; i < inputCount; ++i) {
    std::vector<std::string> axes;
    for (const std::string& a : roots)
      if (chance(0.6) && fits(unionAxes(axes, {a}))) axes.push_back(a);
    addInput(randomFloatDtype(), axes, chance(0.2) ? 0.5 : -1);
  }
  using Op = bool (Generator::*)();
  // Weights: how often each is drawn.
  const std::vector<std::pair<Op, int>> ops = {
      {&Generator::unary, 10},      {&Generator::binary, 10},     {&Generator::divide, 4},
      {&Generator::extremum, 4},    {&Generator::reduce, 8},      {&Generator::contraction, 8},
      {&Generator::gatherOp, 3},    {&Generator::scatterOp, 3},   {&Generator::whereOp, 4},
      {&Generator::axisOp, 6},      {&Generator::broadcastOp, 3}, {&Generator::concatOp, 2},
      {&Generator::castOp, 2},      {&Generator::stopGradient, 2}, {&Generator::softmax, 4},
      {&Generator::layernorm, 2},   {&Generator::rmsnorm, 2},     {&Generator::attention, 3},
      {&Generator::mixtureOfExperts, 2},
  };
  int total = 0;
  for (const auto& [op, w] : ops) total += w;
  const int64_t steps = uniform(1, std::max(1, options_.maxSteps));
  for (int64_t step = 0; step < steps; ++step) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      int64_t r = uniform(0, total - 1);
      size_t k = 0;
      while (r >= ops[k].second) r -= ops[k++].second;
      if ((this->*ops[k].first)()) break;
    }
  }
  // Inputs the loss is differentiated against: at least one float input.
  bool anyParam = false;
  for (const Value& v : spec_.values) anyParam |= v.param;
  if (!anyParam)
    for (Value& v : spec_.values)
      if (v.input && v.dtype != "i32") {
        v.param = true;
        break;
      }
  finish();
  spec_.prune();
  return spec_;
}

DiagramSpec generateDiagram(uint64_t seed, const GeneratorOptions& options) { return Generator(seed, options).run(); }

}  // namespace llmc::fuzz
