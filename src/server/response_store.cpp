#include "server/response_store.h"

namespace tachyon::server {

void ResponseStore::erase(std::list<Entry>::iterator it) {
  bytes_ -= it->messages.size() + it->id.size();
  index_.erase(it->id);
  entries_.erase(it);
}

void ResponseStore::put(const std::string& id, const OrderedJson& messages) {
  std::string text = messages.dump();
  text.shrink_to_fit();  // dump() grows its string by doubling
  const size_t size = text.size() + id.size();
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(id); it != index_.end()) erase(it->second);
  if (size > max_bytes_ || max_entries_ == 0) return;
  entries_.push_front(Entry{id, std::move(text)});
  index_[id] = entries_.begin();
  bytes_ += size;
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) erase(std::prev(entries_.end()));
}

std::optional<OrderedJson> ResponseStore::get(const std::string& id) {
  std::string text;
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    entries_.splice(entries_.begin(), entries_, it->second);
    text = it->second->messages;
  }
  return OrderedJson::parse(text);
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace tachyon::server
