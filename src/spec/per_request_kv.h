// Per-request state of a drafter that keeps one KV sequence per request in its own cache:
// the sequence is released when the request finishes or the drafter goes away.
#pragma once

#include <unordered_map>

#include "kv/kv_cache.h"
#include "spec/drafter.h"

namespace tachyon::spec {

template <typename State>  // State has a member `kv::SeqId seq`
class PerRequestKv {
 public:
  explicit PerRequestKv(kv::KvCache& kv) : kv_(kv) {}
  ~PerRequestKv() {
    for (auto& [key, state] : states_) kv_.remove_sequence(state.seq);
  }
  PerRequestKv(const PerRequestKv&) = delete;
  PerRequestKv& operator=(const PerRequestKv&) = delete;

  State* find(RequestKey key) {
    auto it = states_.find(key);
    return it == states_.end() ? nullptr : &it->second;
  }
  State& emplace(RequestKey key, State state) { return states_.emplace(key, std::move(state)).first->second; }
  void erase(RequestKey key) {
    auto it = states_.find(key);
    if (it == states_.end()) return;
    kv_.remove_sequence(it->second.seq);
    states_.erase(it);
  }

 private:
  kv::KvCache& kv_;
  std::unordered_map<RequestKey, State> states_;
};

}  // namespace tachyon::spec
