// Regular expressions -> GBNF (cfg.h), for `guided_regex` and JSON Schema `pattern`.
//
// The subset: literals; escapes \d \D \w \W \s \S \n \r \t \f \v \xHH \uHHHH and escaped
// punctuation; '.'; classes [...] with ranges, negation and the escapes above; groups
// (...), (?:...), (?<name>...), (?P<name>...); alternation |; quantifiers * + ? {m} {m,}
// {m,n} (a lazy '?' after one is accepted and means the same here: the grammar allows
// every match). '^' and '$' only at the very start / end. Refused with an error naming the
// construct: backreferences, lookaround, word boundaries, inline flags, POSIX classes.
//
// Inside a JSON string (RegexText::JsonString) the pattern describes the decoded string,
// and the grammar its JSON text: '"' and '\' become their escapes, '.' and classes match
// only characters that need no escape.
#pragma once

#include <string>
#include <string_view>

namespace tachyon::sampling {

enum class RegexText { Raw, JsonString };

struct RegexTranslation {
  std::string gbnf;  // one GBNF expression, parenthesized
  bool anchored_start = false, anchored_end = false;
};

RegexTranslation regex_to_gbnf(std::string_view pattern, RegexText text);

// A whole grammar (root rule) whose language is the strings the pattern matches in full.
std::string regex_grammar(std::string_view pattern);

}  // namespace tachyon::sampling
