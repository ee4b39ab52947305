// The generator's working state, shared by its primitive operations
// (generator.cpp) and its hand-written composites (composites.cpp).
#pragma once

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "diagram_spec.h"
#include "generator.h"

namespace llmc::fuzz {

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& options);
  DiagramSpec run();

  // --- randomness
  int64_t uniform(int64_t lo, int64_t hi);  // [lo, hi]
  bool chance(double p);
  template <class T>
  const T& choose(const std::vector<T>& items) { return items.at(static_cast<size_t>(uniform(0, int64_t(items.size()) - 1))); }

  // --- axes
  std::string freshAxisName();
  int64_t randomSize(int64_t limit);  // odd most of the time, 1 .. limit
  std::string newRootAxis(int64_t limit);
  std::string newAxis(AxisDef def);   // def.name is filled in
  int64_t size(const std::string& axis) const { return spec_.sizeOf(axis).value_or(1); }
  int64_t elements(const std::vector<std::string>& axes) const { return spec_.elements(axes); }
  bool fits(const std::vector<std::string>& axes) const { return elements(axes) <= options_.maxElements; }

  // --- values
  std::string randomFloatDtype();
  int addInput(const std::string& dtype, std::vector<std::string> axes, double lo = -1);
  int addIndexInput(std::vector<std::string> axes, const std::string& indexAxis);
  // Appends `name = text` computing a new value `v`; returns its id.
  int emit(Value v, std::vector<int> args, std::string text, std::string what);
  // A random float value that `accept` takes (recent ones more often); -1 if none.
  int pick(const std::function<bool(const Value&)>& accept = {});
  const Value& value(int id) const { return spec_.values.at(static_cast<size_t>(id)); }
  // An operand of `dtype`: the value, or a cast of it, as text for argument i.
  std::string operand(int id, const std::string& dtype, int i) const;

  // --- primitive operations (generator.cpp); false when they do not apply
  bool unary();
  bool binary();
  bool divide();
  bool extremum();
  bool reduce();
  bool runningScan(int x, const std::string& axis);  // scan(sum|max|prod|linear, ..) along axis
  bool userOperatorScan(int x, const std::string& axis);  // scan(f, ..) over an operator the diagram writes
  bool contraction();
  bool gatherOp();
  bool routedGather(int table, const std::string& along);
  bool scatterOp();
  bool whereOp();
  bool axisOp();
  bool broadcastOp();
  bool concatOp();
  bool castOp();
  bool stopGradient();

  // --- composites written out (composites.cpp)
  bool softmax();
  bool layernorm();
  bool rmsnorm();
  bool attention();
  bool mixtureOfExperts();

  // Folds every value nothing reads into the output, so that the whole
  // diagram is live.
  void finish();

 private:
  GeneratorOptions options_;
  std::mt19937_64 rng_;
  DiagramSpec spec_;
  std::set<std::string> usedNames_;
  int nextValue_ = 0;
};

// The union of two axis lists, in the language's order for elementwise
// results: the longer list first, then the other's remaining axes.
std::vector<std::string> unionAxes(const std::vector<std::string>& a, const std::vector<std::string>& b);
std::vector<std::string> without(const std::vector<std::string>& a, const std::vector<std::string>& drop);
bool contains(const std::vector<std::string>& a, const std::string& x);

}  // namespace llmc::fuzz
