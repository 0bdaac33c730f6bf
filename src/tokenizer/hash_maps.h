// Open-addressing hash tables for the vocabulary (string -> id) and the merge table
// ((left id, right id) -> rank, result id). Built once at load, read-only afterwards, so
// lookups are lock-free and safe from any thread. Linear probing, power-of-two capacity,
// load factor <= 0.5.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::tokenizer {

inline uint64_t hash_bytes(std::string_view s) {
  // 8 bytes at a time, multiply-xorshift mixing; good enough for token strings.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  }
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

// string -> int32 id. Keys are copied into one arena.
class StringIdMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
  }
  // Inserts or overwrites.
  void insert(std::string_view key, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot* s = probe(key);
    if (s->id < 0) {
      s->offset = static_cast<uint32_t>(arena_.size());
      s->length = static_cast<uint32_t>(key.size());
      arena_.append(key);
      ++size_;
    }
    s->id = id;
  }
  // -1 when absent.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash_bytes(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.length == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) return s.id;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t id = -1;
  };
  Slot* probe(std::string_view key) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash_bytes(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.id < 0) return &s;
      if (s.length == key.size() && std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) return &s;
    }
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      size_t i = hash_bytes(std::string_view(arena_.data() + s.offset, s.length)) & mask;
      while (slots_[i].id >= 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0;
};

// (left, right) token ids -> (rank, merged id).
class MergeMap {
 public:
  struct Value {
    int32_t rank = -1;
    int32_t id = -1;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
  }
  // Inserts or overwrites (a repeated pair keeps its last rank, as Hugging Face's HashMap).
  void insert(int32_t left, int32_t right, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t key = make_key(left, right);
    const size_t mask = slots_.size() - 1;
    size_t i = mix(key) & mask;
    while (slots_[i].value.rank >= 0 && slots_[i].key != key) i = (i + 1) & mask;
    if (slots_[i].value.rank < 0) ++size_;
    slots_[i].key = key;
    slots_[i].value = v;
  }
  const Value* find(int32_t left, int32_t right) const {
    const uint64_t key = make_key(left, right);
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.value.rank < 0) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    Value value;
  };
  static uint64_t make_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return k;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    size_ = 0;
    for (const Slot& s : old)
      if (s.value.rank >= 0) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFF), s.value);
  }
  std::vector<Slot> slots_ = std::vector<Slot>(16);
  size_t size_ = 0;
};

}  // namespace tachyon::tokenizer
