// Template structure: text, {{ output }}, and the block tags.
#include "chat/jinja/parser_impl.h"

namespace tachyon::chat::jinja {

Body Parser::parse_all() {
  std::string end;
  Body body = parse_body({}, end);
  return body;
}

void Parser::advance() {
  if (pos_ + 1 < tokens_.size()) ++pos_;
}

void Parser::fail_at(const std::string& message, const Token& t) {
  throw TemplateError(ErrorKind::kSyntax, message, t.line, t.column);
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof: return "end of template";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kName:
    case TokenType::kOperator: return "'" + t.text + "'";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    default: return "token";
  }
}

void Parser::expect_op(const char* op) {
  if (!is_op(op)) fail(fmt::format("expected token '{}', got {}", op, describe(cur())));
  advance();
}

std::string Parser::expect_name() {
  if (cur().type != TokenType::kName) fail(fmt::format("expected token 'name', got {}", describe(cur())));
  std::string n = cur().text;
  advance();
  return n;
}

void Parser::expect_block_end() {
  if (cur().type != TokenType::kBlockEnd)
    fail(fmt::format("expected token 'end of statement block', got {}", describe(cur())));
  advance();
}

ExprPtr Parser::make(ExprKind kind, const Token& at) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->column = at.column;
  return e;
}

// Parses until a block tag whose name is in `end_tags` (left unconsumed except for its
// `{%` and name; `end` receives the name) or until EOF when end_tags is empty.
Body Parser::parse_body(std::initializer_list<const char*> end_tags, std::string& end) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::kEof) {
      if (end_tags.size() == 0) return body;
      std::string names;
      for (const char* n : end_tags) names += (names.empty() ? "'" : " or '") + std::string(n) + "'";
      fail(fmt::format("Unexpected end of template. Jinja was looking for the following tags: {}.", names));
    }
    if (t.type == TokenType::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->column = t.column;
      s->text = t.text;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == TokenType::kVariableBegin) {
      advance();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = cur().line;
      s->column = cur().column;
      s->expr = parse_tuple(true, {});
      if (cur().type != TokenType::kVariableEnd)
        fail(fmt::format("expected token 'end of print statement', got {}", describe(cur())));
      advance();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& name = peek();
      if (name.type == TokenType::kName) {
        for (const char* tag : end_tags) {
          if (name.text == tag) {
            advance();
            advance();
            end = tag;
            return body;
          }
        }
      }
      advance();
      body.push_back(parse_statement());
    } else {
      fail(fmt::format("unexpected {}", describe(t)));
    }
  }
}

StmtPtr Parser::new_stmt(StmtKind kind, const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = at.line;
  s->column = at.column;
  return s;
}

StmtPtr Parser::parse_statement() {
  const Token tag = cur();
  if (tag.type != TokenType::kName) fail("tag name expected");
  const std::string& n = tag.text;
  if (n == "if") return parse_if();
  if (n == "for") return parse_for();
  if (n == "set") return parse_set();
  if (n == "macro") return parse_macro();
  if (n == "call") return parse_call_block();
  if (n == "filter") return parse_filter_block();
  if (n == "with") return parse_with();
  if (n == "break" || n == "continue") {
    advance();
    auto s = new_stmt(n == "break" ? StmtKind::kBreak : StmtKind::kContinue, tag);
    expect_block_end();
    return s;
  }
  if (n == "generation") {
    advance();
    expect_block_end();
    auto s = new_stmt(StmtKind::kGeneration, tag);
    std::string end;
    s->body = parse_body({"endgeneration"}, end);
    expect_block_end();
    return s;
  }
  fail(fmt::format("Encountered unknown tag '{}'.", n));
}

StmtPtr Parser::parse_if() {
  auto s = new_stmt(StmtKind::kIf, cur());
  advance();
  while (true) {
    s->conditions.push_back(parse_tuple(false, {}));
    expect_block_end();
    std::string end;
    s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
    if (end == "elif") continue;
    if (end == "else") {
      expect_block_end();
      s->else_body = parse_body({"endif"}, end);
    }
    expect_block_end();
    return s;
  }
}

StmtPtr Parser::parse_for() {
  auto s = new_stmt(StmtKind::kFor, cur());
  advance();
  s->target = parse_assign_target(false, {"in"});
  if (!is_name("in")) fail(fmt::format("expected token 'in', got {}", describe(cur())));
  advance();
  s->expr = parse_tuple(false, {"recursive"});
  if (is_name("recursive")) {
    s->recursive = true;
    advance();
  }
  if (is_name("if")) {
    advance();
    s->cond = parse_expression(true);
  }
  expect_block_end();
  std::string end;
  s->body = parse_body({"endfor", "else"}, end);
  if (end == "else") {
    expect_block_end();
    s->else_body = parse_body({"endfor"}, end);
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_set() {
  const Token tag = cur();
  advance();
  ExprPtr target = parse_assign_target(true, {});
  if (is_op("=")) {
    advance();
    auto s = new_stmt(StmtKind::kSet, tag);
    s->target = std::move(target);
    s->expr = parse_tuple(true, {});
    expect_block_end();
    return s;
  }
  auto s = new_stmt(StmtKind::kSetBlock, tag);
  s->target = std::move(target);
  if (is_op("|")) s->expr = parse_filter(nullptr, false);
  expect_block_end();
  std::string end;
  s->body = parse_body({"endset"}, end);
  expect_block_end();
  return s;
}

void Parser::parse_signature(std::vector<Param>& params) {
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    if (is_op(")")) break;
    Param p;
    p.name = expect_name();
    if (is_op("=")) {
      advance();
      p.default_value = parse_expression(true);
    } else if (!params.empty() && params.back().default_value) {
      fail("non-default argument follows default argument");
    }
    params.push_back(std::move(p));
  }
  advance();
}

StmtPtr Parser::parse_macro() {
  auto s = new_stmt(StmtKind::kMacro, cur());
  advance();
  s->text = expect_name();
  parse_signature(s->params);
  expect_block_end();
  std::string end;
  s->body = parse_body({"endmacro"}, end);
  if (cur().type == TokenType::kName && cur().text == s->text) advance();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = new_stmt(StmtKind::kCallBlock, cur());
  advance();
  if (is_op("(")) parse_signature(s->params);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::kCall) fail("expected call");
  expect_block_end();
  std::string end;
  s->body = parse_body({"endcall"}, end);
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = new_stmt(StmtKind::kFilterBlock, cur());
  advance();
  s->expr = parse_filter(nullptr, true);
  expect_block_end();
  std::string end;
  s->body = parse_body({"endfilter"}, end);
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_with() {
  auto s = new_stmt(StmtKind::kWith, cur());
  advance();
  while (cur().type != TokenType::kBlockEnd) {
    if (!s->assignments.empty()) expect_op(",");
    ExprPtr target = parse_assign_target(false, {});
    expect_op("=");
    s->assignments.emplace_back(std::move(target), parse_expression(true));
  }
  expect_block_end();
  std::string end;
  s->body = parse_body({"endwith"}, end);
  expect_block_end();
  return s;
}

// A name, `ns.attr` (set only) or a tuple of names (optionally parenthesized).
ExprPtr Parser::parse_assign_target(bool with_namespace, std::initializer_list<const char*> extra_end) {
  const Token start = cur();
  if (with_namespace && cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
      peek().text == ".") {
    auto e = make(ExprKind::kGetAttr, start);
    auto base = make(ExprKind::kName, start);
    base->name = expect_name();
    advance();  // '.'
    e->name = expect_name();
    e->args.push_back(std::move(base));
    return e;
  }
  ExprPtr target = parse_tuple(true, extra_end, /*names_only=*/true);
  return target;
}

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace tachyon::chat::jinja
