// Runs one fuzz input through the front end in a child process (fork), so
// that a crash, a hang or a blow-up of memory is seen and reported, not
// suffered: the parent watches the child's time and resident memory and
// kills it past the budget.
#pragma once

#include <string>

#include "mutator.h"

namespace llmc::fuzz {

enum class Outcome {
  Accepted,    // compiled
  Diagnostic,  // refused with a CompileError (a diagnostic, as it should be)
  Internal,    // any other exception: what llmc-compile reports as an internal error (exit 3)
  Crash,       // a signal or a sanitizer report
  Timeout,     // ran past the time budget
  Memory,      // grew past the memory bound
};
const char* outcomeName(Outcome o);
bool isFailure(Outcome o);

struct RunOptions {
  std::string scratch;        // folder for input.dg and the fixtures it may import
  double seconds = 2.0;       // time budget per input
  long memoryMiB = 2048;      // resident memory bound per input
  bool plan = false;          // with small sizes: differentiate and plan kernels too
};

struct Result {
  Outcome outcome = Outcome::Accepted;
  std::string detail;  // the child's message (exception text, sanitizer report)
  double seconds = 0;
};

Result runInput(const Input& input, const RunOptions& options);

}  // namespace llmc::fuzz
