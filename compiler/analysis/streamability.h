// Streamability: can a region of the graph be computed in one pass over an
// axis x, x taken chunk by chunk, holding only an accumulator?
//
// Derived from the laws applied to primitives, never from composite names:
//  - sum and max over x are monoids (start 0 / -inf; combine + / max); a
//    contraction over x is a sum of products; a gather along x is a sum of
//    one-hot products;
//  - fusion: elementwise work on values of the chunk, and on values known
//    before the stream starts, stays inside the chunk;
//  - a factor constant along x comes out of a sum: sum_x(a * c) = c * sum_x(a),
//    so a value that depends on the stream's own aggregates is fine as long as
//    it enters only as such factors (sums of terms core_k * scale_k, where the
//    core is chunk-local and the scale is a product of aggregates);
//  - exp(a - m) = exp(a) * exp(-m): an additive aggregate under exp becomes a
//    factor; when m is the running maximum of a, the sum is kept stabilised by
//    rescaling with exp(m_old - m_new) as m moves (online softmax);
//  - a - m = (a - p) - (m - p) for any p: a chunk-local value less an
//    aggregate is taken about a pivot p, a's value at the stream's first
//    position. Expanded as it stands, sum((a - m)^2) would be sum(a^2) -
//    2 m sum(a) + n m^2, whose terms cancel to the last bit where the values
//    are large and close (a variance of 100 +- 0.01 in f32: all noise); about
//    the pivot the terms are as small as the spread of the values.
// Anything else that reads the stream's aggregates inside the stream (a max,
// a log, a comparison of such a value, ...) is not streamable: it needs the
// whole axis first.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// A factor of a chunk-local product: a node's value, its exp, or the 0/1 mask
// of a bool node (or of its negation).
//
// A Value factor may be taken about a pivot: node - pivot, the pivot being
// the value of `pivotOf` at position 0 of each of its axes that `pivotKeeps`
// lacks (the stream axis among them). A core factor a - p and a scale factor
// m - p come in pairs from a - m (pivotOf a, pivotKeeps m): the pivot varies
// only along m's axes, so m - p stays constant along the stream.
struct StreamFactor {
  enum class Kind { Value, Exp, Mask, NotMask } kind = Kind::Value;
  NodeId node = -1;
  int power = 1;
  NodeId pivotOf = -1;     // -1: the value itself
  NodeId pivotKeeps = -1;
  bool pivoted() const { return pivotOf >= 0; }
  auto operator<=>(const StreamFactor&) const = default;
};

// One accumulator slot: a monoid reduction over the stream axis of a product
// of chunk-local factors.
struct AccumulatorSlot {
  enum class Kind { Sum, Max } kind = Kind::Sum;
  std::vector<StreamFactor> core;
  std::vector<std::string> axes;  // reduced axes (the stream axis and any others)
  std::vector<NodeId> aggregates; // the nodes whose values the slot feeds
  NodeId rescaledBy = -1;         // a Max aggregate m: kept as sum(core * exp(-k m_running))
  int rescalePower = 1;           // that k: the core holds exp(x)^k of m = max(x) (a softmax squared: 2)
};

// One term of an aggregate's value at the end of the stream:
// coefficient * slot * the product of the scale factors (the stream's own
// aggregates, or exps of them).
struct AggregateTerm {
  double coefficient = 1;
  int slot = -1;
  std::vector<StreamFactor> scale;
};

struct StreamAnalysis {
  std::string axis;
  bool streamable = false;
  std::string reason;      // why not, when not
  NodeId failedAt = -1;    // the node where a law did not apply
  std::vector<AccumulatorSlot> slots;
  std::vector<NodeId> aggregates;  // reductions over the axis, in graph order
  std::vector<NodeId> tail;        // values computed from the aggregates after the stream
  std::map<NodeId, std::vector<AggregateTerm>> aggregateTerms;  // each aggregate as a sum over slots
};

// `nodes` and every stop_gradient of one of them (of those, too). A kernel
// computes no stop_gradient (it is a view) but holds its value: its operand's.
std::set<NodeId> withStopGradients(const Graph& graph, std::set<NodeId> nodes);

// Analyses `region` (node ids; values from outside it are available before
// the stream starts) streamed over `axis`. The region reads through the
// stop_gradients of its values.
StreamAnalysis analyzeStream(const Graph& graph, const std::set<NodeId>& region, const std::string& axis);

// Whether `value` is one of the stream's aggregates or reads one through
// `region`'s nodes: known only once the stream is done.
bool readsStreamResults(const Graph& graph, const StreamAnalysis& analysis, const std::set<NodeId>& region, NodeId value);

// Whether `output` lets blocks share the stream over `axis` out among them:
// one of the stream's aggregates (each block adds its partial sums into it),
// or a value along the axis that reads none of them (each block stores the
// positions of its share: an RMSNorm's normalised rows beside its gain's
// gradient).
bool sharesStreamOut(const Graph& graph, const StreamAnalysis& analysis, const std::set<NodeId>& region, NodeId output,
                     const std::string& axis);

// Whether every slot of the stream is one value per point of a tile over
// the `group` axes: its factors lie along those and the axes the slot
// reduces (the stream's, and any other looped whole at each position, as a
// group norm's weight gradient sums over the batch inside each position),
// none else. Such slots can be split over lanes or slices of a block and
// joined after the stream by a shuffle or a tree.
bool slotsOnePerPoint(const Graph& graph, const StreamAnalysis& analysis, const std::set<std::string>& group);

// The axes some node of the graph reduces (sum, max, contraction, gather).
std::vector<std::string> reducedAxes(const Graph& graph);

// A readable report of an analysis, naming nodes as the printed IR does.
std::string describeStream(const Graph& graph, const StreamAnalysis& analysis);

}  // namespace llmc
