#include "pretokenizer.h"

#include "unicode_classes.h"
#include "utf8.h"

namespace llmc {
namespace {

// Every character falls in exactly one class, so some alternative of the regex
// matches at every position and the pieces cover the text.
enum class CharClass { Letter, Number, Space, Other };

struct ClassifiedChar {
  CharClass cls;
  int length;  // in bytes
};

ClassifiedChar classifyAt(std::string_view text, size_t offset) {
  const Utf8Char c = decodeUtf8At(text, offset);
  if (!c.valid) return {CharClass::Other, 1};
  CharClass cls = CharClass::Other;
  if (isUnicodeLetter(c.codePoint)) {
    cls = CharClass::Letter;
  } else if (isUnicodeNumber(c.codePoint)) {
    cls = CharClass::Number;
  } else if (isUnicodeWhitespace(c.codePoint)) {
    cls = CharClass::Space;
  }
  return {cls, c.length};
}

// The end of the run of characters of class cls that starts at offset.
size_t endOfRun(std::string_view text, size_t offset, CharClass cls) {
  while (offset < text.size()) {
    const ClassifiedChar c = classifyAt(text, offset);
    if (c.cls != cls) break;
    offset += c.length;
  }
  return offset;
}

// 's 't 're 've 'm 'll 'd at offset (text[offset] == '\''): the length, or 0.
size_t contractionLength(std::string_view text, size_t offset) {
  const std::string_view rest = text.substr(offset + 1);
  for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
    if (rest.starts_with(suffix)) return 1 + suffix.size();
  }
  return 0;
}

// The end of the piece that starts at offset.
size_t endOfPiece(std::string_view text, size_t offset) {
  if (text[offset] == '\'') {
    if (size_t length = contractionLength(text, offset)) return offset + length;
  }
  const ClassifiedChar first = classifyAt(text, offset);
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: a run of one class, with
  // at most one leading U+0020 space.
  if (first.cls != CharClass::Space) return endOfRun(text, offset, first.cls);
  if (text[offset] == ' ' && offset + 1 < text.size()) {
    const ClassifiedChar next = classifyAt(text, offset + 1);
    if (next.cls != CharClass::Space) return endOfRun(text, offset + 1, next.cls);
  }
  // `\s+(?!\S)|\s+`: the whole run of spaces if it ends the text; otherwise
  // the run less its last character, which is left to lead the next piece
  // (`\s+(?!\S)` backtracks one character), or the single space if the run
  // has only one.
  size_t end = offset;
  size_t lastStart = offset;
  while (end < text.size()) {
    const ClassifiedChar c = classifyAt(text, end);
    if (c.cls != CharClass::Space) break;
    lastStart = end;
    end += c.length;
  }
  if (end == text.size() || lastStart == offset) return end;
  return lastStart;
}

}  // namespace

std::vector<std::string_view> splitPretokens(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t offset = 0; offset < text.size();) {
    const size_t end = endOfPiece(text, offset);
    pieces.push_back(text.substr(offset, end - offset));
    offset = end;
  }
  return pieces;
}

}  // namespace llmc
