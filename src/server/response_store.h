// The Responses API's stored responses, for `previous_response_id`: each stored response keeps
// its conversation (the input messages without the request's instructions, which do not carry
// over, plus the output as an assistant turn), so a follow-up needs only its new input. Bounded,
// in memory: the least recently used entries go first once there are more than `max_entries`
// or their conversations take more than `max_bytes` (JSON text). Each is kept as its JSON text,
// parsed again by get(): the bound in bytes is then what the store holds (a JSON tree took
// several times its text: one allocation per string, object and array), and a server's memory
// while the store fills grows by little more than the text of what it keeps. `store: false`
// responses are never put here. Thread-safe.
//
//   ResponseStore store(1000, 64 << 20);
//   store.put("resp_abc", conversation);
//   std::optional<OrderedJson> messages = store.get("resp_abc");   // nullopt: unknown or evicted
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/request.h"

namespace tachyon::server {

inline constexpr size_t kDefaultStoredResponses = 1000;
inline constexpr size_t kDefaultStoredResponseBytes = size_t{64} << 20;

class ResponseStore {
 public:
  ResponseStore(size_t max_entries = kDefaultStoredResponses, size_t max_bytes = kDefaultStoredResponseBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Stores (or replaces) `id`'s conversation, then evicts the oldest until within the bounds. A
  // conversation larger than max_bytes alone is not kept.
  void put(const std::string& id, const OrderedJson& messages);
  // The conversation, and `id` becomes the most recently used; nullopt when not stored.
  std::optional<OrderedJson> get(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    std::string messages;  // JSON text
  };
  void erase(std::list<Entry>::iterator it);

  size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace tachyon::server
