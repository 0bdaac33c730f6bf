#include "server/response_cache.h"

#include <cstring>
#include <type_traits>

namespace tachyon::server {

namespace {

// The key is a byte string of the fields in a fixed order, each length-prefixed where it varies.
class KeyWriter {
 public:
  template <typename T>
  void pod(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void text(const std::string& s) {
    pod(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  template <typename T>
  void list(const std::vector<T>& v) {
    pod(static_cast<uint64_t>(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

size_t logprobs_bytes(const std::vector<engine::TokenLogprob>& lps) {
  size_t n = lps.size() * sizeof(engine::TokenLogprob);
  for (const auto& lp : lps) n += lp.top.size() * sizeof(lp.top[0]);
  return n;
}

}  // namespace

size_t CachedResponse::bytes() const {
  size_t n = sizeof(*this);
  for (const auto& d : deliveries)
    n += sizeof(d) + d.tokens.size() * sizeof(int32_t) + logprobs_bytes(d.logprobs) + logprobs_bytes(d.prompt_logprobs) +
         d.error.size();
  return n;
}

std::optional<std::string> ResponseCache::key_of(uint64_t model_fingerprint, const engine::GenerationRequest& r,
                                                 std::span<const std::string> stop_strings) {
  const engine::SamplingParams& s = r.sampling;
  const bool greedy = s.greedy();
  if (!greedy && !s.seed) return std::nullopt;
  KeyWriter k;
  k.pod(uint32_t{2});  // key layout version (2: no speculation override)
  k.pod(model_fingerprint);
  k.list(r.prompt);
  k.pod(greedy ? 0.f : s.temperature);
  k.pod(s.top_k);
  k.pod(s.top_p);
  k.pod(s.min_p);
  k.pod(s.repetition_penalty);
  k.pod(s.presence_penalty);
  k.pod(s.frequency_penalty);
  k.pod(static_cast<uint64_t>(s.logit_bias.size()));
  for (const auto& [id, bias] : s.logit_bias) {
    k.pod(id);
    k.pod(bias);
  }
  k.pod(greedy ? uint64_t{0} : *s.seed);
  k.pod(r.max_tokens);
  k.list(r.stop_token_ids);
  k.pod(r.logprobs);
  k.pod(r.prompt_logprobs);
  // Not the speculation override: drafts change neither a greedy request's text nor a seeded
  // one's (position-keyed draws, sampling/sampler.h).
  k.pod(r.grammar != nullptr);
  if (r.grammar) {
    k.pod(r.grammar->max_whitespace);
    k.pod(r.grammar->max_depth);
    k.pod(static_cast<uint64_t>(r.grammar->segments.size()));
    for (const auto& segment : r.grammar->segments) {
      k.pod(segment.kind);
      k.pod(static_cast<uint64_t>(segment.alternatives.size()));
      for (const auto& a : segment.alternatives) k.text(a);
    }
  }
  k.pod(static_cast<uint64_t>(stop_strings.size()));
  for (const auto& stop : stop_strings) k.text(stop);
  return k.take();
}

ResponseCache::ResponseCache(int64_t max_bytes) : max_bytes_(max_bytes) { stats_.max_bytes = max_bytes; }

std::shared_ptr<const CachedResponse> ResponseCache::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.end(), lru_, it->second.lru);
  return it->second.response;
}

void ResponseCache::insert(const std::string& key, CachedResponse response) {
  const auto bytes = static_cast<int64_t>(response.bytes() + 2 * key.size());  // the map's key and the LRU list's
  if (bytes > max_bytes_) return;
  std::lock_guard lock(mutex_);
  if (entries_.count(key)) return;  // a concurrent identical request got here first
  while (stats_.bytes + bytes > max_bytes_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.front());
    stats_.bytes -= victim->second.bytes;
    entries_.erase(victim);
    lru_.pop_front();
    ++stats_.evictions;
  }
  entries_[key] = Entry{std::make_shared<const CachedResponse>(std::move(response)), bytes, lru_.insert(lru_.end(), key)};
  stats_.bytes += bytes;
  ++stats_.insertions;
  stats_.entries = static_cast<int64_t>(entries_.size());
}

ResponseCacheStats ResponseCache::stats() const {
  std::lock_guard lock(mutex_);
  ResponseCacheStats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace tachyon::server
