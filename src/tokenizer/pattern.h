// Patterns of tokenizer.json (`{"String": "..."}` or `{"Regex": "..."}`) and the one
// search primitive every stage builds on: `find_matches`, which cuts a string into
// alternating non-matching and matching spans that cover it completely, as Hugging Face's
// `Pattern::find_matches` does.
//
// Regexes are written for Oniguruma (Ruby syntax), which Hugging Face uses; they run here
// on PCRE2 (JIT) after a translation of the escapes whose meaning differs between the two:
// \s \S (Unicode White_Space in Oniguruma), \d \D \w \W (Unicode), \h \H (hex digits) and
// \uHHHH. Empty matches follow the `onig` crate's iterator: an empty match right after the
// previous match is skipped.
//
// Thread-safe: a compiled Pattern is immutable; match scratch space is per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace tachyon::tokenizer {

struct Span {
  size_t start = 0;
  size_t end = 0;
  bool is_match = false;
};

class Regex {
 public:
  // Throws Error naming `path` when the pattern does not compile. `translate`: the pattern
  // is Oniguruma syntax (translated, see above); false: it is PCRE2 syntax already.
  Regex(const std::string& pattern, std::string_view path, bool translate = true);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Next match of the pattern in `text` at or after byte `from`; false if none.
  bool find(std::string_view text, size_t from, size_t* start, size_t* end) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

// Translates Oniguruma escapes that PCRE2 reads differently (see the file comment).
std::string translate_onig_to_pcre2(std::string_view onig_pattern);

// The Whitespace pre-tokenizer's `\w+|[^\w\s]+` in the Rust regex crate's meaning
// (\w: Alphabetic, marks, Nd, Pc, joiners; \s: White_Space), as a PCRE2 pattern.
std::string rust_whitespace_split_pattern();

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(const std::string& onig_pattern, std::string_view path);
  static Pattern pcre2_regex(const std::string& pcre2_pattern, std::string_view path);
  // `{"String": s}` or `{"Regex": r}` at `path`.
  static Pattern from_json(const Json& value, std::string_view path);

  // Appends spans covering `text` in order; an empty text gives one empty non-match.
  void find_matches(std::string_view text, std::vector<Span>& out) const;

  // Replaces every match with `content` (Replace normalizer and decoder).
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;  // null for a non-empty literal
};

}  // namespace tachyon::tokenizer
