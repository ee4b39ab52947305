// Streamability of a scan: a scan node (Op::Scan) streams over its own axis
// by associativity alone. Its result at a position is the monoid's product
// of the positions before it (and itself, inclusive), so the axis can be
// taken chunk by chunk holding one element a line, the carry: the product of
// the chunks before. Each position's value is the carry, then the chunk's
// elements up to it; after the chunk the carry takes the chunk's product.
//
// The monoid is that of the node, never of a name:
//  - sum: elements x, identity 0, combine +;
//  - max: elements x, identity -inf, combine max;
//  - linear recurrence h = a h + x (ir.h, isLinearScan): elements the
//    steps h -> a h + b as pairs (a, b), identity (1, 0), the earlier step
//    then the later (a1, b1) then (a2, b2) = (a1 a2, a2 b1 + b2): associative,
//    not commutative, so the chunks are combined in scan order;
//  - a user's operator f (ir.h, isMonoidScan): elements (x, present), the
//    head the empty element, e then l = f(e, l) where both are present,
//    else the present one; associative by the front end's check, so a
//    fold from the first element regroups into chunks.
// This is the blocked scan planning/scan_layout.h lays out and prices.
#pragma once

#include <string>

#include "ir/ir.h"

namespace llmc {

struct ScanStream {
  NodeId node = -1;
  std::string axis;         // the result's scanned axis: the stream
  std::string operandAxis;  // the operand's (a renamed copy of it)
  std::string element;      // what the carry holds: "x", or "(a, b)"
  std::string identity;     // the carry at the head: "0", "-inf", "(1, 0)"
  std::string combine;      // the earlier element e, then the later l
};

// The stream of a scan node (n.op == Op::Scan).
ScanStream analyzeScanStream(const Node& scan);

// A readable report of it, naming nodes as the printed IR does.
std::string describeScanStream(const Graph& graph, const ScanStream& stream);

}  // namespace llmc
