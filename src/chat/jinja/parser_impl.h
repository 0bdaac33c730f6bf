// The Jinja parser's class, shared by its two source files: parse_statements.cpp
// (template structure and tags) and parse_expressions.cpp (expressions by precedence).
// Internal to src/chat/jinja; the public entry point is parser.h.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/error.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"

namespace tachyon::chat::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_all();

 private:
  // --- token helpers -------------------------------------------------------------------
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void advance();
  bool is_op(const char* op) const { return cur().type == TokenType::kOperator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().text == name; }
  [[noreturn]] void fail(const std::string& message) const { fail_at(message, cur()); }
  [[noreturn]] static void fail_at(const std::string& message, const Token& t);
  static std::string describe(const Token& t);
  void expect_op(const char* op);
  std::string expect_name();
  void expect_block_end();
  ExprPtr make(ExprKind kind, const Token& at);
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxParseDepth) p.fail("template nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // --- statements ----------------------------------------------------------------------
  // Parses until a block tag whose name is in `end_tags` (left unconsumed except for its
  // `{%` and name; `end` receives the name) or until EOF when end_tags is empty.
  Body parse_body(std::initializer_list<const char*> end_tags, std::string& end);
  StmtPtr new_stmt(StmtKind kind, const Token& at);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  StmtPtr parse_for();
  StmtPtr parse_set();
  void parse_signature(std::vector<Param>& params);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();

  // A name, `ns.attr` (set only) or a tuple of names (optionally parenthesized).
  ExprPtr parse_assign_target(bool with_namespace, std::initializer_list<const char*> extra_end);

  // --- expressions ---------------------------------------------------------------------
  bool is_tuple_end(std::initializer_list<const char*> extra_end) const;
  ExprPtr parse_name_target();
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end, bool names_only = false,
                      bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(ExprKind kind, const Token& at, ExprPtr a, ExprPtr b, std::string op = "");
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);

  // An index expression or a slice (returned as kSlice with args[0] left empty).
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr node);
  std::string parse_dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace tachyon::chat::jinja
