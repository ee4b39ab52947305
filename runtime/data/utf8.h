// Strict UTF-8 decoding and encoding, the way Python's codec does it: overlong
// forms, surrogates and code points past U+10FFFF are invalid.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace llmc {

struct Utf8Char {
  char32_t codePoint;  // meaningless when !valid
  int length;          // bytes consumed: 1 for an invalid byte
  bool valid;
};

// The character starting at text[offset] (offset < text.size()). A byte that
// does not start a complete, valid sequence is returned alone as invalid, so
// that a caller can step over any input one unit at a time.
Utf8Char decodeUtf8At(std::string_view text, size_t offset);

// Appends the UTF-8 encoding of a valid code point (not a surrogate, <= U+10FFFF).
void appendUtf8(std::string& out, char32_t codePoint);

}  // namespace llmc
