// A context-free grammar over bytes, compiled from GBNF text (the grammar language
// llama-server's `grammar` field takes), and the form the pushdown matcher (cfg_runtime.h)
// runs.
//
// GBNF as accepted here:
//   root  ::= "{" ws pair ("," ws pair)* "}"     # rules: name ::= alternatives, one or more lines
//   pair  ::= [a-z_]+ ":" ws ( num | "null" )    # literals, char classes with ranges
//   num   ::= "-"? [0-9]{1,6} ("." [0-9]+)?       # ?, *, +, {m}, {m,}, {m,n}; grouping; |
//   ws    ::= [ \t\n]*                           # [^...] negates; . is any character
// Literals and classes are Unicode text (UTF-8); escapes \n \r \t \\ \" \] \- \xHH \uHHHH
// \UHHHHHHHH. A rule continues on the next line unless that line starts `name ::=`.
// A token reference, <|channel|> or <｜tool▁sep｜> (text between '<' and '>', no spaces, as
// llama.cpp writes them), matches that special token and not the same text written as
// ordinary tokens: special tokens have the bytes special_token_bytes(text) in a
// TokenVocabulary, which no text grammar accepts (0xFF is never in UTF-8).
// Character classes over code points become byte sequences (valid UTF-8 only). Left
// recursion (a rule that can reach itself before consuming a byte) is refused, as are
// undefined rules; the message names the rule.
//
// Compiled form: rules are lists of alternatives; an alternative is a run of elements in
// `elements` ending with an End element. An element matches one byte from a set, or a rule.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::sampling {

struct CfgElement {
  enum class Kind : uint8_t { Bytes, Rule, End };
  Kind kind = Kind::End;
  uint32_t arg = 0;  // Bytes: index into byte_sets; Rule: rule index
};

using ByteSet = std::array<uint64_t, 4>;  // bit b: byte b matches

inline bool byte_set_has(const ByteSet& set, uint8_t b) { return (set[b >> 6] >> (b & 63)) & 1u; }

struct Cfg {
  std::vector<CfgElement> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: the element index each alternative starts at
  std::vector<std::string> rule_names;              // helper rules are named after their rule ("value-3")
  uint32_t root = 0;

  // Parses GBNF text with `root_rule` as the start symbol; throws Error naming what is wrong
  // (line, rule). Limits: 1 MiB of text, 1M elements after expanding repetitions, counts in
  // {m,n} up to 10000.
  static std::shared_ptr<const Cfg> parse_gbnf(std::string_view text, std::string_view root_rule = "root");
};

// The bytes a special token stands for in grammars and token masks: its text between two
// 0xFF bytes, a byte valid UTF-8 never has, so text rules cannot match it.
inline constexpr char kSpecialTokenMark = '\xFF';
inline std::string special_token_bytes(std::string_view text) {
  return std::string(1, kSpecialTokenMark) + std::string(text) + kSpecialTokenMark;
}

// GBNF literal for `bytes` (quotes included), escaping what GBNF needs escaped.
std::string gbnf_literal(std::string_view bytes);

}  // namespace tachyon::sampling
