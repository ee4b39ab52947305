#include "command_line.h"

#include <utility>

namespace llmc {

bool Arguments::next() {
  takesNoValue();
  if (++at_ >= argc_) return false;
  arg_ = argv_[at_];
  joined_.reset();
  if (const size_t eq = arg_.find('='); arg_.starts_with("--") && eq != std::string::npos)
    joined_ = arg_.substr(eq + 1), arg_.resize(eq);
  return true;
}

std::string Arguments::value() {
  if (joined_) return *std::exchange(joined_, std::nullopt);
  if (at_ + 1 >= argc_) throw UsageError(arg_ + " needs a value");
  return argv_[++at_];
}

void Arguments::takesNoValue() const {
  if (joined_) throw UsageError(arg_ + " takes no value (got '" + arg_ + "=" + *joined_ + "')");
}

}  // namespace llmc
