// Contractions over a stream's rows joining the stream (planning/row_products.h).
#include "planning/fuser.h"
#include "planning/row_products.h"

namespace llmc::fusion {

// A contraction alone in its kernel whose weights a stream over another
// axis makes, over that stream's rows: it joins the stream, where its
// weights are at hand a step at a time (else stored for it, a [rows x
// stream] array: attention's dS, T x T a head).
void Fuser::joinRowProducts() {
  for (const Node& c : g_.nodes) {
    const int own = group_[idx(c.id)];
    if (c.op != Op::Contract || own < 0 || membersOfGroup(own) != std::set<NodeId>{c.id}) continue;
    for (NodeId operand : c.operands) {
      const int stream = group_[idx(operand)];
      if (stream < 0 || stream == own || !streamAxis_.count(stream)) continue;
      const std::string& t = streamAxis_.at(stream);
      if (!isRowProduct(g_, c, t, [&](NodeId id) { return group_[idx(id)] == stream; })) continue;
      if (!staysAcyclicWith(c.id, stream)) continue;
      join(c.id, stream);
      streamAxis_.erase(own);
      break;
    }
  }
}

}  // namespace llmc::fusion
