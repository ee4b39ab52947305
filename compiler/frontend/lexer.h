// Tokens of the diagram language.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/source.h"

namespace llmc {

enum class Tok {
  Ident, Number, String,
  LParen, RParen, LBracket, RBracket, Comma, Colon, Assign, Arrow, Ellipsis,
  Plus, Minus, Star, Slash, Lt, Le, Gt, Ge, EqEq, NotEq,
  Newline, End,  // End: end of file
};

const char* tokName(Tok t);

struct Token {
  Tok kind;
  std::string text;
  SourceLoc loc;
};

// Splits a file into tokens. Newlines separate statements, except inside
// parentheses and brackets, where a statement may continue on the next line.
// '#' starts a comment that runs to the end of the line.
std::vector<Token> lex(const std::shared_ptr<const SourceFile>& file);

}  // namespace llmc
