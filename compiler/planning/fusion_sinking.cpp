// Fusion: elementwise work moved from the kernel that makes its operands to
// the one kernel that reads it.
#include "planning/fuser.h"

namespace llmc::fusion {

namespace {

// Arrays this many times smaller than a value are read with it for nearly
// nothing: a row's statistic beside the row, a channel's gain beside the
// channels.
constexpr int64_t kSmallFactor = 8;

// A contraction with rows and columns (an axis of one operand alone, and one
// of the other alone): tiles of both come stored to the tensor cores (a
// GEMM, a stream's products). A dot product along rows (a layernorm's
// backward over its channels) has neither.
bool matmulLike(const Graph& g, const Node& c) {
  if (c.op != Op::Contract || c.operands.size() != 2) return false;
  auto alone = [&](NodeId mine, NodeId other) {
    for (const Axis& a : g.node(mine).type.axes)
      if (!g.node(other).type.has(a.name) && std::find(c.axes.begin(), c.axes.end(), a.name) == c.axes.end()) return true;
    return false;
  };
  return alone(c.operands[0], c.operands[1]) && alone(c.operands[1], c.operands[0]);
}

}  // namespace

// attachEpilogues puts an elementwise node in the kernel of its latest
// operand. Where that kernel does not read it but one other kernel does, the
// value is stored there only to be read back here: a layernorm's backward
// scales the incoming gradient by its gain and each row's 1/std, products
// that the GEMM making the gradient took into its epilogue, storing two more
// arrays of the activations' size for the layernorm's kernel alone. Such a
// node moves to its reader, with the members of its kernel that only it
// reads, where the reader then reads nothing large it did not read already
// (what the moved nodes read: the reader's own values, values it reads
// anyway, small arrays, free values); the stores and the reads back are
// gone. Not into a kernel with a matrix product (the tensor cores take
// stored operands; a stream's tiles are loaded, not made), nor what feeds a
// contraction.
void Fuser::sinkIntoReaders() {
  bool moved = true;
  while (moved) {
    moved = false;
    for (size_t i = g_.nodes.size(); i-- > 0;) {
      const Node& n = g_.nodes[i];
      const int from = group_[i];
      if (from < 0 || !light(n) || isOutput_.count(n.id) || feedsContraction(n.id)) continue;
      int to = -1;
      bool oneReader = true;
      for (NodeId c : readersThroughViews(n.id)) {
        const int gc = group_[idx(c)];
        if (gc < 0 || (to >= 0 && gc != to)) oneReader = false;
        to = gc;
      }
      if (!oneReader || to < 0 || to == from || holdsScan(to)) continue;
      const std::set<NodeId>& target = membersOfGroup(to);
      if (std::any_of(target.begin(), target.end(), [&](NodeId m) { return matmulLike(g_, g_.node(m)); })) continue;
      // n and the members of `from` that n alone reads, through such members.
      std::set<NodeId> moving = {n.id};
      for (bool grew = true; grew;) {
        grew = false;
        for (NodeId m : std::set<NodeId>(moving))
          for (NodeId o : g_.node(m).operands) {
            if (moving.count(o) || group_[idx(o)] != from || !light(g_.node(o)) || isOutput_.count(o) ||
                feedsContraction(o))
              continue;
            const std::vector<NodeId> readers = readersThroughViews(o);
            if (std::all_of(readers.begin(), readers.end(), [&](NodeId r) { return moving.count(r) > 0; }))
              grew = moving.insert(o).second || grew;
          }
      }
      if (!readsLittleMore(moving, to, n)) continue;
      moved = joinWithoutLoop(moving, from, to) || moved;
    }
  }
}

// Moves `nodes` (members of `from`) into `to`, the last first (each then
// joins what reads it there), while none makes a path out of `to` and back
// (staysAcyclicWith, which walks near them, not every kernel's edges);
// where one would, the moved go back to `from`. Whether they moved.
bool Fuser::joinWithoutLoop(std::set<NodeId> nodes, int from, int to) {
  std::vector<NodeId> joined;
  for (auto m = nodes.rbegin(); m != nodes.rend() && staysAcyclicWith(*m, to); ++m) {
    join(*m, to);
    joined.push_back(*m);
  }
  if (joined.size() == nodes.size()) return true;
  for (NodeId m : joined) join(m, from);
  return false;
}

// Whether group `to`, given `moving`, reads nothing new but small arrays
// (kSmallFactor times fewer elements than `value`) and free values: every
// other operand of a moving node is moving, in `to`, or read by `to` already.
bool Fuser::readsLittleMore(const std::set<NodeId>& moving, int to, const Node& value) const {
  const int64_t elements = value.type.elementCount();
  for (NodeId m : moving)
    for (NodeId o : g_.node(m).operands) {
      if (moving.count(o) || freeNode(o) || group_[idx(o)] == to) continue;
      if (g_.node(o).type.elementCount() * kSmallFactor <= elements) continue;
      const std::vector<NodeId> readers = readersThroughViews(o);
      if (!std::any_of(readers.begin(), readers.end(), [&](NodeId r) { return !moving.count(r) && group_[idx(r)] == to; }))
        return false;
    }
  return true;
}

}  // namespace llmc::fusion
