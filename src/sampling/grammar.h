// Grammars for constrained decoding, and the byte-level matcher that checks generated text
// against one incrementally.
//
// A Grammar is a sequence of segments, matched one after the other:
//   Literal     exactly these bytes                    ("<tool_call>\n{\"name\": \"")
//   Choice      exactly one of these byte strings      (a declared tool name + what follows it)
//   JsonObject  one RFC 8259 JSON value that is an object, starting at its '{'; up to
//               `max_whitespace` bytes in each whitespace run between tokens (so a model
//               cannot pad forever), nesting up to `max_depth`, strings valid UTF-8 and
//               \u escapes with paired surrogates
// `response_format: json_object` is the grammar [JsonObject]; a forced Hermes tool call is
// [Literal, Choice, JsonObject, Literal]. The text is complete when every segment is matched;
// nothing may follow (JSON's trailing whitespace included), so a complete match is terminal.
//
// GrammarMatcher walks bytes through a small, trivially copyable MatcherState (32 bytes):
// token masks (token_mask.h) copy it along a trie of token byte strings instead of
// re-feeding text, and use it as a cache key.
//
//   Grammar g = Grammar::json_object();
//   GrammarMatcher m(g);
//   m.advance("{\"a\": [1, 2]}");    // true
//   m.is_complete();                 // true
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::sampling {

struct GrammarSegment {
  enum class Kind : uint8_t { Literal, Choice, JsonObject };
  Kind kind = Kind::Literal;
  // Literal: one string. Choice: sorted, unique, none a prefix of another (end each with a
  // delimiter the alternatives cannot contain). JsonObject: empty.
  std::vector<std::string> alternatives;
};

struct Grammar {
  std::vector<GrammarSegment> segments;
  int32_t max_whitespace = 16;  // bytes in one whitespace run inside JSON, 0..255
  int32_t max_depth = 32;       // JSON nesting, 1..128

  static Grammar json_object() { return Grammar{}.then_json_object(); }
  Grammar& then_literal(std::string text);
  Grammar& then_choice(std::vector<std::string> alternatives);  // sorts and checks them; throws Error
  Grammar& then_json_object();
};

// JSON parser state: what comes next, and the container stack as bits.
struct JsonState {
  uint8_t mode = 0;     // JsonMode in grammar.cpp
  uint8_t sub = 0;      // string / number / literal sub-state
  uint8_t count = 0;    // hex digits or UTF-8 continuation bytes left; literal position
  uint8_t ws = 0;       // length of the current whitespace run
  uint16_t depth = 0;   // open containers
  uint16_t unused = 0;  // keeps the struct free of padding (states are compared bytewise)
  uint64_t stack[2] = {0, 0};  // bit d set: container d (0-based) is an object, else an array
  bool operator==(const JsonState&) const = default;
};

struct MatcherState {
  uint16_t segment = 0;  // index of the segment being matched; == segments.size(): complete
  uint16_t pos = 0;      // bytes matched in the current Literal / Choice
  uint16_t lo = 0;       // Choice: alternatives [lo, hi) still match
  uint16_t hi = 0;
  JsonState json;
  bool operator==(const MatcherState&) const = default;
};
static_assert(sizeof(MatcherState) == 32, "MatcherState must stay padding-free");

struct MatcherStateHash {
  size_t operator()(const MatcherState& s) const;
};

class GrammarMatcher {
 public:
  // `grammar` must outlive the matcher.
  explicit GrammarMatcher(const Grammar& grammar);
  explicit GrammarMatcher(const Grammar&& grammar) = delete;  // it would dangle

  // Feeds one byte to `state`: false (state unspecified) when the grammar forbids it.
  bool step(MatcherState& state, uint8_t byte) const;
  bool is_complete(const MatcherState& state) const { return state.segment >= grammar_->segments.size(); }
  // Inside a JSON string, not within an escape or a UTF-8 sequence: every "plain" byte
  // string (is_plain_string_content) is accepted from here and leaves the state unchanged.
  bool in_string_content(const MatcherState& state) const;

  // The matcher's own state, for feeding text incrementally.
  const MatcherState& state() const { return state_; }
  void set_state(const MatcherState& state) { state_ = state; }
  MatcherState initial_state() const;
  // Feeds bytes; on rejection returns false and leaves the state as it was before the call.
  bool advance(std::string_view bytes);
  bool is_complete() const { return is_complete(state_); }
  // Nothing can follow: the grammar is matched in full (no grammar here allows more after that).
  bool is_terminal() const { return is_complete(state_); }

  const Grammar& grammar() const { return *grammar_; }

 private:
  void enter_segment(MatcherState& state) const;
  bool step_json(JsonState& js, uint8_t byte) const;

  const Grammar* grammar_;
  MatcherState state_;
};

// True for bytes that may stand anywhere inside a JSON string as they are: no '"', no '\\',
// no control characters, and only complete, valid UTF-8 sequences.
bool is_plain_string_content(std::string_view bytes);

// Escapes `text` as the inside of a JSON string (quotes, backslashes, control characters).
std::string json_escape(std::string_view text);

}  // namespace tachyon::sampling
