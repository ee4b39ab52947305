// GPT-2's pre-tokenisation: the text is cut into pieces by the regex
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (first matching alternative at each position, as a backtracking engine does),
// implemented by hand on code points. BPE then runs within each piece only.
#pragma once

#include <string_view>
#include <vector>

namespace llmc {

// The pieces of text in order; they concatenate back to text exactly. Bytes
// that are not valid UTF-8 count as punctuation (neither letter, number nor
// space), one byte per character, so any byte string can be split.
std::vector<std::string_view> splitPretokens(std::string_view text);

}  // namespace llmc
