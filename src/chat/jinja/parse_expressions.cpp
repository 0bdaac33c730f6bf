// Expressions, by Jinja2's precedence: condexpr < or < and < not < compare < +,- < ~ <
// *,/,//,% < ** < unary < postfix (attribute, subscript, call) and filters/tests.
#include "chat/jinja/parser_impl.h"

namespace tachyon::chat::jinja {

bool Parser::is_tuple_end(std::initializer_list<const char*> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEof) return true;
  if (t.type == TokenType::kOperator && t.text == ")") return true;
  if (t.type == TokenType::kName)
    for (const char* n : extra_end)
      if (t.text == n) return true;
  return false;
}

ExprPtr Parser::parse_name_target() {
  if (cur().type != TokenType::kName) fail(fmt::format("can't assign to {}", describe(cur())));
  auto e = make(ExprKind::kName, cur());
  e->name = cur().text;
  if (e->name == "true" || e->name == "false" || e->name == "none" || e->name == "True" ||
      e->name == "False" || e->name == "None")
    fail(fmt::format("can't assign to '{}'", e->name));
  advance();
  return e;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end, bool names_only,
                    bool explicit_parens) {
  DepthGuard guard(*this);
  const Token start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    if (names_only) {
      if (is_op("(")) {
        advance();
        items.push_back(parse_tuple(true, {}, true, true));
        expect_op(")");
      } else {
        items.push_back(parse_name_target());
      }
    } else {
      items.push_back(parse_expression(with_condexpr));
    }
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(fmt::format("Expected an expression, got {}", describe(cur())));
  }
  auto e = make(ExprKind::kTuple, start);
  e->args = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  DepthGuard guard(*this);
  ExprPtr expr1 = parse_or();
  while (is_name("if")) {
    const Token at = cur();
    advance();
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      advance();
      otherwise = parse_condexpr();
    }
    auto e = make(ExprKind::kCondExpr, at);
    e->args.push_back(std::move(cond));
    e->args.push_back(std::move(expr1));
    e->args.push_back(std::move(otherwise));
    expr1 = std::move(e);
  }
  return expr1;
}

ExprPtr Parser::binary(ExprKind kind, const Token& at, ExprPtr a, ExprPtr b, std::string op) {
  auto e = make(kind, at);
  e->name = std::move(op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kOr, at, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kAnd, at, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name("not")) {
    auto e = make(ExprKind::kNot, cur());
    advance();
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token start = cur();
  ExprPtr first = parse_math1();
  ExprPtr e;
  while (true) {
    std::string op;
    if (cur().type == TokenType::kOperator &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      advance();
    } else if (is_name("in")) {
      op = "in";
      advance();
    } else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
      op = "notin";
      advance();
      advance();
    } else {
      break;
    }
    if (!e) {
      e = make(ExprKind::kCompare, start);
      e->args.push_back(std::move(first));
    }
    e->ops.push_back(op);
    e->args.push_back(parse_math1());
  }
  return e ? std::move(e) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kBinary, at, std::move(left), parse_concat(), at.text);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kBinary, at, std::move(left), parse_math2(), "~");
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kBinary, at, std::move(left), parse_pow(), at.text);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token at = cur();
    advance();
    left = binary(ExprKind::kBinary, at, std::move(left), parse_unary(true), "**");
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    node = make(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur());
    advance();
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  DepthGuard guard(*this);
  const Token t = cur();
  switch (t.type) {
    case TokenType::kName: {
      advance();
      auto e = make(ExprKind::kConst, t);
      if (t.text == "true" || t.text == "True") {
        e->value = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value(None{});
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (cur().type == TokenType::kString) {
        s += cur().text;
        advance();
      }
      auto e = make(ExprKind::kConst, t);
      e->value = Value(std::move(s));
      return e;
    }
    case TokenType::kInteger: {
      advance();
      auto e = make(ExprKind::kConst, t);
      e->value = Value(t.int_value);
      return e;
    }
    case TokenType::kFloat: {
      advance();
      auto e = make(ExprKind::kConst, t);
      e->value = Value(t.float_value);
      return e;
    }
    case TokenType::kOperator:
      if (t.text == "(") {
        advance();
        ExprPtr e = parse_tuple(true, {}, false, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        advance();
        auto e = make(ExprKind::kList, t);
        while (!is_op("]")) {
          if (!e->args.empty()) expect_op(",");
          if (is_op("]")) break;
          e->args.push_back(parse_expression(true));
        }
        advance();
        return e;
      }
      if (t.text == "{") {
        advance();
        auto e = make(ExprKind::kDict, t);
        while (!is_op("}")) {
          if (!e->args.empty()) expect_op(",");
          if (is_op("}")) break;
          e->args.push_back(parse_expression(true));
          expect_op(":");
          e->args.push_back(parse_expression(true));
        }
        advance();
        return e;
      }
      break;
    default: break;
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  DepthGuard guard(*this);
  const Token at = cur();
  if (is_op(".")) {
    advance();
    if (cur().type == TokenType::kName) {
      auto e = make(ExprKind::kGetAttr, at);
      e->name = cur().text;
      advance();
      e->args.push_back(std::move(node));
      return e;
    }
    if (cur().type == TokenType::kInteger) {
      auto e = make(ExprKind::kGetItem, at);
      auto idx = make(ExprKind::kConst, cur());
      idx->value = Value(cur().int_value);
      advance();
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(idx));
      return e;
    }
    fail("expected name or number");
  }
  advance();  // '['
  std::vector<ExprPtr> subs;
  while (!is_op("]")) {
    if (!subs.empty()) {
      expect_op(",");
      if (is_op("]")) break;
    }
    subs.push_back(parse_subscribed());
  }
  advance();
  if (subs.empty()) fail_at("expected subscript expression", at);
  // A slice is only ever the whole subscript: Jinja2 compiles `x[::, 1]` to Python that does not
  // parse, and a slice inside a tuple has no object (args[0]) to slice (a null dereference when
  // the tuple was evaluated; found by chat_jinja_fuzz).
  if (subs.size() > 1)
    for (const auto& sub : subs)
      if (sub->kind == ExprKind::kSlice) fail_at("a slice cannot be one item of a tuple subscript", at);
  ExprPtr index;
  if (subs.size() == 1) {
    index = std::move(subs[0]);
  } else {
    index = make(ExprKind::kTuple, at);
    index->args = std::move(subs);
  }
  if (index->kind == ExprKind::kSlice) {
    index->args[0] = std::move(node);
    return index;
  }
  auto e = make(ExprKind::kGetItem, at);
  e->args.push_back(std::move(node));
  e->args.push_back(std::move(index));
  return e;
}

// An index expression or a slice (returned as kSlice with args[0] left empty).
ExprPtr Parser::parse_subscribed() {
  const Token at = cur();
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  advance();  // ':'
  auto e = make(ExprKind::kSlice, at);
  e->args.resize(4);
  e->args[1] = std::move(start);
  if (!is_op("]") && !is_op(",") && !is_op(":")) e->args[2] = parse_expression(true);
  if (is_op(":")) {
    advance();
    if (!is_op("]") && !is_op(",")) e->args[3] = parse_expression(true);
  }
  return e;
}

void Parser::parse_call_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*")) {
      advance();
      e.dyn_args = parse_expression(true);
    } else if (is_op("**")) {
      advance();
      e.dyn_kwargs = parse_expression(true);
    } else if (cur().type == TokenType::kName && peek().type == TokenType::kOperator && peek().text == "=") {
      std::string key = cur().text;
      advance();
      advance();
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty() || e.dyn_args || e.dyn_kwargs) fail("invalid syntax for function call expression");
      e.args.push_back(parse_expression(true));
    }
  }
  advance();
}

ExprPtr Parser::parse_call(ExprPtr node) {
  DepthGuard guard(*this);
  auto e = make(ExprKind::kCall, cur());
  e->line = node->line;  // errors point at the callee, where the call starts
  e->column = node->column;
  e->args.push_back(std::move(node));
  parse_call_args(*e);
  return e;
}

std::string Parser::parse_dotted_name() {
  std::string n = expect_name();
  while (is_op(".")) {
    advance();
    n += "." + expect_name();
  }
  return n;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    DepthGuard guard(*this);
    if (!start_inline) advance();
    start_inline = false;
    auto e = make(ExprKind::kFilter, cur());
    e->name = parse_dotted_name();
    e->args.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*e);
    node = std::move(e);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  DepthGuard guard(*this);
  auto e = make(ExprKind::kTest, cur());
  advance();  // 'is'
  if (is_name("not")) {
    e->negated = true;
    advance();
  }
  e->name = parse_dotted_name();
  e->args.push_back(std::move(node));
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
              t.type == TokenType::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    e->args.push_back(parse_postfix(parse_primary()));
  }
  return e;
}

}  // namespace tachyon::chat::jinja
