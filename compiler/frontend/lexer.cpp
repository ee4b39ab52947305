#include "frontend/lexer.h"

#include <fmt/format.h>

#include <cctype>

#include "frontend/resource_limits.h"

namespace llmc {

const char* tokName(Tok t) {
  switch (t) {
    case Tok::Ident: return "a name";
    case Tok::Number: return "a number";
    case Tok::String: return "a string";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Assign: return "'='";
    case Tok::Arrow: return "'->'";
    case Tok::Ellipsis: return "'..'";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::EqEq: return "'=='";
    case Tok::NotEq: return "'!='";
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of file";
  }
  return "?";
}

namespace {

class Lexer {
 public:
  explicit Lexer(const std::shared_ptr<const SourceFile>& file) : file_(file), s_(file->text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    int depth = 0;
    while (true) {
      skipSpaceAndComments();
      if (i_ >= s_.size()) break;
      SourceLoc loc = here();
      char c = s_[i_];
      if (c == '\n') {
        advance();
        if (depth == 0 && !out.empty() && out.back().kind != Tok::Newline)
          out.push_back({Tok::Newline, "\n", loc});
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t start = i_;
        while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
          advance();
        // A name's length bounds the work on it (the "did you mean" search
        // compares it with every name in scope).
        if (i_ - start > kMaxNameLength)
          throw CompileError(loc, fmt::format("name is {} characters long, more than the limit of {}", i_ - start,
                                              kMaxNameLength));
        out.push_back({Tok::Ident, s_.substr(start, i_ - start), loc});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        out.push_back({Tok::Number, number(), loc});
        continue;
      }
      if (c == '"') {
        out.push_back({Tok::String, string(loc), loc});
        continue;
      }
      Tok kind = punctuation(loc);
      if (kind == Tok::LParen || kind == Tok::LBracket) ++depth;
      if ((kind == Tok::RParen || kind == Tok::RBracket) && depth > 0) --depth;
      out.push_back({kind, std::string(), loc});
    }
    if (!out.empty() && out.back().kind != Tok::Newline) out.push_back({Tok::Newline, "\n", here()});
    out.push_back({Tok::End, "", here()});
    return out;
  }

 private:
  SourceLoc here() const { return SourceLoc{file_, line_, col_}; }

  void advance() {
    unsigned char c = static_cast<unsigned char>(s_[i_++]);
    if (c == '\n') {
      ++line_;
      col_ = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++col_;  // count code points, not bytes
    }
  }

  void skipSpaceAndComments() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  std::string number() {
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) advance();
    if (i_ < s_.size() && s_[i_] == '.' && !(i_ + 1 < s_.size() && s_[i_ + 1] == '.')) {
      advance();
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) advance();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      size_t save = i_;
      int saveLine = line_, saveCol = col_;
      advance();
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) advance();
      if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) advance();
      } else {
        i_ = save, line_ = saveLine, col_ = saveCol;  // 'e' starts a name, not an exponent
      }
    }
    return s_.substr(start, i_ - start);
  }

  std::string string(const SourceLoc& loc) {
    advance();  // opening quote
    std::string value;
    while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\n') {
      value += s_[i_];
      advance();
    }
    if (i_ >= s_.size() || s_[i_] != '"') throw CompileError(loc, "unterminated string");
    advance();
    return value;
  }

  Tok punctuation(const SourceLoc& loc) {
    char c = s_[i_];
    char n = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
    auto two = [&](Tok t) { advance(); advance(); return t; };
    auto one = [&](Tok t) { advance(); return t; };
    switch (c) {
      case '(': return one(Tok::LParen);
      case ')': return one(Tok::RParen);
      case '[': return one(Tok::LBracket);
      case ']': return one(Tok::RBracket);
      case ',': return one(Tok::Comma);
      case ':': return one(Tok::Colon);
      case '+': return one(Tok::Plus);
      case '*': return one(Tok::Star);
      case '/': return one(Tok::Slash);
      case '-': return n == '>' ? two(Tok::Arrow) : one(Tok::Minus);
      case '.':
        if (n == '.') return two(Tok::Ellipsis);
        break;
      case '<': return n == '=' ? two(Tok::Le) : one(Tok::Lt);
      case '>': return n == '=' ? two(Tok::Ge) : one(Tok::Gt);
      case '=': return n == '=' ? two(Tok::EqEq) : one(Tok::Assign);
      case '!':
        if (n == '=') return two(Tok::NotEq);
        break;
      default: break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80) throw CompileError(loc, "unexpected non-ASCII character outside a comment or string");
    if (!std::isprint(u)) throw CompileError(loc, fmt::format("unexpected control character (byte 0x{:02x})", u));
    throw CompileError(loc, fmt::format("unexpected character '{}'", c));
  }

  std::shared_ptr<const SourceFile> file_;
  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

std::vector<Token> lex(const std::shared_ptr<const SourceFile>& file) { return Lexer(file).run(); }

}  // namespace llmc
