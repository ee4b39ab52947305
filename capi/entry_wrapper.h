// The diagrams libllmc writes around a user's entry, as .dg text that
// imports the user's file, so that the front end checks and elaborates them
// like any diagram:
//
// - the *shaped* entry: the entry's inputs at the shapes of the caller's
//   arrays. An entry whose inputs have `..` cannot be compiled on its own
//   (docs/language.md §5.2); called from a diagram whose inputs have every
//   axis and size, it can, and the sizes its signature names (`t:T`) are
//   bound from the arrays. The dimensions a `..` stands for are named
//   batch0, batch1, ... from the left, in every input, so inputs whose `..`
//   covers the same leading dimensions share those axes.
// - the *vector-Jacobian product*: the forward's outputs weighted by seeds
//   (the gradients PyTorch hands a backward) and summed into a scalar loss,
//   differentiated by the autodiff pass with respect to every float input.
//   Its gradients are the op's backward: autodiff needs a scalar loss, and
//   sum(out * seed) has out's gradient equal to seed.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/ast.h"
#include "ir/ir.h"

namespace llmc::capi {

// The caller's arrays do not fit the entry (a rank, a missing input), or the
// shaped entry fails to compile at the shapes given.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One input's shape, from the caller's array.
struct InputShape {
  std::string input;
  std::vector<int64_t> dims;
};

// The entry as declared: its name, the file that holds it, its ports.
struct EntrySignature {
  std::string name;
  std::string file;  // the path of the file that declares it, absolute
  std::vector<Port> inputs, outputs;
  bool woven = false;  // some input has `..`
};

// The entry `entry` (empty: the last diagram of `path`) as declared. Throws
// CompileError for a file that does not parse or an entry it does not have.
EntrySignature readEntrySignature(const std::string& path, const std::string& entry);

// The name given to the k-th dimension a `..` stands for.
std::string batchAxisName(size_t k);

// The shaped entry: a diagram `wrapperName` whose inputs are `signature`'s
// at `shapes` (one for each input), calling the entry. Throws ShapeError for
// a missing, unknown or repeated input or a rank that does not fit.
std::string shapedEntrySource(const EntrySignature& signature, const std::vector<InputShape>& shapes,
                              const std::string& wrapperName);

// The vector-Jacobian product of `forward` (the compiled graph of diagram
// `callee`, declared in `calleeFile`): a diagram `wrapperName` with the
// forward's inputs, then a seed for each float output (seedName(output), of
// the output's type), and one output, kVjpLoss. Differentiate it with respect
// to `wrt`. Throws ShapeError (no float output, a name taken).
std::string vjpSource(const Graph& forward, const std::string& callee, const std::string& calleeFile,
                      const std::vector<std::string>& wrt, const std::string& wrapperName);

inline constexpr const char* kVjpLoss = "llmc_vjp_loss";
std::string seedName(const std::string& output);

// Writes `source` into the folder of generated diagrams (beside the kernel
// cache: $LLMC_CACHE_DIR/wrappers, or the default cache folder's), named by
// its SHA-256, and returns its path.
std::string writeWrapper(const std::string& source);

}  // namespace llmc::capi
