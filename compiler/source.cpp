#include "source.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

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

std::string renderDiagnostic(const SourceLoc& loc, const std::string& severity,
                             const std::string& message) {
  std::string out = fmt::format("{}: {}: {}\n", loc.str(), severity, message);
  if (loc.valid()) {
    std::string text = loc.file->line(loc.line);
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

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
static size_t firstInvalidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) return i;
    for (int k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xC0) != 0x80) return i;
    i += static_cast<size_t>(len);
  }
  return std::string::npos;
}

std::shared_ptr<const SourceFile> loadSourceFile(const std::string& path, const SourceLoc& from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    SourceLoc where = from.valid() ? from : SourceLoc{};
    if (!from.valid())
      throw CompileError(SourceLoc{std::make_shared<SourceFile>(path, ""), 0, 0},
                         "cannot open file");
    throw CompileError(where, fmt::format("cannot open imported file '{}'", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto file = std::make_shared<SourceFile>(path, buffer.str());
  size_t bad = firstInvalidUtf8(file->text);
  if (bad != std::string::npos) {
    // Point at the line of the bad byte; the column counts bytes before it.
    int line = 1;
    size_t lineStart = 0;
    for (size_t i = 0; i < bad; ++i)
      if (file->text[i] == '\n') ++line, lineStart = i + 1;
    throw CompileError(SourceLoc{file, line, static_cast<int>(bad - lineStart) + 1},
                       "file is not valid UTF-8");
  }
  bool blank = file->text.find_first_not_of(" \t\r\n") == std::string::npos;
  if (blank) throw CompileError(SourceLoc{file, 0, 0}, "file is empty: expected at least one diagram");
  return file;
}

}  // namespace llmc
