// The folder the libFuzzer target writes each input into, laid out so that
// the corpus' relative imports resolve in it as they do in the repository.
#pragma once

#include <string>

namespace llmc::fuzz {

// Makes, under `root`:
//   diagrams/             -> the repository's diagrams/ (a link)
//   tests/lit/lib/        -> diagrams/lib (for the examples' "../lib/x.dg")
//   tests/lit/fuzz/       the input's own folder, with
//     Inputs/             -> tests/lit/errors/Inputs (the error tests' imports)
//     <name>.dg           -> every diagrams/{lib,gpt2,examples}/<name>.dg (imports
//                            of a sibling, as gpt2/block.dg's "mlp.dg")
//     the hostile fixtures (fixtures.h): fifo.dg, zero.dg, big.dg, chain*.dg
// so that "../../../diagrams/lib/softmax.dg", "../lib/softmax.dg",
// "Inputs/softmax.dg" and "mlp.dg" all name real files. Returns the path of
// the input file, tests/lit/fuzz/input.dg (not written yet).
std::string makeImportTree(const std::string& root, const std::string& sourceDir);

}  // namespace llmc::fuzz
