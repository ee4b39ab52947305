#include "frontend/source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "frontend/resource_limits.h"

namespace llmc {

SourceFile::SourceFile(std::string p, std::string t) : path(std::move(p)), text(std::move(t)) {
  lineStarts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') lineStarts.push_back(i + 1);
}

std::string SourceFile::line(int lineNumber) const {
  if (lineNumber < 1 || static_cast<size_t>(lineNumber) > lineStarts.size()) return {};
  size_t begin = lineStarts[static_cast<size_t>(lineNumber - 1)];
  size_t end = text.find('\n', begin);
  if (end == std::string::npos) end = text.size();
  if (end > begin && text[end - 1] == '\r') --end;
  return text.substr(begin, end - begin);
}

std::string SourceLoc::str() const {
  if (!valid()) return file ? file->path : std::string("<unknown>");
  return fmt::format("{}:{}:{}", file->path, line, col);
}

// The length of the valid UTF-8 sequence at s[i], or 0 if it is not valid.
static size_t utf8Length(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return len;
}

std::string renderDiagnostic(const SourceLoc& loc, const std::string& severity,
                             const std::string& message) {
  std::string out = fmt::format("{}: {}: {}\n", loc.str(), severity, message);
  if (loc.valid()) {
    // Shown with each byte that is not valid UTF-8, and each control character
    // but a tab, as '?': the terminal gets plain text, one column per column.
    std::string raw = loc.file->line(loc.line), text;
    for (size_t i = 0; i < raw.size();) {
      size_t len = utf8Length(raw, i);
      unsigned char c = static_cast<unsigned char>(raw[i]);
      bool control = len == 1 && (c < 0x20 || c == 0x7F) && c != '\t';
      text += len && !control ? raw.substr(i, len) : std::string("?");
      i += len ? len : 1;
    }
    // The caret goes under the col-th code point; tabs are kept so it lines up.
    std::string pad;
    int codePoint = 1;
    for (size_t i = 0; i < text.size() && codePoint < loc.col; ++i) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte
      pad += (c == '\t') ? '\t' : ' ';
      ++codePoint;
    }
    out += fmt::format("  {}\n  {}^\n", text, pad);
  }
  return out;
}

static std::string renderError(const SourceLoc& loc, const std::string& message,
                               const std::vector<std::string>& notes) {
  std::string out = renderDiagnostic(loc, "error", message);
  for (const auto& n : notes) out += n + "\n";
  return out;
}

CompileError::CompileError(SourceLoc loc, std::string message, std::vector<std::string> notes)
    : std::runtime_error(renderError(loc, message, notes)),
      loc_(std::move(loc)),
      message_(std::move(message)) {}

std::string didYouMean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t bestDistance = std::max<size_t>(1, name.size() / 3) + 1;  // farther is no misspelling
  for (const auto& c : candidates) {
    if (c == name) continue;
    // The distance is at least the difference in length: a candidate that
    // cannot come closer than the best so far is not compared at all.
    const size_t longer = std::max(c.size(), name.size()), shorter = std::min(c.size(), name.size());
    if (longer - shorter >= bestDistance) continue;
    std::vector<size_t> row(c.size() + 1);  // Levenshtein distance, one row at a time
    for (size_t j = 0; j <= c.size(); ++j) row[j] = j;
    bool far = false;
    for (size_t i = 1; i <= name.size() && !far; ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      size_t rowMin = row[0];
      for (size_t j = 1; j <= c.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (name[i - 1] == c[j - 1] ? 0 : 1)});
        diagonal = up;
        rowMin = std::min(rowMin, row[j]);
      }
      far = rowMin >= bestDistance;  // a row's least entry never falls further down
    }
    if (!far && row[c.size()] < bestDistance && row[c.size()] < name.size()) {
      bestDistance = row[c.size()];
      best = &c;
    }
  }
  return best ? fmt::format("; did you mean '{}'?", *best) : std::string();
}

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
static size_t firstInvalidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8Length(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string::npos;
}

namespace {

// Why `path` cannot be read as a diagram file, or "" if it can: it must be a
// regular file (a device such as /dev/zero, a FIFO or a terminal would be read
// forever, or block) of at most kMaxSourceBytes.
std::string unreadableBecause(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return "no such file";
  if (ec) return "it cannot be read";
  if (status.type() == std::filesystem::file_type::directory) return "it is a directory";
  if (status.type() != std::filesystem::file_type::regular) return "it is not a regular file";
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return "it cannot be read";
  if (bytes > static_cast<uintmax_t>(kMaxSourceBytes))
    return fmt::format("it is larger than {} MiB", kMaxSourceBytes >> 20);
  return "";
}

[[noreturn]] void refuse(const std::string& path, const SourceLoc& from, const std::string& why) {
  if (!from.valid())
    throw CompileError(SourceLoc{std::make_shared<SourceFile>(path, ""), 0, 0},
                       fmt::format("cannot open file: {}", why));
  throw CompileError(from, fmt::format("cannot open imported file '{}': {}", path, why));
}

}  // namespace

std::shared_ptr<const SourceFile> loadSourceFile(const std::string& path, const SourceLoc& from) {
  if (std::string why = unreadableBecause(path); !why.empty()) refuse(path, from, why);
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(path, from, "it cannot be read");
  // Read at most one byte past the limit: a file that grew since it was
  // looked at is still refused, not read whole.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= static_cast<size_t>(kMaxSourceBytes) && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxSourceBytes))
    refuse(path, from, fmt::format("it is larger than {} MiB", kMaxSourceBytes >> 20));
  auto file = std::make_shared<SourceFile>(path, std::move(text));
  size_t bad = firstInvalidUtf8(file->text);
  if (bad != std::string::npos) {
    // Point at the bad byte; the column counts code points, as everywhere.
    int line = 1, col = 1;
    for (size_t i = 0; i < bad; ++i) {
      unsigned char c = static_cast<unsigned char>(file->text[i]);
      if (c == '\n') ++line, col = 1;
      else if ((c & 0xC0) != 0x80) ++col;
    }
    throw CompileError(SourceLoc{file, line, col},
                       fmt::format("file is not valid UTF-8 (byte 0x{:02x})",
                                   static_cast<unsigned char>(file->text[bad])));
  }
  bool blank = file->text.find_first_not_of(" \t\r\n") == std::string::npos;
  if (blank) throw CompileError(SourceLoc{file, 0, 0}, "file is empty: expected at least one diagram");
  return file;
}

}  // namespace llmc
