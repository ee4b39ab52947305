#include "frontend/parser.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "frontend/lexer.h"
#include "frontend/resource_limits.h"

namespace llmc {

namespace {

bool isKeyword(const std::string& s) {
  return s == "diagram" || s == "end" || s == "import" || s == "param" || s == "for" ||
         s == "in" || s == "and" || s == "or" || s == "not" || s == "require";
}

class Parser {
 public:
  explicit Parser(const std::shared_ptr<const SourceFile>& file) : tokens_(lex(file)) {
    module_.file = file;
  }

  Module run() {
    while (!at(Tok::End)) {
      if (accept(Tok::Newline)) continue;
      if (atKeyword("import")) {
        parseImport();
      } else if (atKeyword("diagram")) {
        module_.diagrams.push_back(parseDiagram());
      } else {
        error(peek(), fmt::format("expected 'diagram' or 'import', found {}", describe(peek())));
      }
    }
    return std::move(module_);
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool at(Tok k, size_t ahead = 0) const { return peek(ahead).kind == k; }
  bool atKeyword(const char* kw) const { return at(Tok::Ident) && peek().text == kw; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::Ident) return isKeyword(t.text) ? fmt::format("'{}'", t.text)
                                                       : fmt::format("name '{}'", t.text);
    if (t.kind == Tok::Number) return fmt::format("number {}", t.text);
    if (t.kind == Tok::String) return fmt::format("string \"{}\"", t.text);
    return tokName(t.kind);
  }
  // Where a token ends: the column just after it.
  static SourceLoc endOf(const Token& t) {
    SourceLoc loc = t.loc;
    if (t.kind == Tok::String) {
      loc.col += 2;  // the quotes
      for (unsigned char c : t.text) loc.col += (c & 0xC0) != 0x80;
    } else if (t.kind == Tok::Ident || t.kind == Tok::Number) {
      loc.col += static_cast<int>(t.text.size());
    } else if (t.kind != Tok::Newline && t.kind != Tok::End) {
      loc.col += static_cast<int>(std::strlen(tokName(t.kind))) - 2;  // tokName quotes it: "'->'"
    }
    return loc;
  }
  // The last token read before the current one, other than a line break.
  const Token* lastToken() const {
    for (size_t i = pos_; i-- > 0;)
      if (tokens_[i].kind != Tok::Newline) return &tokens_[i];
    return nullptr;
  }
  // An error at the end of the file is shown just after the last token.
  [[noreturn]] void error(const Token& t, const std::string& message, std::vector<std::string> notes = {}) {
    const Token* last = t.kind == Tok::End ? lastToken() : nullptr;
    throw CompileError(last ? endOf(*last) : t.loc, message, std::move(notes));
  }
  // "expected X, found Y". When Y is on a later line (inside brackets, where a
  // statement goes on across lines), the caret goes just after the last token:
  // that is where X is missing.
  [[noreturn]] void errorExpected(const std::string& what) {
    const Token& found = peek();
    if (pos_ > 0 && found.kind != Tok::End) {
      const Token& last = tokens_[pos_ - 1];
      if (last.kind != Tok::Newline && found.loc.line > last.loc.line)
        throw CompileError(endOf(last), fmt::format("expected {}, found {} on line {}", what, describe(found),
                                                    found.loc.line));
    }
    error(found, fmt::format("expected {}, found {}", what, describe(found)));
  }
  const Token& expect(Tok k, const char* what) {
    if (!at(k)) errorExpected(what);
    return next();
  }
  void expectKeyword(const char* kw) {
    if (!atKeyword(kw))
      error(peek(), fmt::format("expected '{}', found {}", kw, describe(peek())));
    next();
  }
  const Token& expectName(const char* what) {
    if (!at(Tok::Ident) || isKeyword(peek().text)) errorExpected(what);
    return next();
  }

  // Deeply nested text would overflow the stack, here and in the passes that
  // recurse over the tree: an expression (or size, or loop) may nest only so deep.
  static constexpr int kMaxNesting = 1000;
  struct Nest {
    Parser& parser;
    int saved;
    explicit Nest(Parser& p, bool oneDeeper = true) : parser(p), saved(p.nesting_) {
      if (oneDeeper) deeper();
    }
    ~Nest() { parser.nesting_ = saved; }
    void deeper() {  // one level more: a nested expression, or one more operator in a chain
      if (++parser.nesting_ > kMaxNesting)
        parser.error(parser.peek(), fmt::format("nested too deeply: more than {} levels of parentheses, "
                                                "calls, operators or loops", kMaxNesting));
    }
  };
  struct LoopNest {
    Parser& parser;
    explicit LoopNest(Parser& p) : parser(p) {
      if (++parser.loopNesting_ > kMaxLoopNesting)
        parser.error(parser.peek(), fmt::format("'for' loops nested more than {} deep", kMaxLoopNesting));
    }
    ~LoopNest() { --parser.loopNesting_; }
  };
  void expectEndOfLine() {
    if (!at(Tok::Newline) && !at(Tok::End))
      error(peek(), fmt::format("expected end of line, found {}", describe(peek())));
    accept(Tok::Newline);
  }

  // ---- declarations ----
  void parseImport() {
    SourceLoc loc = next().loc;
    const Token& path = expect(Tok::String, "a quoted file name after 'import'");
    module_.imports.push_back({path.text, loc});
    expectEndOfLine();
  }

  DiagramDecl parseDiagram() {
    DiagramDecl d;
    d.loc = next().loc;
    d.name = expectName("the diagram's name").text;
    expect(Tok::LParen, "'(' after the diagram's name");
    if (!at(Tok::RParen)) {
      do d.inputs.push_back(parsePort(true));
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen, "')' after the diagram's inputs");
    while (accept(Tok::Newline)) {}  // the outputs may start on the next line
    expect(Tok::Arrow, "'->' and the diagram's outputs");
    if (accept(Tok::LParen)) {
      do d.outputs.push_back(parsePort(false));
      while (accept(Tok::Comma));
      expect(Tok::RParen, "')' after the diagram's outputs");
    } else {
      d.outputs.push_back(parsePort(false));
    }
    expectEndOfLine();
    d.body = parseBody();
    d.endLoc = peek().loc;
    if (!atKeyword("end"))
      error(peek(), fmt::format("expected 'end' to close diagram '{}', found {}", d.name, describe(peek())),
            {fmt::format("{}: note: diagram '{}' starts here", d.loc.str(), d.name)});
    next();
    expectEndOfLine();
    return d;
  }

  Port parsePort(bool allowParam) {
    Port p;
    if (atKeyword("param")) {
      if (!allowParam) error(peek(), "an output cannot be a 'param'");
      next();
      p.isParam = true;
    }
    const Token& name = expectName("a port name");
    p.name = name.text;
    p.loc = name.loc;
    expect(Tok::Colon, "':' and a type after the port name");
    p.type = parseType();
    return p;
  }

  TypeSpec parseType() {
    TypeSpec t;
    const Token& dtype = expectName("a dtype such as f32 or bf16");
    t.dtype = dtype.text;
    t.loc = dtype.loc;
    expect(Tok::LBracket, "'[' and the axes of the type");
    while (!at(Tok::RBracket)) {
      if (at(Tok::Ellipsis)) {
        if (t.ellipsisAt >= 0) error(peek(), "'..' may appear only once in a type");
        t.ellipsisAt = static_cast<int>(t.axes.size());
        next();
        continue;
      }
      AxisSpec axis = parseAxisSpec();
      for (const auto& a : t.axes)
        if (a.name == axis.name)
          throw CompileError(axis.loc, fmt::format("axis '{}' appears twice in one type", axis.name));
      t.axes.push_back(std::move(axis));
    }
    next();
    return t;
  }

  AxisSpec parseAxisSpec() {
    AxisSpec a;
    const Token& name = expectName("an axis name");
    a.name = name.text;
    a.loc = name.loc;
    if (accept(Tok::Colon)) a.size = parseSizeExpr();
    return a;
  }

  SizeExpr parseSizeExpr() {
    Nest nest(*this);
    SizeExpr lhs = parseSizeTerm();
    while (at(Tok::Plus) || at(Tok::Minus)) {
      nest.deeper();
      const Token& op = next();
      lhs = sizeBinary(std::move(lhs), op, parseSizeTerm());
    }
    return lhs;
  }
  SizeExpr parseSizeTerm() {
    Nest nest(*this, false);
    SizeExpr lhs = parseSizeAtom();
    while (at(Tok::Star) || at(Tok::Slash)) {
      nest.deeper();
      const Token& op = next();
      lhs = sizeBinary(std::move(lhs), op, parseSizeAtom());
    }
    return lhs;
  }
  static SizeExpr sizeBinary(SizeExpr lhs, const Token& op, SizeExpr rhs) {
    SizeExpr e;
    e.kind = SizeExpr::Kind::Binary;
    e.op = op.kind == Tok::Plus ? '+' : op.kind == Tok::Minus ? '-' : op.kind == Tok::Star ? '*' : '/';
    e.loc = lhs.loc;
    e.lhs = std::make_shared<SizeExpr>(std::move(lhs));
    e.rhs = std::make_shared<SizeExpr>(std::move(rhs));
    return e;
  }
  SizeExpr parseSizeAtom() {
    SizeExpr e;
    e.loc = peek().loc;
    if (at(Tok::Number)) {
      const Token& t = next();
      if (t.text.find_first_not_of("0123456789") != std::string::npos)
        error(t, fmt::format("a size must be a whole number, found {}", t.text));
      e.kind = SizeExpr::Kind::Int;
      errno = 0;
      e.value = std::strtoll(t.text.c_str(), nullptr, 10);
      if (errno == ERANGE) error(t, fmt::format("size {} is too large", t.text));
      return e;
    }
    if (accept(Tok::LParen)) {
      e = parseSizeExpr();
      expect(Tok::RParen, "')'");
      return e;
    }
    e.kind = SizeExpr::Kind::Symbol;
    e.symbol = expectName("a size (a number or a size name such as T)").text;
    return e;
  }

  // ---- statements ----
  std::vector<Statement> parseBody() {
    std::vector<Statement> body;
    while (true) {
      if (accept(Tok::Newline)) continue;
      if (at(Tok::End) || atKeyword("end") || atKeyword("diagram")) return body;
      body.push_back(parseStatement());
    }
  }

  Statement parseStatement() {
    Statement s;
    s.loc = peek().loc;
    if (atKeyword("for")) {
      Nest nest(*this);
      // Each loop level multiplies what the body unrolls to and what every
      // node made inside records of where it came from.
      LoopNest loops(*this);
      const Token& forToken = next();
      s.kind = Statement::Kind::For;
      s.loopVar = expectName("a loop variable after 'for'").text;
      expectKeyword("in");
      const Token& axis = expectName("the axis to loop over");
      s.loopAxis.name = axis.text;
      s.loopAxis.loc = axis.loc;
      expectEndOfLine();
      s.body = parseBody();
      if (!atKeyword("end"))
        error(peek(), fmt::format("expected 'end' to close the 'for' loop, found {}", describe(peek())),
              {fmt::format("{}: note: the 'for' loop starts here", forToken.loc.str())});
      next();
      expectEndOfLine();
      return s;
    }
    if (atKeyword("require")) {  // a condition on the sizes, checked when they are bound
      next();
      s.kind = Statement::Kind::Require;
      s.value = parseExpr();
      expectEndOfLine();
      return s;
    }
    do {
      Statement::Target target;
      const Token& name = expectName("a name to assign");
      target.name = name.text;
      target.loc = name.loc;
      if (accept(Tok::Colon)) target.annotation = parseType();
      s.targets.push_back(std::move(target));
    } while (accept(Tok::Comma));
    expect(Tok::Assign, "'='");
    s.value = parseExpr();
    expectEndOfLine();
    return s;
  }

  // ---- expressions ----
  static ExprPtr makeExpr(Expr::Kind kind, SourceLoc loc) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->loc = std::move(loc);
    return e;
  }

  // Logical operators bind loosest, as in Python: `or`, then `and`, then
  // `not`, then a comparison (`not a < b and c` is `(not (a < b)) and c`).
  ExprPtr parseExpr() {
    Nest nest(*this);
    return parseLogicalChain(nest, "or", &Parser::parseAnd);
  }

  ExprPtr parseAnd() {
    Nest nest(*this, false);
    return parseLogicalChain(nest, "and", &Parser::parseNot);
  }

  // operand { word operand }, left to right; each operator one level deeper.
  ExprPtr parseLogicalChain(Nest& nest, const char* word, ExprPtr (Parser::*operand)()) {
    ExprPtr lhs = (this->*operand)();
    while (atKeyword(word)) {
      nest.deeper();
      auto e = makeExpr(Expr::Kind::Binary, next().loc);
      e->op = word;
      e->args = {lhs, (this->*operand)()};
      lhs = e;
    }
    return lhs;
  }

  ExprPtr parseNot() {
    Nest nest(*this, atKeyword("not"));
    if (!atKeyword("not")) return parseComparison();
    SourceLoc loc = next().loc;
    auto e = makeExpr(Expr::Kind::Unary, loc);
    e->op = "not";
    e->args = {parseNot()};
    return e;
  }

  ExprPtr parseComparison() {
    Nest nest(*this, false);
    ExprPtr lhs = parseAdditive();
    static const std::pair<Tok, const char*> kCompare[] = {
        {Tok::Lt, "<"}, {Tok::Le, "<="}, {Tok::Gt, ">"},
        {Tok::Ge, ">="}, {Tok::EqEq, "=="}, {Tok::NotEq, "!="}};
    for (const auto& [tok, text] : kCompare) {
      if (at(tok)) {
        SourceLoc loc = next().loc;
        auto e = makeExpr(Expr::Kind::Binary, loc);
        e->op = text;
        e->args = {lhs, parseAdditive()};
        return e;
      }
    }
    return lhs;
  }

  ExprPtr parseAdditive() {
    Nest nest(*this, false);
    ExprPtr lhs = parseTerm();
    while (at(Tok::Plus) || at(Tok::Minus)) {
      nest.deeper();  // a chain makes a tree as deep as it is long
      const Token& op = next();
      auto e = makeExpr(Expr::Kind::Binary, op.loc);
      e->op = op.kind == Tok::Plus ? "+" : "-";
      e->args = {lhs, parseTerm()};
      lhs = e;
    }
    return lhs;
  }

  ExprPtr parseTerm() {
    Nest nest(*this, false);
    ExprPtr lhs = parseUnary();
    while (at(Tok::Star) || at(Tok::Slash)) {
      nest.deeper();
      const Token& op = next();
      auto e = makeExpr(Expr::Kind::Binary, op.loc);
      e->op = op.kind == Tok::Star ? "*" : "/";
      e->args = {lhs, parseUnary()};
      lhs = e;
    }
    return lhs;
  }

  ExprPtr parseUnary() {
    Nest nest(*this, at(Tok::Minus));
    if (at(Tok::Minus)) {
      SourceLoc loc = next().loc;
      ExprPtr operand = parseUnary();
      if (operand->kind == Expr::Kind::Number) {  // a negative literal is one constant
        operand->number = -operand->number;
        operand->loc = loc;
        return operand;
      }
      auto e = makeExpr(Expr::Kind::Unary, loc);
      e->op = "-";
      e->args = {operand};
      return e;
    }
    return parsePostfix();
  }

  ExprPtr parsePostfix() {
    Nest nest(*this, false);
    ExprPtr base = parsePrimary();
    while (at(Tok::LBracket)) {
      nest.deeper();
      SourceLoc loc = next().loc;
      auto e = makeExpr(Expr::Kind::Index, loc);
      e->name = expectName("the axis to index, as in x[l=i]").text;
      expect(Tok::Assign, "'=' and a position, as in x[l=i]");
      e->args = {base, parseExpr()};
      expect(Tok::RBracket, "']'");
      base = e;
    }
    return base;
  }

  ExprPtr parsePrimary() {
    const Token& t = peek();
    if (t.kind == Tok::Number) {
      next();
      auto e = makeExpr(Expr::Kind::Number, t.loc);
      errno = 0;
      e->number = std::strtod(t.text.c_str(), nullptr);
      if (errno == ERANGE) error(t, fmt::format("number {} is out of range", t.text));
      e->isInteger = t.text.find_first_of(".eE") == std::string::npos;
      return e;
    }
    if (t.kind == Tok::LParen) {
      next();
      ExprPtr inner = parseExpr();
      expect(Tok::RParen, "')'");
      return inner;
    }
    const Token& name = expectName("a value, a number or a call");
    if (!at(Tok::LParen)) {
      auto e = makeExpr(Expr::Kind::Name, name.loc);
      e->name = name.text;
      return e;
    }
    next();
    auto call = makeExpr(Expr::Kind::Call, name.loc);
    call->name = name.text;
    if (!at(Tok::RParen)) {
      do call->args.push_back(parseArgument());
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen, fmt::format("')' to close the call of '{}'", name.text).c_str());
    return call;
  }

  // A call argument: an expression, an axis map `a b -> c d`, or a binding `x=v`.
  ExprPtr parseArgument() {
    bool axisMap = false;
    if (at(Tok::Ident)) {
      size_t k = 0;
      while (at(Tok::Ident, k)) ++k;
      axisMap = at(Tok::Arrow, k);
    }
    if (axisMap) {
      auto e = makeExpr(Expr::Kind::AxisMap, peek().loc);
      while (at(Tok::Ident)) {
        const Token& a = expectName("an axis name");
        e->from.push_back({a.text, std::nullopt, a.loc});
      }
      next();  // '->'
      if (!at(Tok::Ident)) error(peek(), fmt::format("expected the new axes after '->', found {}", describe(peek())));
      while (at(Tok::Ident)) e->to.push_back(parseAxisSpec());
      return e;
    }
    if (at(Tok::Ident) && at(Tok::Assign, 1)) {
      auto e = makeExpr(Expr::Kind::Binding, peek().loc);
      e->name = next().text;
      next();  // '='
      const Token& actual = expectName("an axis name after '='");
      e->to.push_back({actual.text, std::nullopt, actual.loc});
      return e;
    }
    return parseExpr();
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loopNesting_ = 0;  // LoopNest
  Module module_;
};

}  // namespace

Module parseModule(const std::shared_ptr<const SourceFile>& file) { return Parser(file).run(); }

}  // namespace llmc
