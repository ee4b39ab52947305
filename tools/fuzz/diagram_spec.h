// A random diagram as the fuzzer holds it: axes with sizes, values (inputs and
// the results of statements), statements as expression templates. It prints
// as one .dg file that llmc-compile takes as it is, and it is what the
// shrinker edits: a statement can become an input of its own type, an axis a
// smaller size, and the file is printed again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmc::fuzz {

// How an axis gets its size. Only Root axes carry a size of their own; the
// others follow from the axes they were made from, so that shrinking a root
// keeps split, merge, concat and rename consistent (or makes the candidate
// invalid, which the shrinker then skips).
enum class AxisRule {
  Root,      // size: its own
  Quotient,  // split's inferred part: size(of[0]) / size(of[1]); must divide
  Product,   // merge: the product of size(of[i])
  Multiple,  // concat of n arrays: n * size(of[0])
  Same,      // rename: size(of[0])
  Count,     // stack of n arrays: n
};

struct AxisDef {
  std::string name = {};
  AxisRule rule = AxisRule::Root;
  int64_t size = 1;              // Root only
  std::vector<std::string> of = {};   // the axes it is made from
  int64_t n = 1;                 // Multiple
  // A slice's axis is a Root whose positions lo .. lo+size-1 must lie in
  // sliceOf: lo + size <= size(sliceOf).
  std::string sliceOf = {};
  int64_t lo = 0;
};

struct Value {
  std::string name = {};
  std::string dtype = {};              // "f32", "bf16", or "i32" for index inputs
  std::vector<std::string> axes = {};  // in the order the language gives the result (order matters only for inputs)
  bool input = false;
  bool param = false;             // a float input the loss is differentiated against
  // What the generator knows of its elements, to keep the oracle defined:
  // |v| <= bound, and v >= lo where lo >= 0 (lo > 0: positive, as log,
  // rsqrt and division need); lo < 0: the sign is unknown.
  double bound = 4;
  double lo = -1;
  bool masked = false;            // holds -inf (a causal mask): only its softmax may read it
  std::string indexAxis = {};          // index inputs: positions of this axis
  int64_t indexBound = 0;         // index inputs read back from a file (no axes known): positions below it
};

// One assignment: `values[result].name = text`, where text holds `$i` for the
// name of values[args[i]] and `#axis#` for the size of an axis.
struct Statement {
  int result = -1;
  std::vector<int> args = {};
  std::string text = {};
  std::string what = {};  // the kind of operation, for statistics ("contract", "softmax"...)
  // Axes the text names that the diagram must know (broadcast's, scatter_add's
  // target axis), and axes it creates (split, merge, rename, slice, concat).
  std::vector<std::string> needs = {}, creates = {};
  // A diagram the text calls, printed before the fuzzed one (a scan's
  // operator); it goes with the statement when the shrinker drops it.
  std::string helper = {};
};

struct DiagramSpec {
  uint64_t seed = 0;
  std::vector<AxisDef> axes = {};
  std::vector<Value> values = {};
  std::vector<Statement> statements = {};  // in order
  int output = -1;                    // the value the diagram returns as y (f32); the loss weighs it
  // A diagram read back from a file (--file): its text as it is; values then
  // holds only its inputs, with what the header says of them.
  std::string fileText = {};
  std::vector<std::string> fileWrt = {};

  const AxisDef* findAxis(const std::string& name) const;
  // The size of an axis, or nullopt where the rules cannot hold (a split that
  // does not divide, a slice past its parent's end, a size below 1).
  std::optional<int64_t> sizeOf(const std::string& name) const;
  bool valid() const;  // every axis a value uses has a size
  int64_t elements(const std::vector<std::string>& axes) const;
  // The statement that computes value v, or -1 for an input.
  int producer(int v) const;
  // Removes statements the output does not need and inputs nothing reads.
  void prune();
  // The inputs the loss is differentiated against (--wrt), in order.
  std::vector<std::string> wrt() const;
};

// The .dg text: the diagram `fuzz`, inputs in value order (and `anchor`
// with the axes statements need that neither an input nor a statement
// gives the diagram: a broadcast along an axis whose input was shrunk away), outputs
// `(y: f32[...], loss: f32[])` where loss = sum(y * wy) over y's axes, and
// a header of comment lines.
std::string printDiagram(const DiagramSpec& spec, const std::string& header = "");

// The header lines that let `llmc-fuzz --file` check a saved diagram again:
// `# fuzz-input: NAME positive`, `# fuzz-input: NAME index BOUND`, `# fuzz-wrt: A,B`.
std::string inputsHeader(const DiagramSpec& spec);
// A diagram read back from such a file.
DiagramSpec readDiagram(const std::string& path);

}  // namespace llmc::fuzz
