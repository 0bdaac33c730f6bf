// Template source → tokens, with Jinja2's whitespace rules as transformers configures
// them: trim_blocks (drop the first newline after a block or comment tag), lstrip_blocks
// (drop spaces and tabs before a block or comment tag that starts its line), `-`/`+`
// whitespace control on every tag, `{% raw %}`, newlines normalized to "\n" and one
// trailing newline of the source dropped (keep_trailing_newline off).
//
//   std::vector<Token> tokens = tokenize("Hi {{ name }}!");
//   // kData "Hi ", kVariableBegin, kName "name", kVariableEnd, kData "!", kEof
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::chat::jinja {

enum class TokenType {
  kData,           // literal template text (already whitespace-processed)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,         // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,       // text holds the operator ("+", "//", "==", "(", ...)
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

// Throws TemplateError(kSyntax) with the position of the offending character.
std::vector<Token> tokenize(std::string_view source);

}  // namespace tachyon::chat::jinja
