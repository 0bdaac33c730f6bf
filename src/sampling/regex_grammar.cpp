#include "sampling/regex_grammar.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "base/error.h"
#include "sampling/utf8_ranges.h"

namespace tachyon::sampling {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr size_t kMaxPattern = 16384;
constexpr int kMaxNesting = 64;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

// A code point inside a GBNF class or literal.
std::string gbnf_char(uint32_t cp) {
  if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\' && cp != ']' && cp != '[' && cp != '-' && cp != '^')
    return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

std::string gbnf_class(const Ranges& ranges) {
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += gbnf_char(lo);
    if (hi != lo) out += "-" + gbnf_char(hi);
  }
  return out + "]";
}

class RegexParser {
 public:
  RegexParser(std::string_view p, RegexText text) : p_(p), text_(text) {}

  RegexTranslation run() {
    if (p_.size() > kMaxPattern) throw Error("a regular expression takes at most {} bytes", kMaxPattern);
    RegexTranslation out;
    if (peek() == '^') out.anchored_start = true, ++pos_;
    out.gbnf = parse_alternation(0);
    if (pos_ < p_.size()) {
      if (p_[pos_] == ')') fail("an unmatched ')'");
      fail(fmt::format("unexpected '{}'", p_[pos_]));
    }
    out.anchored_end = anchored_end_;
    return out;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw Error("regular expression '{}': {} (at offset {})", p_.substr(0, 200), what, pos_);
  }
  char peek() const { return pos_ < p_.size() ? p_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= p_.size(); }

  std::string parse_alternation(int depth) {
    if (depth > kMaxNesting) fail("groups nested too deeply");
    std::vector<std::string> alts = {parse_sequence(depth)};
    while (peek() == '|') {
      ++pos_;
      alts.push_back(parse_sequence(depth));
    }
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  std::string parse_sequence(int depth) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (!at_end()) fail("'$' is supported only at the end of the pattern");
        anchored_end_ = true;
        continue;
      }
      if (peek() == '^') fail("'^' is supported only at the start of the pattern");
      std::string atom = parse_atom(depth);
      atom += parse_quantifier();
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string parse_quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) fail("an unterminated '{' quantifier");
      const std::string_view body = p_.substr(pos_ + 1, close - pos_ - 1);
      for (char b : body)
        if (!(b >= '0' && b <= '9') && b != ',') fail("a malformed '{m,n}' quantifier");
      if (body.empty() || body[0] == ',') fail("a '{m,n}' quantifier needs its minimum");
      q = "{" + std::string(body) + "}";
      pos_ = close + 1;
    } else {
      return q;
    }
    if (peek() == '?') ++pos_;  // lazy: the same language
    else if (peek() == '+') fail("possessive quantifiers are not supported");
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') fail("a quantifier after a quantifier");
    return q;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  uint32_t next_code_point() {
    const auto b = static_cast<uint8_t>(p_[pos_]);
    const int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > p_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (int i = 1; i < n; ++i) {
      const auto c = static_cast<uint8_t>(p_[pos_ + static_cast<size_t>(i)]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (c & 0x3Fu);
    }
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  // After a backslash: a class escape (into `ranges`, returns true) or one code point.
  bool parse_escape(Ranges& ranges, uint32_t& cp) {
    if (at_end()) fail("a trailing backslash");
    const char e = p_[pos_++];
    auto set = [&](const Ranges& r, bool negate) {
      ranges = negate ? complement_code_point_ranges(normalize_code_point_ranges(r)) : r;
      return true;
    };
    switch (e) {
      case 'd': return set(kDigit, false);
      case 'D': return set(kDigit, true);
      case 'w': return set(kWord, false);
      case 'W': return set(kWord, true);
      case 's': return set(kSpace, false);
      case 'S': return set(kSpace, true);
      case 'n': cp = '\n'; return false;
      case 'r': cp = '\r'; return false;
      case 't': cp = '\t'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = parse_hex(2); return false;
      case 'u':
        if (peek() == '{') fail("\\u{...} escapes are not supported");
        cp = parse_hex(4);
        return false;
      case 'b': case 'B': fail("word boundaries (\\b, \\B) are not supported");
      case 'p': case 'P': fail("Unicode property classes (\\p, \\P) are not supported");
      case 'k': fail("named backreferences are not supported");
      default:
        if (e >= '1' && e <= '9') fail("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) fail(fmt::format("unknown escape '\\{}'", e));
        cp = static_cast<uint8_t>(e);
        return false;
    }
  }

  std::string parse_atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        ++pos_;
        const char k = peek();
        if (k == ':') ++pos_;
        else if (k == 'P' || (k == '<' && pos_ + 1 < p_.size() && p_[pos_ + 1] != '=' && p_[pos_ + 1] != '!')) {
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos) fail("an unterminated group name");
          pos_ = close + 1;
        } else if (k == '=' || k == '!' || k == '<') {
          fail("lookaround assertions are not supported");
        } else {
          fail("inline flags and other (?...) groups are not supported");
        }
      }
      std::string inner = parse_alternation(depth + 1);
      if (peek() != ')') fail("an unterminated group");
      ++pos_;
      return inner;
    }
    if (c == '[') return class_text(parse_class());
    if (c == '.') {
      ++pos_;
      return class_text(complement_code_point_ranges({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing to repeat");
    if (c == '\\') {
      ++pos_;
      Ranges ranges;
      uint32_t cp = 0;
      if (parse_escape(ranges, cp)) return class_text(normalize_code_point_ranges(ranges));
      return literal_text(cp);
    }
    return literal_text(next_code_point());
  }

  Ranges parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    Ranges ranges;
    bool first = true;
    while (true) {
      if (at_end()) fail("an unterminated character class");
      if (peek() == ']' && !first) break;
      first = false;
      if (p_.substr(pos_).starts_with("[:")) fail("POSIX character classes are not supported");
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        Ranges esc;
        if (parse_escape(esc, lo)) {
          ranges.insert(ranges.end(), esc.begin(), esc.end());
          continue;
        }
      } else {
        lo = next_code_point();
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          Ranges esc;
          if (parse_escape(esc, hi)) fail("a class escape cannot end a range");
        } else {
          hi = next_code_point();
        }
        if (hi < lo) fail("a character range with its end before its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    ranges = normalize_code_point_ranges(std::move(ranges));
    if (negate) ranges = complement_code_point_ranges(ranges);
    return ranges;
  }

  // A class as GBNF; inside a JSON string, only characters that need no escape.
  std::string class_text(Ranges ranges) {
    if (text_ == RegexText::JsonString) {
      const Ranges excluded = normalize_code_point_ranges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
      Ranges keep;
      for (auto [lo, hi] : normalize_code_point_ranges(std::move(ranges))) {
        for (const auto& [xlo, xhi] : excluded) {
          if (xhi < lo || xlo > hi) continue;
          if (xlo > lo) keep.emplace_back(lo, xlo - 1);
          lo = xhi + 1;
        }
        if (lo <= hi) keep.emplace_back(lo, hi);
      }
      ranges = std::move(keep);
    }
    ranges = normalize_code_point_ranges(std::move(ranges));
    if (ranges.empty()) fail("a character class that matches nothing here");
    return gbnf_class(ranges);
  }

  std::string literal_text(uint32_t cp) {
    if (text_ == RegexText::JsonString) {
      switch (cp) {
        case '"': return "\"\\\\\\\"\"";  // the two bytes \"
        case '\\': return "\"\\\\\\\\\"";
        case '\n': return "\"\\\\n\"";
        case '\r': return "\"\\\\r\"";
        case '\t': return "\"\\\\t\"";
        default:
          if (cp < 0x20) return fmt::format("\"\\\\u{:04x}\"", cp);
      }
    }
    return "\"" + (cp == '"' ? std::string("\\\"") : cp == '\\' ? std::string("\\\\") : gbnf_char(cp)) + "\"";
  }

  std::string_view p_;
  RegexText text_;
  size_t pos_ = 0;
  bool anchored_end_ = false;
};

}  // namespace

RegexTranslation regex_to_gbnf(std::string_view pattern, RegexText text) { return RegexParser(pattern, text).run(); }

std::string regex_grammar(std::string_view pattern) {
  return "root ::= " + regex_to_gbnf(pattern, RegexText::Raw).gbnf + "\n";
}

}  // namespace tachyon::sampling
