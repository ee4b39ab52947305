// The command-line layer the tools share: an option's value after it
// (`--set B=4`) or joined to it by '=' (`--set=B=4`), and usage errors,
// which each tool reports with a pointer to its --help and exit status 2.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace llmc {

// A bad command line: the message, without the tool's name.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The arguments one at a time, each `--name=value` split at its first '='.
class Arguments {
 public:
  Arguments(int argc, char** argv) : argc_(argc), argv_(argv) {}

  // Moves to the next argument; false past the last. Throws UsageError
  // where the argument before had a value joined that it did not take
  // (`--quiet=1`).
  bool next();
  // The argument, without a value joined to it.
  const std::string& arg() const { return arg_; }
  // The argument's value: the one joined to it, else the next argument.
  // Throws UsageError where there is none.
  std::string value();
  // Throws UsageError where a value was joined to the argument: for the
  // options that act at once (--help, --version).
  void takesNoValue() const;

 private:
  int argc_;
  char** argv_;
  int at_ = 0;
  std::string arg_;
  std::optional<std::string> joined_;
};

}  // namespace llmc
