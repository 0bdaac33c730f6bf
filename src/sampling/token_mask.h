// Token masks for constrained decoding: which tokens of the vocabulary keep the generated
// text inside a Grammar (grammar.h).
//
// TokenVocabulary holds every token's byte string once per tokenizer, as a trie laid out in
// pre-order (node i's subtree is [i, subtree_end)). A mask walks that array once, carrying
// the matcher state down one level per byte: a byte the grammar rejects skips the node's
// whole subtree, so a state that allows few bytes (after a value: ',' '}' ']' or
// whitespace) costs a few hundred nodes. Inside a string, where almost every token is
// allowed, the tokens that are plain string text are a precomputed bitset and only the
// others (quotes, escapes, control bytes, UTF-8 fragments) are walked. Masks are cached
// per matcher state, which repeats constantly (inside a string at the same depth, ...).
//
// Under a Rules grammar (cfg.h) the automaton and its masks are shared by every constraint this
// thread creates for the same compiled grammar (CfgRuntime::for_this_thread): 64 requests with
// one schema build one set of tables and masks.
//
// TokenConstraint is the per-request object the engine drives:
//
//   auto vocab = std::make_shared<const TokenVocabulary>(token_bytes);   // once per tokenizer
//   TokenConstraint c(grammar, vocab, /*end_ids=*/eos_ids);
//   c.mask_logits(logits);         // disallowed tokens -> -inf (end ids allowed only when complete)
//   int32_t t = sample(logits);
//   c.accept(t);                   // advance; c.is_terminal(): nothing may follow, finish
//
// Tokens with an empty byte string are never allowed, except end ids once the grammar is
// complete. Special tokens a grammar may name (<|channel|>, cfg.h) have the bytes
// special_token_bytes(text); any other token with a 0xFF byte is never allowed. Not thread-safe; one per request. TokenVocabulary
// is immutable and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sampling/grammar.h"

namespace tachyon::sampling {

class TokenVocabulary {
 public:
  // token_bytes[id]: the bytes token `id` adds to generated text; empty for tokens a
  // grammar never allows (special tokens, ids that are no token).
  explicit TokenVocabulary(const std::vector<std::string>& token_bytes);

  int32_t size() const { return num_tokens_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  size_t num_nodes() const { return all_.nodes.size(); }

  // Sets bit `id` of `allowed` (size() bits, cleared by the caller) for every token whose
  // bytes the matcher accepts from `state`. Returns the number of trie nodes visited.
  size_t fill_mask(const GrammarMatcher& matcher, const MatcherState& state, std::span<uint64_t> allowed) const;

 private:
  // A trie over some of the tokens, in pre-order: node i's subtree is [i, subtree_end).
  struct Trie {
    struct Node {
      uint32_t subtree_end;  // one past the last node of this node's subtree
      uint32_t token_begin;  // tokens ending here: token_ids[token_begin, token_begin + num_tokens)
      uint16_t num_tokens;
      uint16_t depth;        // bytes from the root (root: 0)
      uint8_t byte;          // the edge into this node
    };
    std::vector<Node> nodes;  // nodes[0] is the root
    std::vector<int32_t> token_ids;
    size_t max_depth = 0;
    void build(const std::vector<std::string>& bytes, std::vector<int32_t> ids);
    size_t walk(const GrammarMatcher& matcher, const MatcherState& state, std::span<uint64_t> allowed) const;
  };
  int32_t num_tokens_ = 0;
  std::vector<std::string> bytes_;
  Trie all_;                          // every token with bytes
  // Inside a JSON string most tokens are plain text that is always allowed there: their bits
  // are copied and only the other tokens' trie is walked (Qwen3: 6k of 151k tokens).
  std::vector<uint64_t> plain_string_;
  Trie non_plain_;
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                  std::vector<int32_t> end_ids);

  // Sets every logit whose token would break the grammar to -inf (ids beyond the
  // vocabulary too). Returns the number of tokens left allowed (0: the grammar is stuck,
  // which a vocabulary with all single bytes never is).
  size_t mask_logits(std::span<float> logits);
  // The allowed-token bitset for the current state (size() bits of the vocabulary).
  std::span<const uint64_t> allowed();
  bool is_allowed(int32_t token);

  // Advances past `token`; false (state unchanged) when the token is not allowed.
  bool accept(int32_t token);
  bool is_complete() const { return matcher_.is_complete(); }
  bool is_terminal() const { return matcher_.is_terminal(); }

  // Speculation walks a draft through accept() and must step back past rejected tokens: a
  // Snapshot is the whole grammar state after some prefix of the output, cheap to copy.
  //   auto before = c.snapshot(); for (t : draft) if (!c.accept(t)) break; ... c.restore(before);
  using Snapshot = MatcherState;
  Snapshot snapshot() const { return matcher_.state(); }
  void restore(const Snapshot& snapshot);

  // Cost accounting (for benchmarks and tests).
  struct Stats {
    uint64_t masks = 0, cache_hits = 0, nodes_visited = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> end_ids_;
  GrammarMatcher matcher_;
  // Masks by matcher state (without end ids), bounded; cleared when full.
  std::unordered_map<MatcherState, std::vector<uint64_t>, MatcherStateHash> cache_;
  const std::vector<uint64_t>* current_ = nullptr;  // mask of the current state, once computed
  std::shared_ptr<const std::vector<uint64_t>> shared_mask_;  // Rules states: the mask shared with this thread's requests
  std::vector<uint64_t> with_end_;                  // current mask plus end ids (complete states)
  Stats stats_;
};

}  // namespace tachyon::sampling
