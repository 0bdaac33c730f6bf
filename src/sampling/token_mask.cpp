#include "sampling/token_mask.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/cfg_runtime.h"

namespace tachyon::sampling {

namespace {

// A special token's bytes (cfg.h: 0xFF, its text, 0xFF), or bytes without 0xFF. A byte-level
// token for a lone 0xFF could otherwise start a special token's bytes; no text grammar
// accepts it anyway (0xFF is never in UTF-8).
bool usable_in_grammars(const std::string& bytes) {
  const size_t first = bytes.find(kSpecialTokenMark);
  if (first == std::string::npos) return true;
  return first == 0 && bytes.size() > 2 && bytes.back() == kSpecialTokenMark &&
         bytes.find(kSpecialTokenMark, 1) == bytes.size() - 1;
}

}  // namespace

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& token_bytes)
    : num_tokens_(static_cast<int32_t>(token_bytes.size())), bytes_(token_bytes) {
  std::vector<int32_t> ids, non_plain;
  plain_string_.assign((bytes_.size() + 63) / 64, 0);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty() || bytes_[id].size() >= 65535 || !usable_in_grammars(bytes_[id])) {
      bytes_[id].clear();
      continue;
    }
    ids.push_back(static_cast<int32_t>(id));
    if (is_plain_string_content(bytes_[id])) plain_string_[id >> 6] |= uint64_t{1} << (id & 63);
    else non_plain.push_back(static_cast<int32_t>(id));
  }
  all_.build(bytes_, std::move(ids));
  non_plain_.build(bytes_, std::move(non_plain));
}

void TokenVocabulary::Trie::build(const std::vector<std::string>& bytes, std::vector<int32_t> order) {
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b]; });
  // Pre-order construction from the sorted strings: `path` holds the open nodes from the
  // root; a node's subtree ends when it is popped.
  nodes.push_back({0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes[id];
    size_t common = 0;
    if (prev) {
      const size_t limit = std::min(prev->size(), s.size());
      while (common < limit && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common + 1) {
      nodes[path.back()].subtree_end = static_cast<uint32_t>(nodes.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({0, 0, 0, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    Node& end = nodes[path.back()];
    if (end.num_tokens == 0) end.token_begin = static_cast<uint32_t>(token_ids.size());
    if (end.num_tokens == std::numeric_limits<uint16_t>::max()) throw Error("too many tokens with the same bytes");
    ++end.num_tokens;
    token_ids.push_back(id);
    max_depth = std::max(max_depth, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    nodes[path.back()].subtree_end = static_cast<uint32_t>(nodes.size());
    path.pop_back();
  }
}

size_t TokenVocabulary::Trie::walk(const GrammarMatcher& matcher, const MatcherState& state,
                                   std::span<uint64_t> allowed) const {
  std::vector<MatcherState> states(max_depth + 1);  // states[d]: after the first d bytes of the path
  states[0] = state;
  size_t visited = 0;
  const size_t n = nodes.size();
  for (size_t i = 1; i < n;) {
    const Node& node = nodes[i];
    ++visited;
    MatcherState s = states[node.depth - 1u];
    if (!matcher.step(s, node.byte)) {
      i = node.subtree_end;  // no token below this prefix can match
      continue;
    }
    states[node.depth] = s;
    for (uint32_t k = 0; k < node.num_tokens; ++k) {
      const auto id = static_cast<uint32_t>(token_ids[node.token_begin + k]);
      allowed[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  return visited;
}

size_t TokenVocabulary::fill_mask(const GrammarMatcher& matcher, const MatcherState& state,
                                  std::span<uint64_t> allowed) const {
  if (!matcher.in_string_content(state)) return all_.walk(matcher, state, allowed);
  for (size_t w = 0; w < plain_string_.size(); ++w) allowed[w] |= plain_string_[w];
  return non_plain_.walk(matcher, state, allowed);
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const TokenVocabulary> vocabulary, std::vector<int32_t> end_ids)
    : grammar_(std::move(grammar)), vocab_(std::move(vocabulary)), end_ids_(std::move(end_ids)), matcher_(*grammar_) {}

std::span<const uint64_t> TokenConstraint::allowed() {
  if (!current_) {
    ++stats_.masks;
    const MatcherState& state = matcher_.state();
    if (CfgRuntime* rules = matcher_.rules_runtime(state)) {
      // A grammar's automaton is shared by this thread's requests, and so are its masks.
      shared_mask_ = rules->cached_mask(state.config, vocab_.get());
      if (shared_mask_) {
        ++stats_.cache_hits;
      } else {
        std::vector<uint64_t> bits((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
        stats_.nodes_visited += vocab_->fill_mask(matcher_, state, bits);
        shared_mask_ = rules->store_mask(state.config, vocab_.get(), std::move(bits));
      }
      current_ = shared_mask_.get();
    } else {
      auto it = cache_.find(state);
      if (it != cache_.end()) {
        ++stats_.cache_hits;
      } else {
        if (cache_.size() >= 256) cache_.clear();
        std::vector<uint64_t> bits((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
        stats_.nodes_visited += vocab_->fill_mask(matcher_, state, bits);
        it = cache_.emplace(state, std::move(bits)).first;
      }
      current_ = &it->second;
    }
    if (matcher_.is_complete() && !end_ids_.empty()) {
      with_end_ = *current_;
      for (int32_t id : end_ids_)
        if (id >= 0 && id < vocab_->size()) with_end_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      current_ = &with_end_;
    }
  }
  return *current_;
}

bool TokenConstraint::is_allowed(int32_t token) {
  if (token < 0 || token >= vocab_->size()) return false;
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end() && matcher_.is_complete()) return true;
  const std::string& bytes = vocab_->bytes(token);
  if (bytes.empty()) return false;
  MatcherState s = matcher_.state();
  for (char c : bytes)
    if (!matcher_.step(s, static_cast<uint8_t>(c))) return false;
  return true;
}

size_t TokenConstraint::mask_logits(std::span<float> logits) {
  const std::span<const uint64_t> bits = allowed();
  const size_t vocab = static_cast<size_t>(vocab_->size());
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  size_t num_allowed = 0;
  const size_t covered = std::min(vocab, logits.size());
  // Per 64-token word, work proportional to the smaller of its allowed and masked sets:
  // mostly-allowed words (inside strings) mask bit by bit, mostly-masked ones are filled
  // and the few allowed logits put back.
  for (size_t w = 0; w * 64 < covered; ++w) {
    const size_t base = w * 64, len = std::min<size_t>(64, covered - base);
    if (len == 64 && (bits[w] == 0 || bits[w] == ~uint64_t{0})) {
      // Whole words, the common case on both sides (structure: nearly all masked; strings:
      // nearly all allowed): a fixed-length store the compiler vectorizes, or nothing.
      if (bits[w] == 0) {
        float* row = logits.data() + base;
        for (int k = 0; k < 64; ++k) row[k] = kMasked;
      } else {
        num_allowed += 64;
      }
      continue;
    }
    const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
    const uint64_t word = bits[w] & valid;
    const int ones = std::popcount(word);
    num_allowed += static_cast<size_t>(ones);
    float* row = logits.data() + base;
    if (ones * 2 >= static_cast<int>(len)) {
      for (uint64_t masked = ~word & valid; masked; masked &= masked - 1) row[std::countr_zero(masked)] = kMasked;
    } else {
      float keep[64];
      int n = 0;
      for (uint64_t a = word; a; a &= a - 1) keep[n++] = row[std::countr_zero(a)];
      std::fill(row, row + len, kMasked);
      n = 0;
      for (uint64_t a = word; a; a &= a - 1) row[std::countr_zero(a)] = keep[n++];
    }
  }
  std::fill(logits.begin() + static_cast<ptrdiff_t>(covered), logits.end(), kMasked);
  return num_allowed;
}

bool TokenConstraint::accept(int32_t token) {
  if (!is_allowed(token)) return false;
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end() && matcher_.is_complete()) return true;
  matcher_.advance(vocab_->bytes(token));
  current_ = nullptr;
  return true;
}

void TokenConstraint::restore(const Snapshot& snapshot) {
  matcher_.set_state(snapshot);
  current_ = nullptr;
}

}  // namespace tachyon::sampling
