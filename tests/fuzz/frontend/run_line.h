// The options a diagram's own '# RUN:' lines give llmc-compile, read without
// regular expressions (std::regex recurses per character and a fuzzed line
// may be long): the libFuzzer target takes the sizes, the entry and --grad
// from the text it is given, so that mutating those lines fuzzes them too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llmc::fuzz {

struct RunLineOptions {
  std::string sizes;              // every --set value, joined with ','
  std::string entry;              // the first --entry
  std::string loss;               // the first --loss
  std::vector<std::string> wrt;   // the first --wrt, split at ','
  bool grad = false;              // some RUN line says --grad
};

RunLineOptions readRunLines(std::string_view text);

}  // namespace llmc::fuzz
