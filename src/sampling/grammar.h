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
//   Rules       a context-free grammar (cfg.h: GBNF, or what a JSON Schema, a regular
//               expression or a choice list compiles to), run as a pushdown automaton
//               (cfg_runtime.h); only as the last segment
// `response_format: json_object` is the grammar [JsonObject]; `json_schema` is [Rules]
// (after a Literal that closes a reasoning block, when the prompt opened one). The text is
// complete when every segment is matched; Literal, Choice and JsonObject segments allow
// nothing after their match, a Rules segment may (a complete "[0-9]+" takes more digits):
// is_terminal() says when nothing at all may follow.
//
// GrammarMatcher walks bytes through a small, trivially copyable MatcherState (40 bytes):
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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::sampling {

struct Cfg;
class CfgRuntime;

struct GrammarSegment {
  enum class Kind : uint8_t { Literal, Choice, JsonObject, Rules };
  Kind kind = Kind::Literal;
  // Literal: one string. Choice: sorted, unique, none a prefix of another (end each with a
  // delimiter the alternatives cannot contain). JsonObject, Rules: empty.
  std::vector<std::string> alternatives;
  std::shared_ptr<const Cfg> rules;  // Rules: the compiled grammar
};

struct Grammar {
  std::vector<GrammarSegment> segments;
  int32_t max_whitespace = 16;  // bytes in one whitespace run inside JSON, 0..255
  int32_t max_depth = 32;       // JSON nesting, 1..128

  static Grammar json_object() { return Grammar{}.then_json_object(); }
  Grammar& then_literal(std::string text);
  Grammar& then_choice(std::vector<std::string> alternatives);  // sorts and checks them; throws Error
  Grammar& then_json_object();
  Grammar& then_rules(std::shared_ptr<const Cfg> rules);  // the last segment
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
  uint32_t config = 0;  // Rules: the pushdown automaton's configuration (CfgRuntime)
  uint32_t unused = 0;  // keeps the struct free of padding
  bool operator==(const MatcherState&) const = default;
};
static_assert(sizeof(MatcherState) == 40, "MatcherState must stay padding-free");

struct MatcherStateHash {
  size_t operator()(const MatcherState& s) const;
};

class GrammarMatcher {
 public:
  // `grammar` must outlive the matcher. Rules segments run on the automaton this thread
  // shares for their grammar (CfgRuntime::for_this_thread): use the matcher on this thread.
  explicit GrammarMatcher(const Grammar& grammar);
  explicit GrammarMatcher(const Grammar&& grammar) = delete;  // it would dangle
  // What the constructor checks (throws on a malformed grammar), without building an automaton:
  // a caller that only checks (the engine's submit, on each HTTP thread) would otherwise keep a
  // runtime of every grammar on every such thread (CfgRuntime::for_this_thread caches them).
  static void validate(const Grammar& grammar);

  // Feeds one byte to `state`: false (state unspecified) when the grammar forbids it.
  bool step(MatcherState& state, uint8_t byte) const;
  bool is_complete(const MatcherState& state) const;
  bool is_terminal(const MatcherState& state) const;
  // Every "plain" byte string (is_plain_string_content) is accepted from here and leaves the
  // state unchanged: inside a JSON string, not within an escape or a UTF-8 sequence.
  bool in_string_content(const MatcherState& state) const;
  // A Rules segment ran out of its memory bound (the grammar is too ambiguous or deep).
  bool overflowed() const;
  // The automaton running `state`'s segment when it is a Rules one (its masks are shared by
  // the matchers of this thread), else null.
  CfgRuntime* rules_runtime(const MatcherState& state) const {
    return state.segment < runtimes_.size() ? runtimes_[state.segment].get() : nullptr;
  }

  // The matcher's own state, for feeding text incrementally.
  const MatcherState& state() const { return state_; }
  void set_state(const MatcherState& state) { state_ = state; }
  MatcherState initial_state() const;
  // Feeds bytes; on rejection returns false and leaves the state as it was before the call.
  bool advance(std::string_view bytes);
  bool is_complete() const { return is_complete(state_); }
  // Nothing can follow: the grammar is matched in full and allows no more.
  bool is_terminal() const { return is_terminal(state_); }

  const Grammar& grammar() const { return *grammar_; }

 private:
  void enter_segment(MatcherState& state) const;
  bool step_json(JsonState& js, uint8_t byte) const;

  const Grammar* grammar_;
  std::vector<std::shared_ptr<CfgRuntime>> runtimes_;  // per segment; null but for Rules
  MatcherState state_;
};

// True for bytes that may stand anywhere inside a JSON string as they are: no '"', no '\\',
// no control characters, and only complete, valid UTF-8 sequences.
bool is_plain_string_content(std::string_view bytes);

// Escapes `text` as the inside of a JSON string (quotes, backslashes, control characters).
std::string json_escape(std::string_view text);

}  // namespace tachyon::sampling
