#include "sampling/grammar.h"

#include <algorithm>

#include "base/error.h"
#include "sampling/cfg_runtime.h"

namespace tachyon::sampling {

namespace {

// What the JSON parser expects next.
enum JsonMode : uint8_t {
  kStart,             // before the top-level object: '{'
  kValue,             // a value (after ':' or an array's ',')
  kValueOrArrayEnd,   // after '[': a value or ']'
  kKeyOrObjectEnd,    // after '{': a key or '}'
  kKey,               // after an object's ',': a key
  kColon,             // after a key
  kAfterValue,        // ',' or the container's closing bracket
  kKeyString,         // inside a key
  kValueString,       // inside a string value
  kNumber,            // inside a number (sub: NumberState)
  kLiteral,           // inside true / false / null (sub: which, count: bytes matched)
  kDone,              // the top-level object is closed
};

// String sub-states.
// \u escapes pair UTF-16 surrogates: a high one (D800-DBFF) must be followed by an escaped
// low one (DC00-DFFF), and a low one alone is an error (what JSON.parse turns into U+FFFD
// and nlohmann::json refuses).
enum : uint8_t {
  kStrNormal,
  kStrEscape,         // after '\\'
  kStrHex,            // \u digits (count: digits left)
  kStrHexD,           // \uD: the second digit decides between BMP and surrogate
  kStrHexHigh,        // the last digits of a high surrogate
  kStrNeedLowEscape,  // a '\\' must start the low surrogate
  kStrNeedLowU,       // then 'u'
  kStrLowHex,         // the low surrogate's digits (count: digits left)
  kStrUtf8,           // UTF-8 continuation bytes (count: bytes left)
  kStrUtf8E0, kStrUtf8ED, kStrUtf8F0, kStrUtf8F4,  // first continuation byte narrowed
};


// Number sub-states; the ones marked "end" may be followed by a delimiter.
enum : uint8_t {
  kNumMinus,      // '-': a digit next
  kNumZero,       // leading '0' (end)
  kNumInt,        // integer digits (end)
  kNumDot,        // '.': a digit next
  kNumFrac,       // fraction digits (end)
  kNumExp,        // 'e': sign or digit next
  kNumExpSign,    // sign: a digit next
  kNumExpDigits,  // exponent digits (end)
};

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
int hex_value(uint8_t b) {
  if (is_digit(b)) return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

bool top_is_object(const JsonState& js) {
  const unsigned d = js.depth - 1u;
  return (js.stack[d >> 6] >> (d & 63)) & 1u;
}

// After a complete value: the top level is done, else a ',' or a closing bracket follows.
void end_value(JsonState& js) {
  js.mode = js.depth == 0 ? kDone : kAfterValue;
  js.sub = js.count = 0;
}

// Inside a string: one byte. Returns false on a byte RFC 8259 or UTF-8 forbids.
bool step_string(JsonState& js, uint8_t b) {
  switch (js.sub) {
    case kStrNormal:
      if (b == '"') {
        if (js.mode == kKeyString) {
          js.mode = kColon;
          js.sub = js.count = 0;
        } else {
          end_value(js);
        }
        return true;
      }
      if (b == '\\') return js.sub = kStrEscape, true;
      if (b < 0x20) return false;
      if (b < 0x80) return true;
      // UTF-8 lead bytes (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
      if (b >= 0xC2 && b <= 0xDF) return js.sub = kStrUtf8, js.count = 1, true;
      if (b == 0xE0) return js.sub = kStrUtf8E0, js.count = 2, true;
      if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return js.sub = kStrUtf8, js.count = 2, true;
      if (b == 0xED) return js.sub = kStrUtf8ED, js.count = 2, true;
      if (b == 0xF0) return js.sub = kStrUtf8F0, js.count = 3, true;
      if (b >= 0xF1 && b <= 0xF3) return js.sub = kStrUtf8, js.count = 3, true;
      if (b == 0xF4) return js.sub = kStrUtf8F4, js.count = 3, true;
      return false;
    case kStrEscape:
      if (b == 'u') return js.sub = kStrHex, js.count = 4, true;
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't')
        return js.sub = kStrNormal, true;
      return false;
    case kStrHex:
    case kStrHexD:
    case kStrHexHigh:
    case kStrLowHex: {
      const int v = hex_value(b);
      if (v < 0) return false;
      if (js.sub == kStrHex && js.count == 4 && v == 0xD) return js.sub = kStrHexD, js.count = 3, true;
      if (js.sub == kStrHexD) {
        if (v >= 0xC) return false;  // a low surrogate without a high one
        js.sub = v >= 0x8 ? kStrHexHigh : kStrHex;
      } else if (js.sub == kStrLowHex && js.count == 4 && v != 0xD) {
        return false;
      } else if (js.sub == kStrLowHex && js.count == 3 && v < 0xC) {
        return false;
      }
      if (--js.count == 0) js.sub = js.sub == kStrHexHigh ? kStrNeedLowEscape : kStrNormal;
      return true;
    }
    case kStrNeedLowEscape:
      return b == '\\' ? (js.sub = kStrNeedLowU, true) : false;
    case kStrNeedLowU:
      return b == 'u' ? (js.sub = kStrLowHex, js.count = 4, true) : false;
    default: {  // a UTF-8 continuation byte; the first one after E0/ED/F0/F4 has a narrower range
      uint8_t lo = 0x80, hi = 0xBF;
      if (js.sub == kStrUtf8E0) lo = 0xA0;
      else if (js.sub == kStrUtf8ED) hi = 0x9F;
      else if (js.sub == kStrUtf8F0) lo = 0x90;
      else if (js.sub == kStrUtf8F4) hi = 0x8F;
      if (b < lo || b > hi) return false;
      js.sub = --js.count == 0 ? kStrNormal : kStrUtf8;
      return true;
    }
  }
}

// Inside a number: returns 1 when `b` extends it, 0 when it ends it (b is then re-read as
// what follows the value), -1 when `b` is an error.
int step_number(JsonState& js, uint8_t b) {
  switch (js.sub) {
    case kNumMinus:
      if (b == '0') return js.sub = kNumZero, 1;
      if (is_digit(b)) return js.sub = kNumInt, 1;
      return -1;
    case kNumZero:
    case kNumInt:
      if (js.sub == kNumInt && is_digit(b)) return 1;
      if (b == '.') return js.sub = kNumDot, 1;
      if (b == 'e' || b == 'E') return js.sub = kNumExp, 1;
      return 0;
    case kNumDot:
      return is_digit(b) ? (js.sub = kNumFrac, 1) : -1;
    case kNumFrac:
      if (is_digit(b)) return 1;
      if (b == 'e' || b == 'E') return js.sub = kNumExp, 1;
      return 0;
    case kNumExp:
      if (b == '+' || b == '-') return js.sub = kNumExpSign, 1;
      return is_digit(b) ? (js.sub = kNumExpDigits, 1) : -1;
    case kNumExpSign:
      return is_digit(b) ? (js.sub = kNumExpDigits, 1) : -1;
    default:  // kNumExpDigits
      return is_digit(b) ? 1 : 0;
  }
}

bool push_container(JsonState& js, bool object, int32_t max_depth) {
  if (js.depth >= max_depth) return false;
  const unsigned d = js.depth;
  const uint64_t bit = uint64_t{1} << (d & 63);
  if (object) js.stack[d >> 6] |= bit;
  else js.stack[d >> 6] &= ~bit;
  ++js.depth;
  js.mode = object ? kKeyOrObjectEnd : kValueOrArrayEnd;
  return true;
}

// The first byte of a value (the mode is a value position).
bool begin_value(JsonState& js, uint8_t b, int32_t max_depth) {
  if (b == '{') return push_container(js, true, max_depth);
  if (b == '[') return push_container(js, false, max_depth);
  if (b == '"') return js.mode = kValueString, js.sub = kStrNormal, true;
  if (b == '-') return js.mode = kNumber, js.sub = kNumMinus, true;
  if (b == '0') return js.mode = kNumber, js.sub = kNumZero, true;
  if (is_digit(b)) return js.mode = kNumber, js.sub = kNumInt, true;
  for (uint8_t i = 0; i < 3; ++i)
    if (b == static_cast<uint8_t>(kLiterals[i][0])) return js.mode = kLiteral, js.sub = i, js.count = 1, true;
  return false;
}

bool close_container(JsonState& js, bool object) {
  if (js.depth == 0 || top_is_object(js) != object) return false;
  --js.depth;
  end_value(js);
  return true;
}

}  // namespace

Grammar& Grammar::then_literal(std::string text) {
  segments.push_back({GrammarSegment::Kind::Literal, {std::move(text)}});
  return *this;
}

Grammar& Grammar::then_choice(std::vector<std::string> alternatives) {
  std::sort(alternatives.begin(), alternatives.end());
  alternatives.erase(std::unique(alternatives.begin(), alternatives.end()), alternatives.end());
  if (alternatives.empty()) throw Error("a grammar choice needs at least one alternative");
  if (alternatives.size() > 65535) throw Error("a grammar choice takes at most 65535 alternatives");
  for (size_t i = 0; i + 1 < alternatives.size(); ++i)
    if (alternatives[i + 1].starts_with(alternatives[i]))
      throw Error("grammar choice alternative '{}' is a prefix of '{}'", alternatives[i], alternatives[i + 1]);
  for (const auto& a : alternatives)
    if (a.empty() || a.size() > 65535) throw Error("grammar choice alternatives must be 1..65535 bytes");
  segments.push_back({GrammarSegment::Kind::Choice, std::move(alternatives)});
  return *this;
}

Grammar& Grammar::then_json_object() {
  segments.push_back({GrammarSegment::Kind::JsonObject, {}});
  return *this;
}

Grammar& Grammar::then_rules(std::shared_ptr<const Cfg> rules) {
  if (!rules) throw Error("a grammar Rules segment needs compiled rules");
  segments.push_back({GrammarSegment::Kind::Rules, {}, std::move(rules)});
  return *this;
}

size_t MatcherStateHash::operator()(const MatcherState& s) const {
  uint64_t h = (uint64_t{s.segment} << 48) ^ (uint64_t{s.pos} << 32) ^ (uint64_t{s.lo} << 16) ^ s.hi;
  h ^= (uint64_t{s.json.mode} << 56) ^ (uint64_t{s.json.sub} << 48) ^ (uint64_t{s.json.count} << 40) ^
       (uint64_t{s.json.ws} << 32) ^ s.json.depth;
  h ^= uint64_t{s.config} * 0xD6E8FEB86659FD93ull;
  h *= 0x9E3779B97F4A7C15ull;
  h ^= s.json.stack[0] + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  h ^= s.json.stack[1] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h ^ (h >> 29));
}

void GrammarMatcher::validate(const Grammar& grammar) {
  if (grammar.max_whitespace < 0 || grammar.max_whitespace > 255) throw Error("max_whitespace must be in 0..255");
  if (grammar.max_depth < 1 || grammar.max_depth > 128) throw Error("max_depth must be in 1..128");
  if (grammar.segments.size() > 65535) throw Error("a grammar takes at most 65535 segments");
  for (size_t i = 0; i < grammar.segments.size(); ++i) {
    const GrammarSegment& s = grammar.segments[i];
    if (s.kind == GrammarSegment::Kind::Literal && (s.alternatives.size() != 1 || s.alternatives[0].size() > 65535))
      throw Error("a grammar literal is one string of at most 65535 bytes");
    if (s.kind == GrammarSegment::Kind::Rules) {
      if (!s.rules) throw Error("a grammar Rules segment needs compiled rules");
      if (i + 1 != grammar.segments.size()) throw Error("a grammar Rules segment must be the last segment");
    }
  }
}

GrammarMatcher::GrammarMatcher(const Grammar& grammar) : grammar_(&grammar) {
  validate(grammar);
  runtimes_.resize(grammar.segments.size());
  for (size_t i = 0; i < grammar.segments.size(); ++i)
    if (grammar.segments[i].kind == GrammarSegment::Kind::Rules)
      runtimes_[i] = CfgRuntime::for_this_thread(grammar.segments[i].rules);
  state_ = initial_state();
}

MatcherState GrammarMatcher::initial_state() const {
  MatcherState s;
  enter_segment(s);
  return s;
}

// Sets up `state.segment` (skipping empty literals).
void GrammarMatcher::enter_segment(MatcherState& s) const {
  const auto& segs = grammar_->segments;
  while (s.segment < segs.size() && segs[s.segment].kind == GrammarSegment::Kind::Literal &&
         segs[s.segment].alternatives[0].empty())
    ++s.segment;
  s.pos = 0;
  s.lo = 0;
  s.hi = s.segment < segs.size() ? static_cast<uint16_t>(segs[s.segment].alternatives.size()) : 0;
  s.json = JsonState{};
  s.config = s.segment < segs.size() && runtimes_[s.segment] ? runtimes_[s.segment]->initial() : 0;
}

bool GrammarMatcher::step(MatcherState& s, uint8_t b) const {
  const auto& segs = grammar_->segments;
  if (s.segment >= segs.size()) return false;
  const GrammarSegment& seg = segs[s.segment];
  switch (seg.kind) {
    case GrammarSegment::Kind::Literal: {
      const std::string& text = seg.alternatives[0];
      if (static_cast<uint8_t>(text[s.pos]) != b) return false;
      if (++s.pos == text.size()) ++s.segment, enter_segment(s);
      return true;
    }
    case GrammarSegment::Kind::Choice: {
      // [lo, hi) share their first `pos` bytes and are sorted, so those continuing with `b`
      // are contiguous.
      const auto& alts = seg.alternatives;
      uint16_t lo = s.lo;
      while (lo < s.hi && (alts[lo].size() <= s.pos || static_cast<uint8_t>(alts[lo][s.pos]) < b)) ++lo;
      uint16_t hi = lo;
      while (hi < s.hi && alts[hi].size() > s.pos && static_cast<uint8_t>(alts[hi][s.pos]) == b) ++hi;
      if (lo == hi) return false;
      s.lo = lo, s.hi = hi, ++s.pos;
      if (hi - lo == 1 && alts[lo].size() == s.pos) ++s.segment, enter_segment(s);
      return true;
    }
    case GrammarSegment::Kind::JsonObject:
      if (!step_json(s.json, b)) return false;
      if (s.json.mode == kDone) ++s.segment, enter_segment(s);
      return true;
    case GrammarSegment::Kind::Rules:
      s.config = runtimes_[s.segment]->step(s.config, b);
      return s.config != CfgRuntime::kDead;
  }
  return false;
}

bool GrammarMatcher::is_complete(const MatcherState& s) const {
  if (s.segment >= grammar_->segments.size()) return true;
  return runtimes_[s.segment] && runtimes_[s.segment]->is_complete(s.config);
}

bool GrammarMatcher::is_terminal(const MatcherState& s) const {
  if (s.segment >= grammar_->segments.size()) return true;
  return runtimes_[s.segment] && runtimes_[s.segment]->is_terminal(s.config);
}

bool GrammarMatcher::overflowed() const {
  return std::any_of(runtimes_.begin(), runtimes_.end(), [](const auto& r) { return r && r->overflowed(); });
}

bool GrammarMatcher::step_json(JsonState& js, uint8_t b) const {
  switch (js.mode) {
    case kKeyString:
    case kValueString:
      return step_string(js, b);
    case kLiteral: {
      const std::string_view lit = kLiterals[js.sub];
      if (static_cast<uint8_t>(lit[js.count]) != b) return false;
      if (++js.count == lit.size()) end_value(js);
      return true;
    }
    case kNumber: {
      const int r = step_number(js, b);
      if (r != 0) return r > 0;
      end_value(js);  // the byte ends the number; read it as what follows the value
      break;
    }
    case kDone:
      return false;
    default:
      break;
  }
  if (is_ws(b)) {
    // The answer starts at its '{': no whitespace before the top-level object.
    if (js.mode == kStart || js.ws >= grammar_->max_whitespace) return false;
    ++js.ws;
    return true;
  }
  js.ws = 0;
  switch (js.mode) {
    case kStart:
      return b == '{' && push_container(js, true, grammar_->max_depth);
    case kValue:
      return begin_value(js, b, grammar_->max_depth);
    case kValueOrArrayEnd:
      if (b == ']') return close_container(js, false);
      return begin_value(js, b, grammar_->max_depth);
    case kKeyOrObjectEnd:
      if (b == '}') return close_container(js, true);
      [[fallthrough]];
    case kKey:
      if (b != '"') return false;
      js.mode = kKeyString;
      js.sub = kStrNormal;
      return true;
    case kColon:
      if (b != ':') return false;
      js.mode = kValue;
      return true;
    case kAfterValue:
      if (b == ',') return js.mode = top_is_object(js) ? kKey : kValue, true;
      if (b == '}') return close_container(js, true);
      if (b == ']') return close_container(js, false);
      return false;
    default:
      return false;
  }
}

bool GrammarMatcher::in_string_content(const MatcherState& s) const {
  if (s.segment >= grammar_->segments.size()) return false;
  if (runtimes_[s.segment]) return runtimes_[s.segment]->absorbs_plain_string(s.config);
  return grammar_->segments[s.segment].kind == GrammarSegment::Kind::JsonObject &&
         (s.json.mode == kKeyString || s.json.mode == kValueString) && s.json.sub == kStrNormal;
}

bool is_plain_string_content(std::string_view bytes) {
  JsonState js;
  js.mode = kValueString;
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (b == '"' || b == '\\' || !step_string(js, b)) return false;
  }
  return js.sub == kStrNormal;
}

bool GrammarMatcher::advance(std::string_view bytes) {
  MatcherState s = state_;
  for (char c : bytes)
    if (!step(s, static_cast<uint8_t>(c))) return false;
  state_ = s;
  return true;
}

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tachyon::sampling
