#include "utf8.h"

namespace llmc {
namespace {

bool isContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

Utf8Char decodeUtf8At(std::string_view text, size_t offset) {
  const auto byteAt = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byteAt(offset);
  const Utf8Char invalid{0, 1, false};
  if (lead < 0x80) return {lead, 1, true};

  int length;
  char32_t codePoint;
  // The allowed range of the second byte excludes overlong forms (E0, F0),
  // surrogates (ED) and code points past U+10FFFF (F4).
  unsigned char secondMin = 0x80, secondMax = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    codePoint = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    codePoint = lead & 0x0F;
    if (lead == 0xE0) secondMin = 0xA0;
    if (lead == 0xED) secondMax = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    codePoint = lead & 0x07;
    if (lead == 0xF0) secondMin = 0x90;
    if (lead == 0xF4) secondMax = 0x8F;
  } else {
    return invalid;
  }
  if (offset + length > text.size()) return invalid;
  const unsigned char second = byteAt(offset + 1);
  if (second < secondMin || second > secondMax) return invalid;
  for (int i = 1; i < length; ++i) {
    const unsigned char byte = byteAt(offset + i);
    if (!isContinuation(byte)) return invalid;
    codePoint = (codePoint << 6) | (byte & 0x3F);
  }
  return {codePoint, length, true};
}

void appendUtf8(std::string& out, char32_t codePoint) {
  const auto put = [&](unsigned value) { out.push_back(static_cast<char>(value)); };
  if (codePoint < 0x80) {
    put(codePoint);
  } else if (codePoint < 0x800) {
    put(0xC0 | (codePoint >> 6));
    put(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    put(0xE0 | (codePoint >> 12));
    put(0x80 | ((codePoint >> 6) & 0x3F));
    put(0x80 | (codePoint & 0x3F));
  } else {
    put(0xF0 | (codePoint >> 18));
    put(0x80 | ((codePoint >> 12) & 0x3F));
    put(0x80 | ((codePoint >> 6) & 0x3F));
    put(0x80 | (codePoint & 0x3F));
  }
}

}  // namespace llmc
