// The Unicode character classes of GPT-2's pre-tokenisation regex, for code
// points: \p{L} (letters), \p{N} (numbers) and \s (whitespace).
#pragma once

namespace llmc {

// General category L* (Lu Ll Lt Lm Lo).
bool isUnicodeLetter(char32_t codePoint);
// General category N* (Nd Nl No).
bool isUnicodeNumber(char32_t codePoint);
// The White_Space property, which is what \s means in Unicode regex engines
// (Python's `regex`, as GPT-2 used, and Rust's, as tiktoken uses).
bool isUnicodeWhitespace(char32_t codePoint);

}  // namespace llmc
