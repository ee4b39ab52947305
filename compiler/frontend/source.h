// Source text, locations in it, and the diagnostics that point into it.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmc {

// A loaded diagram file. Shared so that locations can outlive the parser.
struct SourceFile {
  std::string path;  // as given by the user (printed in diagnostics)
  std::string text;
  std::vector<size_t> lineStarts;  // byte offset of each line

  SourceFile(std::string path, std::string text);
  std::string line(int lineNumber) const;  // 1-based, without newline
};

struct SourceLoc {
  std::shared_ptr<const SourceFile> file;
  int line = 0;  // 1-based; 0 means "no location"
  int col = 0;   // 1-based, in characters (UTF-8 code points)

  bool valid() const { return file && line > 0; }
  std::string str() const;  // "file:line:col"
};

// A compile error with its location. what() is the full rendered diagnostic:
//   file:line:col: error: message
//     the offending line
//         ^
// followed by "note:" lines (for example the call chain through composites).
class CompileError : public std::runtime_error {
 public:
  CompileError(SourceLoc loc, std::string message, std::vector<std::string> notes = {});
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

std::string renderDiagnostic(const SourceLoc& loc, const std::string& severity,
                             const std::string& message);

// A hint for a misspelt name: "; did you mean 'softmax'?" with the closest of
// `candidates` (by edit distance), or "" when none is close enough.
std::string didYouMean(const std::string& name, const std::vector<std::string>& candidates);

// Reads a diagram file: refuses one that is missing, empty or not UTF-8.
// `from` is where the file was asked for (an import), if anywhere.
std::shared_ptr<const SourceFile> loadSourceFile(const std::string& path,
                                                 const SourceLoc& from = {});

}  // namespace llmc
