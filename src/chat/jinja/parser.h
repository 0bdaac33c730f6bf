// Tokens → syntax tree, following Jinja2's grammar and operator precedence
// (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary < postfix/filters).
// Statements: if/elif/else, for (else, `if` filter, recursive), set (incl. block set and
// namespace attributes), macro, call, filter, with, break/continue (loopcontrols) and the
// transformers `generation` block. Anything else is a TemplateSyntaxError with position.
//
//   Body body = parse_template("{% for m in messages %}{{ m.content }}{% endfor %}");
#pragma once

#include <string_view>

#include "chat/jinja/ast.h"

namespace tachyon::chat::jinja {

// Nesting deeper than this (brackets, unary operators, statements) is a syntax error, so
// hostile input cannot overflow the native stack.
inline constexpr int kMaxParseDepth = 200;

Body parse_template(std::string_view source);

}  // namespace tachyon::chat::jinja
