#include "canonical_kernel.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace llmc::cuda {

// Why equal forms mean the same program.
//
// The tokenizer accepts printable ASCII, blanks and newlines only, so the
// bytes \x01 (around a placeholder's number) and \x02 (a newline inside a
// block comment) never come from the source: the form reads back into the
// source's token sequence, with each renamed identifier's placeholder and
// whether blanks (or a comment, which C++ turns into a space) stood between
// two tokens, on which line. That is all the preprocessor and the compiler
// see of a source, but for the names; and comments and the width of blanks
// do not change a program.
//
// The renaming within one source is one-to-one: placeholder n is the n-th
// distinct renamed identifier, placeholder-of-`name` plus a suffix is `name`
// plus that suffix, and a kept identifier is never a renamed one. So equal
// forms pair each identifier of one source with exactly one of the other, and
// that pairing is a bijection that maps the entry point to the entry point.
// A bijective renaming of the names a program declares itself changes nothing
// it computes, provided that
//   - the renamed names are the source's own: declared in it (a name used
//     only as a header's would pair two different functions of the header),
//     not upper-case macros of the headers, and not members reached with
//     `.`, `->` or `::` (a renamed member of a local struct could pair with
//     another member, the access being kept as written); a name that appears
//     after one of those is kept everywhere;
//   - no name becomes text: the # and ## operators, which make strings and
//     names of names, end the canonical form;
//   - nothing outside the program looks a name up: the JIT launches the class
//     through the compiled source's own entry point.
// One assumption remains: a name the source declares is not also a header's
// name that the source uses outside the declaration's scope. The emitter
// numbers its names after graph nodes (`<stem>_<node>`), which llmc's device
// headers and CUDA's do not.

namespace {

enum class Kind { Identifier, Literal, Number, Punct, HeaderName, Blank };

struct Token {
  Kind kind;
  std::string_view text;   // into the source; empty for Blank
  bool directive = false;  // on a preprocessor directive's line
  std::string blank = {};  // a Blank's canonical form: " ", or its newlines and \x02s in order
};

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Keywords and CUDA specifiers after which a name is not being declared (it
// is a type, an operand, a label ...); the type keywords and __restrict__,
// after which a declarator comes, are not listed.
const std::set<std::string_view>& nonDeclaringWords() {
  static const std::set<std::string_view> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "__asm__", "bitand", "bitor", "break", "case", "catch", "class",
      "co_await", "co_return", "co_yield", "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "decltype", "default", "delete", "do", "dynamic_cast", "else", "enum", "explicit",
      "export", "extern", "false", "for", "friend", "goto", "if", "import", "inline", "module", "mutable",
      "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
      "public", "register", "reinterpret_cast", "requires", "return", "sizeof", "static", "static_assert",
      "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef",
      "typeid", "typename", "union", "using", "virtual", "volatile", "while", "xor", "xor_eq", "__device__",
      "__global__", "__host__", "__forceinline__", "__noinline__", "__shared__", "__constant__", "__managed__",
      "__grid_constant__", "__launch_bounds__", "__inline__", "__volatile__", "_Pragma"};
  return words;
}

const std::set<std::string_view>& builtinTypes() {
  static const std::set<std::string_view> words = {"bool", "char", "char8_t", "char16_t", "char32_t", "double",
                                                   "float", "int", "long", "short", "signed", "unsigned",
                                                   "void", "wchar_t", "auto"};
  return words;
}

// `g_qkv_200`, `tm_q_202`: `_<digits>` after a stem with a lower-case letter.
bool numbered(std::string_view id) {
  size_t end = id.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(id[end - 1]))) --end;
  if (end == id.size() || end < 2 || id[end - 1] != '_') return false;
  const std::string_view stem = id.substr(0, end - 1);
  if (stem.starts_with('_') || stem.find("__") != std::string_view::npos) return false;  // reserved: the toolkit's
  for (char c : stem)
    if (std::islower(static_cast<unsigned char>(c))) return true;
  return false;
}

// The source's tokens with blanks between them, or nothing where it holds
// something the form cannot vouch for.
std::optional<std::vector<Token>> tokenize(std::string_view s) {
  std::vector<Token> tokens;
  std::string blanks;    // the blank run being read, canonical
  bool inBlank = false;  // inside a run of blanks and comments
  bool lineStart = true, directive = false, afterInclude = false;
  auto flushBlank = [&] {
    if (!inBlank) return;
    tokens.push_back({Kind::Blank, {}, directive, blanks.empty() ? std::string(" ") : blanks});
    blanks.clear();
    inBlank = false;
  };
  size_t i = 0;
  auto push = [&](Kind kind, size_t from) {
    flushBlank();
    tokens.push_back({kind, s.substr(from, i - from), directive});
    lineStart = false;
  };
  // A quoted literal from s[i] (the quote), escapes and all; false if unterminated on its line.
  auto literal = [&]() {
    const char quote = s[i++];
    while (i < s.size() && s[i] != quote) {
      if (s[i] == '\n') return false;
      if (s[i] == '\\') ++i;
      ++i;
    }
    if (i >= s.size()) return false;
    ++i;
    return true;
  };
  while (i < s.size()) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x7f || (u < 0x20 && !std::isspace(u))) return std::nullopt;
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || s[i + 1] == '\r')) return std::nullopt;  // a splice
    if (c == '\n') {
      inBlank = true;
      blanks += '\n';
      lineStart = true;
      directive = afterInclude = false;
      ++i;
    } else if (std::isspace(u)) {
      inBlank = true;
      ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      inBlank = true;
      while (i < s.size() && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || s[i + 1] == '\r')) return std::nullopt;
        ++i;
      }
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t close = s.find("*/", i + 2);
      if (close == std::string_view::npos) return std::nullopt;
      inBlank = true;
      for (size_t k = i + 2; k < close; ++k)
        if (s[k] == '\n') blanks += '\x02';
      i = close + 2;
    } else if (c == '"' || c == '\'') {
      const size_t from = i;
      if (!literal()) return std::nullopt;
      push(Kind::Literal, from);
    } else if (afterInclude && c == '<') {
      const size_t close = s.find('>', i);
      if (close == std::string_view::npos || s.substr(i, close - i).find('\n') != std::string_view::npos) return std::nullopt;
      const size_t from = i;
      i = close + 1;
      push(Kind::HeaderName, from);
    } else if (identStart(c)) {
      const size_t from = i;
      while (i < s.size() && identChar(s[i])) ++i;
      const std::string_view id = s.substr(from, i - from);
      static constexpr std::array<std::string_view, 5> kRawPrefixes = {"R", "u8R", "uR", "UR", "LR"};
      if (i < s.size() && s[i] == '"' && std::find(kRawPrefixes.begin(), kRawPrefixes.end(), id) != kRawPrefixes.end())
        return std::nullopt;
      const bool wasHash = !tokens.empty() && tokens.back().kind == Kind::Punct && tokens.back().text == "#";
      push(Kind::Identifier, from);
      afterInclude = directive && wasHash && id == "include";
    } else if (std::isdigit(u) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      // A pp-number: digits, letters, _, ., ' and exponent signs.
      const size_t from = i++;
      while (i < s.size()) {
        const char d = s[i];
        if ((d == '+' || d == '-') && std::string_view("eEpP").find(s[i - 1]) != std::string_view::npos) ++i;
        else if (identChar(d) || d == '.' || (d == '\'' && i + 1 < s.size() && identChar(s[i + 1]))) ++i;
        else break;
      }
      push(Kind::Number, from);
    } else {
      // # makes a directive at the start of a line; anywhere else (or as %:) it is an operator on names.
      if (c == '#') {
        if (!lineStart) return std::nullopt;
        directive = true;
      }
      if (c == '%' && i + 1 < s.size() && s[i + 1] == ':') return std::nullopt;
      if (c == '$' || c == '@' || c == '`') return std::nullopt;  // not C++; $ may join a name
      const size_t from = i++;
      push(Kind::Punct, from);
    }
  }
  flushBlank();
  return tokens;
}

}  // namespace

std::optional<std::string> canonicalKernelSource(std::string_view source, std::string_view name) {
  std::optional<std::vector<Token>> lexed = tokenize(source);
  if (!lexed) return std::nullopt;
  const std::vector<Token>& tokens = *lexed;

  // Which names the source declares, and which it reaches as members.
  std::set<std::string_view> declared, members;
  const Token* prev = nullptr;   // the previous token that is not blank
  const Token* prev2 = nullptr;  // the one before it
  for (size_t k = 0; k < tokens.size(); ++k) {
    const Token& t = tokens[k];
    if (t.kind == Kind::Blank) continue;
    if (t.kind == Kind::Identifier && prev) {
      const Token* next = nullptr;
      for (size_t n = k + 1; n < tokens.size() && !next; ++n)
        if (tokens[n].kind != Kind::Blank) next = &tokens[n];
      const std::string_view before = prev->text;
      const bool memberAccess = prev->kind == Kind::Punct &&
                                (before == "." || (before == ":" && prev2 && prev2->text == ":") ||
                                 (before == ">" && prev2 && prev2->text == "-"));
      if (memberAccess || (prev->kind == Kind::Identifier && before == "template")) members.insert(t.text);
      if (t.directive) {
        // #define NAME: the macro's name is declared; nothing else on a directive's line is.
        if (prev->kind == Kind::Identifier && before == "define" && prev2 && prev2->text == "#") declared.insert(t.text);
      } else if (prev->kind == Kind::Identifier && !prev->directive) {
        const bool definesType = (before == "struct" || before == "class" || before == "union" || before == "enum") &&
                                 next && (next->text == "{" || next->text == ":");
        const bool aliases = before == "using" && next && next->text == "=";
        if (!nonDeclaringWords().contains(before) || definesType || aliases) declared.insert(t.text);
      } else if (prev->kind == Kind::Punct && (before == "*" || before == "&") && prev2 &&
                 builtinTypes().contains(prev2->text)) {
        // `float* p`: after another name the * could be a product (`a * b`), after a type keyword not.
        declared.insert(t.text);
      }
    }
    prev2 = prev;
    prev = &t;
  }

  std::map<std::string_view, size_t> placeholders;
  auto placeholder = [&](std::string_view id) {
    const auto [it, added] = placeholders.try_emplace(id, placeholders.size());
    return "\x01" + std::to_string(it->second) + "\x01";
  };
  std::string out;
  out.reserve(source.size());
  for (const Token& t : tokens) {
    if (t.kind != Kind::Identifier) {
      out += t.kind == Kind::Blank ? std::string_view(t.blank) : t.text;
      continue;
    }
    const std::string_view id = t.text;
    const bool own = declared.contains(id) && !members.contains(id);
    if (id == name && !members.contains(id)) out += placeholder(id);
    else if (own && numbered(id)) out += placeholder(id);
    else if (own && !name.empty() && id.size() > name.size() + 1 && id.starts_with(name) && id[name.size()] == '_')
      out += placeholder(name) + std::string(id.substr(name.size()));
    else out += id;
  }
  return out;
}

}  // namespace llmc::cuda
