// GBNF text -> Cfg (cfg.h): a recursive-descent parser that lowers repetitions to helper
// rules as it goes, then lays the rules out flat and checks them (undefined rules, left
// recursion, size).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/utf8_ranges.h"

namespace tachyon::sampling {

namespace {

constexpr size_t kMaxText = size_t{1} << 20;
constexpr size_t kMaxElements = 1'000'000;
constexpr uint32_t kMaxRepeat = 10'000;
constexpr int kMaxNesting = 512;

using Seq = std::vector<CfgElement>;
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::shared_ptr<const Cfg> parse(std::string_view root_rule) {
    if (text_.size() > kMaxText) throw Error("a grammar takes at most {} bytes, got {}", kMaxText, text_.size());
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    auto root = ids_.find(std::string(root_rule));
    if (root == ids_.end() || !defined_[root->second])
      throw Error("the grammar has no rule '{}' to start from", root_rule);
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r]) throw Error("grammar rule '{}' is used but never defined", names_[r]);
    return finish(root->second);
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    size_t line = 1 + static_cast<size_t>(std::count(text_.begin(), text_.begin() + static_cast<ptrdiff_t>(pos_), '\n'));
    throw Error("grammar line {}: {}", line, what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t') ++pos_;
      else if (c == '#') while (!at_end() && text_[pos_] != '\n') ++pos_;
      else if (newlines && (c == '\n' || c == '\r')) ++pos_;
      else break;
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail(fmt::format("expected a rule name, got '{}'", peek()));
    return std::string(text_.substr(start, pos_ - start));
  }

  // At a line break inside a rule: the rule ends when the next line starts a new rule.
  bool rule_ends_here() {
    const size_t save = pos_;
    skip_space(true);
    bool ends = at_end();
    if (!ends && is_name_char(peek())) {
      while (!at_end() && is_name_char(text_[pos_])) ++pos_;
      skip_space(false);
      ends = text_.substr(pos_).starts_with("::=");
    }
    pos_ = save;
    return ends;
  }

  uint32_t rule_id(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.emplace_back();
      names_.push_back(name);
      defined_.push_back(false);
    }
    return it->second;
  }

  uint32_t new_helper(uint32_t base, std::vector<Seq> alternatives) {
    const std::string name = fmt::format("{}-{}", names_[base], ++helpers_);
    const uint32_t id = rule_id(name);
    rules_[id] = std::move(alternatives);
    defined_[id] = true;
    return id;
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space(false);
    if (!text_.substr(pos_).starts_with("::=")) fail(fmt::format("expected '::=' after rule name '{}'", name));
    pos_ += 3;
    const uint32_t id = rule_id(name);
    if (defined_[id]) fail(fmt::format("rule '{}' is defined twice", name));
    defined_[id] = true;
    rules_[id] = parse_alternatives(id, false);
    if (!at_end() && peek() != '\n' && peek() != '\r') fail(fmt::format("unexpected '{}' in rule '{}'", peek(), name));
  }

  std::vector<Seq> parse_alternatives(uint32_t rule, bool nested) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(rule, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  Seq parse_sequence(uint32_t rule, bool nested) {
    Seq seq;
    while (true) {
      skip_space(nested);
      if (at_end()) break;
      const char c = peek();
      if (c == '|' || c == ')') break;
      if (c == '\n' || c == '\r') {
        if (rule_ends_here()) break;
        skip_space(true);
        continue;
      }
      Seq item = parse_atom(rule);
      item = parse_postfix(rule, std::move(item));
      seq.insert(seq.end(), item.begin(), item.end());
      count_elements(item.size());
    }
    return seq;
  }

  void count_elements(size_t n) {
    elements_ += n;
    if (elements_ > kMaxElements) fail(fmt::format("the grammar expands to more than {} elements", kMaxElements));
  }

  Seq parse_atom(uint32_t rule) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class(rule);
    if (c == '.') {
      ++pos_;
      return class_elements(rule, {{0, 0x10FFFF}});
    }
    if (c == '(') {
      if (++nesting_ > kMaxNesting) fail(fmt::format("groups nested deeper than {}", kMaxNesting));
      ++pos_;
      skip_space(true);
      std::vector<Seq> alts = parse_alternatives(rule, true);
      --nesting_;
      skip_space(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      if (alts.size() == 1) return std::move(alts[0]);
      return {{CfgElement::Kind::Rule, new_helper(rule, std::move(alts))}};
    }
    if (is_name_char(c)) return {{CfgElement::Kind::Rule, rule_id(parse_name())}};
    if (c == '<') return parse_special_token();
    fail(fmt::format("unexpected '{}'", c));
  }

  uint32_t parse_int() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (v > kMaxRepeat) fail(fmt::format("a repetition count above {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in {m,n}");
    return static_cast<uint32_t>(v);
  }

  Seq parse_postfix(uint32_t rule, Seq item) {
    while (true) {
      const char c = peek();
      uint32_t lo = 0, hi = 0;
      bool unbounded = false;
      if (c == '*') lo = 0, unbounded = true, ++pos_;
      else if (c == '+') lo = 1, unbounded = true, ++pos_;
      else if (c == '?') lo = 0, hi = 1, ++pos_;
      else if (c == '{') {
        ++pos_;
        skip_space(false);
        lo = hi = parse_int();
        skip_space(false);
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          if (peek() == '}') unbounded = true;
          else hi = parse_int();
          skip_space(false);
        }
        if (peek() != '}') fail("expected '}' after a repetition count");
        ++pos_;
        if (!unbounded && hi < lo) fail(fmt::format("repetition {{{},{}}} has its maximum below its minimum", lo, hi));
      } else {
        return item;
      }
      item = repeat(rule, std::move(item), lo, hi, unbounded);
    }
  }

  // X{lo,hi} as lo copies of X, then X* or a chain of hi-lo nested optional X.
  Seq repeat(uint32_t rule, Seq item, uint32_t lo, uint32_t hi, bool unbounded) {
    CfgElement x = item.size() == 1 ? item[0] : CfgElement{CfgElement::Kind::Rule, new_helper(rule, {std::move(item)})};
    Seq out(lo, x);
    count_elements(lo + (unbounded ? 3 : 3 * size_t{hi - lo}));
    if (unbounded) {
      const uint32_t star = rule_id(fmt::format("{}-{}", names_[rule], ++helpers_));
      rules_[star] = {{x, {CfgElement::Kind::Rule, star}}, {}};
      defined_[star] = true;
      out.push_back({CfgElement::Kind::Rule, star});
    } else if (hi > lo) {
      uint32_t tail = new_helper(rule, {{x}, {}});
      for (uint32_t k = 1; k < hi - lo; ++k) tail = new_helper(rule, {{x, {CfgElement::Kind::Rule, tail}}, {}});
      out.push_back({CfgElement::Kind::Rule, tail});
    }
    return out;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail("expected a hex digit in an escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) fail("an escape beyond U+10FFFF");
    return v;
  }

  // One character of a literal or class (after any backslash), as a code point.
  uint32_t parse_char() {
    if (at_end()) fail("unterminated literal or character class");
    const auto b = static_cast<uint8_t>(text_[pos_]);
    if (b == '\\') {
      ++pos_;
      if (at_end()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': case '.': case '(': case ')':
        case '|': case '*': case '+': case '?': case '{': case '}': case '$':
          return static_cast<uint8_t>(e);
        default: fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    // Decode one UTF-8 character of the grammar text.
    int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) fail("invalid UTF-8 in the grammar text");
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (int i = 1; i < n; ++i) {
      const auto c = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (c & 0x3Fu);
    }
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  Seq parse_literal() {
    ++pos_;  // '"'
    std::string bytes;
    while (true) {
      if (at_end()) fail("unterminated string literal");
      if (peek() == '"') break;
      append_utf8(parse_char(), bytes);
    }
    ++pos_;
    Seq seq;
    for (char c : bytes) seq.push_back(byte_element(single(static_cast<uint8_t>(c))));
    return seq;
  }

  // <|channel|>: the special token with that text (cfg.h: special_token_bytes).
  Seq parse_special_token() {
    const size_t start = pos_;
    size_t end = start + 1;
    while (end < text_.size() && text_[end] != '>' && text_[end] != ' ' && text_[end] != '\n' && text_[end] != '\t' &&
           text_[end] != '\r')
      ++end;
    if (end >= text_.size() || text_[end] != '>' || end == start + 1)
      fail("a token reference needs its text between '<' and '>' with no spaces (<|end|>)");
    const std::string_view token = text_.substr(start, end + 1 - start);
    if (token.find(kSpecialTokenMark) != std::string_view::npos) fail("a token reference with a 0xFF byte");
    pos_ = end + 1;
    Seq seq;
    for (char c : special_token_bytes(token)) seq.push_back(byte_element(single(static_cast<uint8_t>(c))));
    return seq;
  }

  static ByteSet single(uint8_t b) {
    ByteSet s{};
    s[b >> 6] |= uint64_t{1} << (b & 63);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s{};
    for (unsigned b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
    return s;
  }

  CfgElement byte_element(const ByteSet& set) {
    auto [it, inserted] = set_ids_.emplace(set, static_cast<uint32_t>(sets_.size()));
    if (inserted) sets_.push_back(set);
    return {CfgElement::Kind::Bytes, it->second};
  }

  Seq parse_class(uint32_t rule) {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    CodePointRanges ranges;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']') break;
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("a character range with its end before its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    ranges = normalize_code_point_ranges(std::move(ranges));
    if (negate) ranges = complement_code_point_ranges(ranges);
    if (ranges.empty()) fail("an empty character class");
    return class_elements(rule, ranges);
  }

  // A class as one byte-set element (ASCII only) or a helper rule of UTF-8 sequences,
  // shared by every use of the same class.
  Seq class_elements(uint32_t rule, const CodePointRanges& ranges) {
    const std::vector<Utf8Sequence> seqs = utf8_sequences(ranges);
    if (seqs.empty()) fail("a character class with only surrogate code points");
    ByteSet ascii{};
    bool any_ascii = false, all_single = true;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        const ByteSet r = range(s[0].first, s[0].second);
        for (int w = 0; w < 4; ++w) ascii[static_cast<size_t>(w)] |= r[static_cast<size_t>(w)];
        any_ascii = true;
      } else {
        all_single = false;
      }
    }
    if (all_single) return {byte_element(ascii)};
    auto cached = class_rules_.find(ranges);
    if (cached != class_rules_.end()) return {{CfgElement::Kind::Rule, cached->second}};
    std::vector<Seq> alts;
    if (any_ascii) alts.push_back({byte_element(ascii)});
    for (const auto& s : seqs) {
      if (s.size() == 1) continue;
      Seq alt;
      for (const auto& [lo, hi] : s) alt.push_back(byte_element(range(lo, hi)));
      alts.push_back(std::move(alt));
    }
    count_elements(alts.size() * 4);
    const uint32_t id = new_helper(rule, std::move(alts));
    class_rules_.emplace(ranges, id);
    return {{CfgElement::Kind::Rule, id}};
  }

  std::shared_ptr<const Cfg> finish(uint32_t root) {
    auto cfg = std::make_shared<Cfg>();
    cfg->byte_sets = std::move(sets_);
    cfg->rule_names = names_;
    cfg->root = root;
    cfg->alternatives.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& alt : rules_[r]) {
        cfg->alternatives[r].push_back(static_cast<uint32_t>(cfg->elements.size()));
        cfg->elements.insert(cfg->elements.end(), alt.begin(), alt.end());
        cfg->elements.push_back({CfgElement::Kind::End, 0});
      }
    }
    check_left_recursion();
    return cfg;
  }

  // A rule that can reach itself without consuming a byte would grow the matcher's stack
  // forever: refused, naming the rule.
  void check_left_recursion() const {
    const size_t n = rules_.size();
    // Nullable rules by a worklist: an alternative is nullable once every element in it is a
    // nullable rule (linear in the grammar's size, whatever the order of the rules).
    std::vector<bool> nullable(n, false);
    std::vector<std::pair<uint32_t, size_t>> alts;           // (rule, elements not yet known nullable)
    std::vector<std::vector<size_t>> uses(n);                // rule -> alternatives it appears in, per use
    std::vector<uint32_t> queue;
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r]) {
        const size_t id = alts.size();
        alts.emplace_back(static_cast<uint32_t>(r), alt.size());
        for (const CfgElement& e : alt)
          if (e.kind == CfgElement::Kind::Rule) uses[e.arg].push_back(id);
        if (alt.empty() && !nullable[r]) nullable[r] = true, queue.push_back(static_cast<uint32_t>(r));
      }
    while (!queue.empty()) {
      const uint32_t r = queue.back();
      queue.pop_back();
      for (size_t id : uses[r]) {
        auto& [owner, left] = alts[id];
        if (--left == 0 && !nullable[owner]) nullable[owner] = true, queue.push_back(owner);
      }
    }
    std::vector<std::vector<uint32_t>> first(n);  // rules reachable before any byte
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r])
        for (const CfgElement& e : alt) {
          if (e.kind != CfgElement::Kind::Rule) break;
          first[r].push_back(e.arg);
          if (!nullable[e.arg]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
    for (size_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> stack = {{static_cast<uint32_t>(start), 0}};
      color[start] = 1;
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        if (next < first[r].size()) {
          const uint32_t to = first[r][next++];
          if (color[to] == 1)
            throw Error("grammar rule '{}' is left-recursive (it can reach itself before matching a character)",
                        names_[to]);
          if (color[to] == 0) color[to] = 1, stack.emplace_back(to, 0);
        } else {
          color[r] = 2;
          stack.pop_back();
        }
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<std::vector<Seq>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<ByteSet> sets_;
  std::map<ByteSet, uint32_t> set_ids_;
  std::map<CodePointRanges, uint32_t> class_rules_;
  uint32_t helpers_ = 0;
  size_t elements_ = 0;
  int nesting_ = 0;
};

}  // namespace

std::shared_ptr<const Cfg> Cfg::parse_gbnf(std::string_view text, std::string_view root_rule) {
  return Parser(text).parse(root_rule);
}

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<uint8_t>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7F) out += fmt::format("\\x{:02X}", u);
    else out += c;
  }
  return out + "\"";
}

}  // namespace tachyon::sampling
