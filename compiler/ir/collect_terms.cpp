#include "ir/collect_terms.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "ir/canonicalize.h"
#include "ir/rewrite.h"

namespace llmc {

namespace {

// A constant times a product of atoms (sorted node ids; an atom may repeat).
struct Term {
  double coefficient = 1;
  std::vector<NodeId> atoms;
};
// Distinct atom lists, in the order of their atoms.
using Polynomial = std::vector<Term>;

// Beyond these an expression stays as written: the rewrite is for the short
// sums of derivatives, and its cost must stay linear in the graph.
constexpr size_t kMaxTerms = 32;
constexpr size_t kMaxAtoms = 16;
constexpr size_t kMaxExpanded = 256;

// What an expression below a node is: its terms, and the nodes expanded to
// find them (sorted), which the rewrite may free.
struct Expansion {
  Polynomial terms;
  std::vector<NodeId> expanded;
};

std::vector<NodeId> unionOf(const std::vector<NodeId>& a, const std::vector<NodeId>& b) {
  std::vector<NodeId> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Merges terms with the same atoms; nullopt where a merged coefficient is 0
// (a cancellation, left as written).
std::optional<Polynomial> merged(Polynomial p) {
  std::stable_sort(p.begin(), p.end(), [](const Term& a, const Term& b) { return a.atoms < b.atoms; });
  Polynomial out;
  for (Term& t : p) {
    if (!out.empty() && out.back().atoms == t.atoms) out.back().coefficient += t.coefficient;
    else out.push_back(std::move(t));
  }
  for (const Term& t : out)
    if (t.coefficient == 0) return std::nullopt;
  return out;
}

// Where the rewritten expression goes: a count of its operations and the
// order of its axes (to decide), or the graph (to build).
class TermWriter {
 public:
  virtual ~TermWriter() = default;
  virtual int atom(NodeId id) = 0;
  virtual int constant(double value) = 0;
  virtual int binary(BinaryOp op, int x, int y) = 0;
  virtual int negate(int x) = 0;
};

// Counts operations and follows the axes by the builder's rule (elementwiseAxes).
class CountingWriter : public TermWriter {
 public:
  explicit CountingWriter(const Graph& g) : g_(g) {}
  int operations = 0;
  const std::vector<Axis>& axes(int value) const { return values_[static_cast<size_t>(value)]; }

  int atom(NodeId id) override { return push(g_.node(id).type.axes); }
  int constant(double) override { return push({}); }
  int binary(BinaryOp, int x, int y) override {
    ++operations;
    return push(elementwiseAxes({&axes(x), &axes(y)}));
  }
  int negate(int x) override {
    ++operations;
    return push(std::vector<Axis>(axes(x)));
  }

 private:
  int push(std::vector<Axis> a) {
    values_.push_back(std::move(a));
    return static_cast<int>(values_.size()) - 1;
  }
  const Graph& g_;
  std::vector<std::vector<Axis>> values_;
};

class BuildingWriter : public TermWriter {
 public:
  BuildingWriter(GraphBuilder& b, const CopiedNode& copied, DType dtype) : b_(b), copied_(copied), dtype_(dtype) {}
  NodeId node(int value) const { return made_[static_cast<size_t>(value)]; }

  int atom(NodeId id) override { return push(copied_(id)); }
  int constant(double value) override { return push(b_.constant(value, dtype_)); }
  int binary(BinaryOp op, int x, int y) override { return push(b_.binary(op, node(x), node(y))); }
  int negate(int x) override { return push(b_.unary(UnaryOp::Neg, node(x))); }

 private:
  int push(NodeId id) {
    made_.push_back(id);
    return static_cast<int>(made_.size()) - 1;
  }
  GraphBuilder& b_;
  const CopiedNode& copied_;
  DType dtype_;
  std::vector<NodeId> made_;
};

// Writes a polynomial back as operations, factoring as it goes.
class Factoring {
 public:
  explicit Factoring(TermWriter& w) : w_(w) {}

  int polynomial(const Polynomial& p) {
    if (p.size() == 1) return term(p[0]);
    const std::vector<NodeId> shared = common(p);
    if (!shared.empty()) return w_.binary(BinaryOp::Mul, product(shared), polynomial(without(p, shared)));
    const std::optional<NodeId> a = mostFrequentAtom(p);
    if (!a) return sum(p);
    Polynomial with, rest;
    for (const Term& t : p) (contains(t, *a) ? with : rest).push_back(t);
    const int factored = w_.binary(BinaryOp::Mul, w_.atom(*a), polynomial(without(with, {*a})));
    if (rest.empty()) return factored;
    if (allNegative(rest)) return w_.binary(BinaryOp::Sub, factored, polynomial(negated(rest)));
    return w_.binary(BinaryOp::Add, factored, polynomial(rest));
  }

 private:
  int product(const std::vector<NodeId>& atoms) {
    int made = w_.atom(atoms[0]);
    for (size_t i = 1; i < atoms.size(); ++i) made = w_.binary(BinaryOp::Mul, made, w_.atom(atoms[i]));
    return made;
  }

  int term(const Term& t) {
    if (t.atoms.empty()) return w_.constant(t.coefficient);
    const int p = product(t.atoms);
    if (t.coefficient == 1) return p;
    if (t.coefficient == -1) return w_.negate(p);
    return w_.binary(BinaryOp::Mul, p, w_.constant(t.coefficient));
  }

  // Terms added in order, those of negative coefficient subtracted.
  int sum(const Polynomial& p) {
    if (allNegative(p)) return w_.negate(sum(negated(p)));
    const auto first = std::find_if(p.begin(), p.end(), [](const Term& t) { return t.coefficient > 0; });
    int made = term(*first);
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (it == first) continue;
      if (it->coefficient < 0) made = w_.binary(BinaryOp::Sub, made, term({-it->coefficient, it->atoms}));
      else made = w_.binary(BinaryOp::Add, made, term(*it));
    }
    return made;
  }

  static bool contains(const Term& t, NodeId a) { return std::binary_search(t.atoms.begin(), t.atoms.end(), a); }
  static bool allNegative(const Polynomial& p) {
    return std::all_of(p.begin(), p.end(), [](const Term& t) { return t.coefficient < 0; });
  }
  static Polynomial negated(Polynomial p) {
    for (Term& t : p) t.coefficient = -t.coefficient;
    return p;
  }
  // The atoms (with repeats) every term holds.
  static std::vector<NodeId> common(const Polynomial& p) {
    std::vector<NodeId> shared = p[0].atoms;
    for (const Term& t : p) {
      std::vector<NodeId> both;
      std::set_intersection(shared.begin(), shared.end(), t.atoms.begin(), t.atoms.end(), std::back_inserter(both));
      shared = std::move(both);
    }
    return shared;
  }
  static Polynomial without(Polynomial p, const std::vector<NodeId>& atoms) {
    for (Term& t : p) {
      std::vector<NodeId> left;
      std::set_difference(t.atoms.begin(), t.atoms.end(), atoms.begin(), atoms.end(), std::back_inserter(left));
      t.atoms = std::move(left);
    }
    return p;
  }
  // The atom in the most terms, where that is two or more; the first by id on a tie.
  static std::optional<NodeId> mostFrequentAtom(const Polynomial& p) {
    std::optional<NodeId> best;
    size_t bestCount = 1;
    std::vector<NodeId> seen;
    for (const Term& t : p) seen.insert(seen.end(), t.atoms.begin(), t.atoms.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (NodeId a : seen) {
      const size_t count = static_cast<size_t>(std::count_if(p.begin(), p.end(), [&](const Term& t) { return contains(t, a); }));
      if (count > bestCount) best = a, bestCount = count;
    }
    return best;
  }

  TermWriter& w_;
};

class TermCollector {
 public:
  explicit TermCollector(const Graph& g) : g_(g), readers_(g.nodes.size()), output_(g.nodes.size(), 0) {
    for (const Node& n : g.nodes)
      for (NodeId o : n.operands) readers_[static_cast<size_t>(o)].push_back(n.id);
    for (const GraphOutput& o : g.outputs) output_[static_cast<size_t>(o.node)] = 1;
    memo_.resize(g.nodes.size());
  }

  Graph run() {
    return rewriteNodes(g_, [&](const Node& n, GraphBuilder& b, const CopiedNode& copied) -> std::optional<NodeId> {
      // In graph order, so that a node's operands are expanded before it (no
      // recursion as deep as a long chain of sums).
      const Expansion& e = expand(n.id);
      // Sums, and constants times sums, are rewritten; a product of one term stays.
      if (!isSum(n) && !(isMul(n) && e.terms.size() > 1)) return std::nullopt;
      if (e.expanded.empty()) return std::nullopt;  // left as an atom
      CountingWriter count(g_);
      const int counted = Factoring(count).polynomial(e.terms);
      if (count.operations >= freedOperations(n.id, e) || !sameOrder(count.axes(counted), n.type.axes))
        return std::nullopt;
      BuildingWriter build(b, copied, n.type.dtype);
      return build.node(Factoring(build).polynomial(e.terms));
    });
  }

 private:
  static bool isMul(const Node& n) { return n.op == Op::Binary && n.binary == BinaryOp::Mul; }

  // Of a product's two operands, the one that is a nonzero constant while the
  // other is a sum of several terms (0 or 1); -1 where there is none.
  int constantScalingSum(const Node& product) {
    for (int at : {0, 1}) {
      const Expansion& c = expand(product.operands[static_cast<size_t>(at)]);
      if (c.terms.size() == 1 && c.terms[0].atoms.empty() && c.terms[0].coefficient != 0 &&
          summand(product.operands[static_cast<size_t>(1 - at)]).terms.size() > 1)
        return at;
    }
    return -1;
  }

  static bool isSum(const Node& n) {
    return n.op == Op::Binary && isFloat(n.type.dtype) && (n.binary == BinaryOp::Add || n.binary == BinaryOp::Sub);
  }

  static bool sameOrder(const std::vector<Axis>& a, const std::vector<Axis>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const Axis& x, const Axis& y) { return x.name == y.name; });
  }

  static Expansion atom(NodeId id) { return {{{1, {id}}}, {}}; }

  const Expansion& expand(NodeId id) {
    std::optional<Expansion>& slot = memo_[static_cast<size_t>(id)];
    if (!slot) slot = expandNode(g_.node(id));
    return *slot;
  }

  // A factor of a product: the expansion where it is one term, else the node itself.
  Expansion factor(NodeId id) {
    const Expansion& e = expand(id);
    return e.terms.size() == 1 ? e : atom(id);
  }

  // An operand of a sum: its terms, but for a sum that other nodes read too.
  // Computed for them anyway, it is one atom here, so that x + k·x·x·x stays a
  // polynomial in x where x = a + b feeds other expressions.
  Expansion summand(NodeId id) {
    if (isSum(g_.node(id)) && (readers_[static_cast<size_t>(id)].size() > 1 || output_[static_cast<size_t>(id)]))
      return atom(id);
    return expand(id);
  }

  Expansion expandNode(const Node& n) {
    if (!isFloat(n.type.dtype)) return atom(n.id);
    if (n.op == Op::Constant) return {{{n.value, {}}}, {}};
    Expansion e;
    if (n.op == Op::Unary && n.unary == UnaryOp::Neg) {
      e = expand(n.operands[0]);
      for (Term& t : e.terms) t.coefficient = -t.coefficient;
    } else if (isSum(n)) {
      const Expansion x = summand(n.operands[0]);
      const Expansion y = summand(n.operands[1]);
      Polynomial terms = x.terms;
      for (Term t : y.terms) {
        if (n.binary == BinaryOp::Sub) t.coefficient = -t.coefficient;
        terms.push_back(std::move(t));
      }
      std::optional<Polynomial> m = merged(std::move(terms));
      if (!m || m->size() > kMaxTerms) return atom(n.id);
      e = {std::move(*m), unionOf(x.expanded, y.expanded)};
    } else if (const int at = isMul(n) ? constantScalingSum(n) : -1; at >= 0) {
      // A constant times a sum: the constant scales the sum's coefficients,
      // which multiplies nothing out (c·(x + k·x³) is c·x + c·k·x³).
      const Expansion& c = expand(n.operands[static_cast<size_t>(at)]);
      const Expansion sum = summand(n.operands[static_cast<size_t>(1 - at)]);
      e = {sum.terms, unionOf(c.expanded, sum.expanded)};
      for (Term& t : e.terms) t.coefficient *= c.terms[0].coefficient;
    } else if (isMul(n)) {
      const Expansion x = factor(n.operands[0]), y = factor(n.operands[1]);
      Term t{x.terms[0].coefficient * y.terms[0].coefficient, x.terms[0].atoms};
      t.atoms.insert(t.atoms.end(), y.terms[0].atoms.begin(), y.terms[0].atoms.end());
      std::sort(t.atoms.begin(), t.atoms.end());
      if (t.atoms.size() > kMaxAtoms || t.coefficient == 0) return atom(n.id);
      e = {{std::move(t)}, unionOf(x.expanded, y.expanded)};
    } else {
      return atom(n.id);
    }
    if (e.expanded.size() >= kMaxExpanded) return atom(n.id);
    e.expanded.insert(std::upper_bound(e.expanded.begin(), e.expanded.end(), n.id), n.id);
    return e;
  }

  // The operations that die with the root: expanded nodes all of whose
  // readers die too (readers come later in the graph, so a walk from the
  // root backwards settles each before its operands), but for those the
  // rewritten sum still reads: its atoms (a sum expanded on one path may be
  // an atom of a product on another) and what they are made from.
  int freedOperations(NodeId root, const Expansion& e) const {
    const std::vector<NodeId>& expanded = e.expanded;
    std::vector<char> kept(expanded.size(), 0);
    std::vector<NodeId> work;
    for (const Term& t : e.terms)
      for (NodeId a : t.atoms) {
        work.push_back(a);
        work.insert(work.end(), g_.node(a).operands.begin(), g_.node(a).operands.end());
      }
    while (!work.empty()) {
      const NodeId id = work.back();
      work.pop_back();
      const auto at = std::lower_bound(expanded.begin(), expanded.end(), id);
      if (at == expanded.end() || *at != id || kept[static_cast<size_t>(at - expanded.begin())]) continue;
      kept[static_cast<size_t>(at - expanded.begin())] = 1;
      work.insert(work.end(), g_.node(id).operands.begin(), g_.node(id).operands.end());
    }
    std::vector<NodeId> dying{root};
    for (auto it = expanded.rbegin(); it != expanded.rend(); ++it) {
      if (*it == root || output_[static_cast<size_t>(*it)] || kept[static_cast<size_t>(expanded.rend() - it - 1)]) continue;
      const auto& readers = readers_[static_cast<size_t>(*it)];
      if (std::all_of(readers.begin(), readers.end(),
                      [&](NodeId r) { return std::find(dying.begin(), dying.end(), r) != dying.end(); }))
        dying.push_back(*it);
    }
    return static_cast<int>(std::count_if(dying.begin(), dying.end(), [&](NodeId id) {
      const Op op = g_.node(id).op;
      return op == Op::Unary || op == Op::Binary;
    }));
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> readers_;
  std::vector<char> output_;
  std::vector<std::optional<Expansion>> memo_;
};

size_t operationCount(const Graph& g) {
  return static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.op == Op::Unary || n.op == Op::Binary;
  }));
}

}  // namespace

// Rounds until nothing changes (a few at most): a sum is decided in graph
// order, while the terms of later sums still read its parts — the forward's
// x + k·x·x·x waits for the backward's derivative, collected in the same
// round, to stop reading x·x and k·x. Each rewrite removes operations, so the
// count falls every round that changes anything.
Graph collectTerms(const Graph& graph) {
  constexpr int kMaxRounds = 4;
  Graph g = canonicalize(TermCollector(graph).run());
  for (int round = 1; round < kMaxRounds; ++round) {
    Graph next = canonicalize(TermCollector(g).run());
    if (operationCount(next) >= operationCount(g)) break;
    g = std::move(next);
  }
  return g;
}

}  // namespace llmc
