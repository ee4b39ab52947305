// Hostile files for import lines to point at, shared by both front-end
// fuzzers (llmc-fuzz-frontend and llmc-libfuzz-frontend).
#pragma once

#include <string>

namespace llmc::fuzz {

// Writes into folder `dir` (made if missing): fifo.dg (a FIFO: reading it
// would block), zero.dg (a link to /dev/zero: reading it would never end),
// big.dg (a file over the size limit) and chain0.dg ... chain99.dg (each
// importing the next: deeper than the import limit).
void makeFixtures(const std::string& dir);

}  // namespace llmc::fuzz
