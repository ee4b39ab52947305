#include "unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace llmc {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

#include "unicode_ranges.inc"

template <size_t N>
bool inRanges(const CodePointRange (&ranges)[N], char32_t codePoint) {
  // The first range whose last is >= codePoint is the only one that can hold it.
  const auto* it = std::lower_bound(std::begin(ranges), std::end(ranges), codePoint,
                                    [](const CodePointRange& r, char32_t c) { return r.last < c; });
  return it != std::end(ranges) && it->first <= codePoint;
}

}  // namespace

bool isUnicodeLetter(char32_t codePoint) {
  if (codePoint < 0x80) {
    return (codePoint >= 'a' && codePoint <= 'z') || (codePoint >= 'A' && codePoint <= 'Z');
  }
  return inRanges(kLetterRanges, codePoint);
}

bool isUnicodeNumber(char32_t codePoint) {
  if (codePoint < 0x80) return codePoint >= '0' && codePoint <= '9';
  return inRanges(kNumberRanges, codePoint);
}

bool isUnicodeWhitespace(char32_t codePoint) {
  // PropList.txt, White_Space (unchanged since Unicode 6.3).
  switch (codePoint) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2000: case 0x2001: case 0x2002: case 0x2003: case 0x2004: case 0x2005:
    case 0x2006: case 0x2007: case 0x2008: case 0x2009: case 0x200A:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return false;
  }
}

}  // namespace llmc
