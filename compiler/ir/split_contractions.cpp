#include "ir/split_contractions.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "lowering/tensor_core_stream.h"
#include "planning/fuser.h"

namespace llmc {

namespace {

// How a contraction splits: the axis it keeps, the axes summed after it.
struct Split {
  std::string kept;
  std::vector<std::string> summed;
};

class ContractionSplitter {
 public:
  ContractionSplitter(const Graph& g, const Target& t, const CostOptions& o) : g_(g), target_(t), options_(o) {}

  Graph run() {
    return rewriteNodes(g_, [&](const Node& n, GraphBuilder& b, const CopiedNode& copied) -> std::optional<NodeId> {
      const std::optional<Split> s = split(n);
      if (!s) return std::nullopt;
      NodeId partial = b.contract(copied(n.operands[0]), copied(n.operands[1]), {s->kept});
      // An axis of one position is taken as its position 0, a view: no sum to launch.
      std::vector<std::string> summed;
      for (const std::string& x : s->summed)
        if (b.type(partial).find(x)->size == 1) partial = b.index(partial, x, 0);
        else summed.push_back(x);
      return b.transposeTo(b.sum(partial, summed), n.type);
    });
  }

 private:
  const Type& type(NodeId id) const { return g_.node(id).type; }

  std::optional<Split> split(const Node& n) const {
    if (n.op != Op::Contract || n.axes.size() < 2 || !isFloat(n.type.dtype)) return std::nullopt;
    const NodeId a = n.operands[0], b = n.operands[1];
    // Every reduced axis in both operands: a contraction, not a sum of one
    // operand folded in.
    for (const std::string& x : n.axes)
      if (!type(a).has(x) || !type(b).has(x)) return std::nullopt;
    // The longest reduced axis, the first in a's order on a tie.
    Split s;
    int64_t longest = 0;
    for (const Axis& x : type(a).axes)
      if (std::find(n.axes.begin(), n.axes.end(), x.name) != n.axes.end() && x.size > longest) {
        longest = x.size;
        s.kept = x.name;
      }
    for (const std::string& x : n.axes)
      if (x != s.kept) s.summed.push_back(x);
    std::optional<NodeId> streamed;
    for (NodeId o : {a, b})
      if (!streamed && scoreAlong(o, s.kept) && productChannels(o == a ? b : a, o))
        streamed = o;
    if (!streamed) return std::nullopt;
    return splitIsCheaper(n, *streamed, s) ? std::optional<Split>(s) : std::nullopt;
  }

  // Whether `operand` is remade from a short contraction (fusion's
  // remakingContraction) over one axis, of one array along `kept` and one
  // across it: a score a stream over `kept` makes at each of its positions
  // on the tensor cores (attention's q·k, lowering/tensor_core_stream.h). A
  // contraction over several axes there (a product over a head's groups and
  // channels) is no stream's score: its operand is stored whichever way the
  // contraction is split.
  bool scoreAlong(NodeId operand, const std::string& kept) const {
    const NodeId c = fusion::remakingContraction(g_, operand);
    if (c < 0) return false;
    const Node& n = g_.node(c);
    return n.axes.size() == 1 && type(n.operands[0]).has(kept) != type(n.operands[1]).has(kept) &&
           type(n.operands[0]).find(n.axes[0])->size <= streamMaxChannels(target_);
  }

  // Whether the other operand is one the stream's product takes: one axis
  // of channels besides the score operand's, no more than a tile holds.
  bool productChannels(NodeId values, NodeId score) const {
    int channels = 0;
    for (const Axis& x : type(values).axes)
      if (!type(score).has(x.name)) {
        if (x.size > streamMaxChannels(target_)) return false;
        ++channels;
      }
    return channels == 1;
  }

  // Whole, the operand the stream would make is stored by a kernel of its
  // own and read by the contraction's; split, the partial sums are, and the
  // sum over the other axes is the kernel of its own. (Axes of one position
  // are no sum: the partial sums are the result.) The partial sums are the
  // smaller where the positions kept outnumber the channels the result has
  // beyond the operand's.
  bool splitIsCheaper(const Node& n, NodeId streamed, const Split& s) const {
    Type partial = n.type;
    for (const std::string& x : s.summed) partial.axes.push_back(*type(streamed).find(x));
    if (partial.elementCount() == n.type.elementCount()) return true;
    const double bandwidth = target_.level("GMEM").attainableBandwidth;
    const double whole = 2 * storedBytes(type(streamed), options_) / bandwidth + target_.graphLaunchOverhead;
    const double split = 2 * storedBytes(partial, options_) / bandwidth + target_.graphLaunchOverhead;
    return split < whole;
  }

  const Graph& g_;
  const Target& target_;
  const CostOptions& options_;
};

}  // namespace

Graph splitContractions(const Graph& graph, const Target& target, const CostOptions& options) {
  return ContractionSplitter(graph, target, options).run();
}

}  // namespace llmc
