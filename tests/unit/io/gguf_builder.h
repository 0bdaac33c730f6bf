// Writes GGUF bytes for tests: metadata of every value type and tensors with raw data, laid out
// as llama.cpp writes them (header, tensor infos, padding to the alignment, aligned data). Tests
// then break one field at a time to check that the reader refuses it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace tachyon::io::testing {

class GgufBuilder {
 public:
  GgufBuilder& version(uint32_t v) { version_ = v; return *this; }
  GgufBuilder& alignment(uint64_t a) { alignment_ = a; return *this; }

  template <typename T>
  GgufBuilder& scalar(const std::string& key, GgufValueType type, T value) {
    key_header(key, type);
    put(&kv_, value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& u32(const std::string& key, uint32_t v) { return scalar(key, GgufValueType::U32, v); }
  GgufBuilder& i32(const std::string& key, int32_t v) { return scalar(key, GgufValueType::I32, v); }
  GgufBuilder& u64(const std::string& key, uint64_t v) { return scalar(key, GgufValueType::U64, v); }
  GgufBuilder& f32(const std::string& key, float v) { return scalar(key, GgufValueType::F32, v); }
  GgufBuilder& boolean(const std::string& key, bool v) { return scalar(key, GgufValueType::Bool, uint8_t(v)); }
  GgufBuilder& str(const std::string& key, const std::string& v) {
    key_header(key, GgufValueType::String);
    put_string(&kv_, v);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& strings(const std::string& key, const std::vector<std::string>& v) {
    key_header(key, GgufValueType::Array);
    put(&kv_, uint32_t(GgufValueType::String));
    put(&kv_, uint64_t(v.size()));
    for (const auto& s : v) put_string(&kv_, s);
    ++n_kv_;
    return *this;
  }
  template <typename T>
  GgufBuilder& array(const std::string& key, GgufValueType element_type, const std::vector<T>& v) {
    key_header(key, GgufValueType::Array);
    put(&kv_, uint32_t(element_type));
    put(&kv_, uint64_t(v.size()));
    for (const T& x : v) put(&kv_, x);
    ++n_kv_;
    return *this;
  }
  // A tensor with dims in ggml order and its raw bytes (placed at the next aligned offset unless
  // `offset` is given).
  GgufBuilder& tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                      const std::vector<uint8_t>& bytes, int64_t offset = -1) {
    uint64_t off = offset >= 0 ? uint64_t(offset) : (data_.size() + alignment_ - 1) / alignment_ * alignment_;
    put_string(&infos_, name);
    put(&infos_, uint32_t(dims.size()));
    for (int64_t d : dims) put(&infos_, uint64_t(d));
    put(&infos_, uint32_t(type));
    put(&infos_, off);
    if (data_.size() < off + bytes.size()) data_.resize(off + bytes.size());
    if (!bytes.empty()) std::memcpy(data_.data() + off, bytes.data(), bytes.size());  // (memcpy from null is UB)
    ++n_tensors_;
    return *this;
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    out.insert(out.end(), {'G', 'G', 'U', 'F'});
    put(&out, version_);
    put(&out, n_tensors_);
    put(&out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), infos_.begin(), infos_.end());
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

 private:
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::vector<uint8_t> kv_, infos_, data_;

  template <typename T>
  static void put(std::vector<uint8_t>* out, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out->insert(out->end(), p, p + sizeof(T));
  }
  static void put_string(std::vector<uint8_t>* out, const std::string& s) {
    put(out, uint64_t(s.size()));
    out->insert(out->end(), s.begin(), s.end());
  }
  void key_header(const std::string& key, GgufValueType type) {
    put_string(&kv_, key);
    put(&kv_, uint32_t(type));
  }
};

}  // namespace tachyon::io::testing
