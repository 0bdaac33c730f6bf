#include "io/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace tachyon::io {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kMaxNameLength = 64 - 1;   // GGML_MAX_NAME includes the terminating zero

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::String: case GgufValueType::Array: return 0;
  }
  return 0;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
      return true;
    default: return false;
  }
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian hosts only (every platform tachyon builds for)
  return v;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "unknown";
}

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  // Block sizes from ggml-common.h's block structs (QK_K = 256).
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return GgmlTypeTraits{"F32", 1, 4};
    case GgmlType::F16: return GgmlTypeTraits{"F16", 1, 2};
    case GgmlType::BF16: return GgmlTypeTraits{"BF16", 1, 2};
    case GgmlType::F64: return GgmlTypeTraits{"F64", 1, 8};
    case GgmlType::I8: return GgmlTypeTraits{"I8", 1, 1};
    case GgmlType::I16: return GgmlTypeTraits{"I16", 1, 2};
    case GgmlType::I32: return GgmlTypeTraits{"I32", 1, 4};
    case GgmlType::I64: return GgmlTypeTraits{"I64", 1, 8};
    case GgmlType::Q4_0: return GgmlTypeTraits{"Q4_0", 32, 18};
    case GgmlType::Q4_1: return GgmlTypeTraits{"Q4_1", 32, 20};
    case GgmlType::Q5_0: return GgmlTypeTraits{"Q5_0", 32, 22};
    case GgmlType::Q5_1: return GgmlTypeTraits{"Q5_1", 32, 24};
    case GgmlType::Q8_0: return GgmlTypeTraits{"Q8_0", 32, 34};
    case GgmlType::Q8_1: return GgmlTypeTraits{"Q8_1", 32, 36};
    case GgmlType::Q2_K: return GgmlTypeTraits{"Q2_K", 256, 84};
    case GgmlType::Q3_K: return GgmlTypeTraits{"Q3_K", 256, 110};
    case GgmlType::Q4_K: return GgmlTypeTraits{"Q4_K", 256, 144};
    case GgmlType::Q5_K: return GgmlTypeTraits{"Q5_K", 256, 176};
    case GgmlType::Q6_K: return GgmlTypeTraits{"Q6_K", 256, 210};
    case GgmlType::Q8_K: return GgmlTypeTraits{"Q8_K", 256, 292};
    case GgmlType::IQ2_XXS: return GgmlTypeTraits{"IQ2_XXS", 256, 66};
    case GgmlType::IQ2_XS: return GgmlTypeTraits{"IQ2_XS", 256, 74};
    case GgmlType::IQ3_XXS: return GgmlTypeTraits{"IQ3_XXS", 256, 98};
    case GgmlType::IQ1_S: return GgmlTypeTraits{"IQ1_S", 256, 50};
    case GgmlType::IQ4_NL: return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case GgmlType::IQ3_S: return GgmlTypeTraits{"IQ3_S", 256, 110};
    case GgmlType::IQ2_S: return GgmlTypeTraits{"IQ2_S", 256, 82};
    case GgmlType::IQ4_XS: return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case GgmlType::IQ1_M: return GgmlTypeTraits{"IQ1_M", 256, 56};
    case GgmlType::TQ1_0: return GgmlTypeTraits{"TQ1_0", 256, 54};
    case GgmlType::TQ2_0: return GgmlTypeTraits{"TQ2_0", 256, 66};
    case GgmlType::MXFP4: return GgmlTypeTraits{"MXFP4", 32, 17};
    case GgmlType::NVFP4: return GgmlTypeTraits{"NVFP4", 64, 36};
    case GgmlType::Q1_0: return GgmlTypeTraits{"Q1_0", 128, 18};
    case GgmlType::Q2_0: return GgmlTypeTraits{"Q2_0", 64, 18};
  }
  return std::nullopt;
}

std::string ggml_type_name(GgmlType type) {
  if (auto t = ggml_type_traits(static_cast<uint32_t>(type))) return std::string(t->name);
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

// ---------------------------------------------------------------------------------------------
// GgufValue accessors

void GgufValue::type_error(std::string_view wanted) const {
  if (type_ == GgufValueType::Array)
    throw Error("GGUF key '{}' is an array of {}, expected {}", key_, gguf_value_type_name(element_type_), wanted);
  throw Error("GGUF key '{}' has type {}, expected {}", key_, gguf_value_type_name(type_), wanted);
}

int64_t GgufValue::element_int(size_t i, GgufValueType t, const uint8_t* p) const {
  p += i * scalar_size(t);
  switch (t) {
    case GgufValueType::U8: return load<uint8_t>(p);
    case GgufValueType::I8: return load<int8_t>(p);
    case GgufValueType::U16: return load<uint16_t>(p);
    case GgufValueType::I16: return load<int16_t>(p);
    case GgufValueType::U32: return load<uint32_t>(p);
    case GgufValueType::I32: return load<int32_t>(p);
    case GgufValueType::I64: return load<int64_t>(p);
    case GgufValueType::U64: {
      const uint64_t v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("GGUF key '{}': value {} does not fit a signed 64-bit integer", key_, v);
      return static_cast<int64_t>(v);
    }
    default: type_error("an integer");
  }
}

int64_t GgufValue::as_int() const {
  if (!is_integer(type_)) type_error("an integer");
  return element_int(0, type_, bytes_);
}

uint64_t GgufValue::as_uint() const {
  if (type_ == GgufValueType::U64) return load<uint64_t>(bytes_);
  const int64_t v = as_int();
  if (v < 0) throw Error("GGUF key '{}': value {} is negative, expected a non-negative integer", key_, v);
  return static_cast<uint64_t>(v);
}

uint32_t GgufValue::as_u32() const {
  const uint64_t v = as_uint();
  if (v > std::numeric_limits<uint32_t>::max())
    throw Error("GGUF key '{}': value {} does not fit 32 bits", key_, v);
  return static_cast<uint32_t>(v);
}

double GgufValue::as_float() const {
  if (type_ == GgufValueType::F32) return load<float>(bytes_);
  if (type_ == GgufValueType::F64) return load<double>(bytes_);
  if (is_integer(type_)) return static_cast<double>(as_int());
  type_error("a number");
}

bool GgufValue::as_bool() const {
  if (type_ != GgufValueType::Bool) type_error("bool");
  return bytes_[0] != 0;
}

std::string_view GgufValue::as_string() const {
  if (type_ != GgufValueType::String) type_error("string");
  return {reinterpret_cast<const char*>(bytes_), static_cast<size_t>(length_)};
}

GgufValueType GgufValue::array_type() const {
  if (type_ != GgufValueType::Array) type_error("an array");
  return element_type_;
}

size_t GgufValue::array_size() const {
  if (type_ != GgufValueType::Array) type_error("an array");
  return static_cast<size_t>(length_);
}

std::vector<std::string_view> GgufValue::as_strings() const {
  if (type_ != GgufValueType::Array || element_type_ != GgufValueType::String) type_error("an array of strings");
  return strings_;
}

std::vector<int64_t> GgufValue::as_ints() const {
  if (type_ != GgufValueType::Array || !is_integer(element_type_)) type_error("an array of integers");
  std::vector<int64_t> out(length_);
  for (size_t i = 0; i < out.size(); ++i) out[i] = element_int(i, element_type_, bytes_);
  return out;
}

std::vector<double> GgufValue::as_floats() const {
  if (type_ != GgufValueType::Array) type_error("an array of numbers");
  std::vector<double> out(length_);
  if (element_type_ == GgufValueType::F32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = load<float>(bytes_ + 4 * i);
  } else if (element_type_ == GgufValueType::F64) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = load<double>(bytes_ + 8 * i);
  } else if (is_integer(element_type_)) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(element_int(i, element_type_, bytes_));
  } else {
    type_error("an array of numbers");
  }
  return out;
}

std::vector<float> GgufValue::as_f32s() const {
  if (type_ == GgufValueType::Array && element_type_ == GgufValueType::F32) {
    std::vector<float> out(length_);
    if (length_) std::memcpy(out.data(), bytes_, length_ * 4);
    return out;
  }
  const std::vector<double> d = as_floats();
  return std::vector<float>(d.begin(), d.end());
}

std::vector<bool> GgufValue::as_bools() const {
  if (type_ != GgufValueType::Array || element_type_ != GgufValueType::Bool) type_error("an array of bools");
  std::vector<bool> out(length_);
  for (size_t i = 0; i < out.size(); ++i) out[i] = bytes_[i] != 0;
  return out;
}

std::string GgufValue::summary() const {
  switch (type_) {
    case GgufValueType::String: {
      std::string s(as_string());
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      for (char& c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      return s;
    }
    case GgufValueType::Bool: return as_bool() ? "true" : "false";
    case GgufValueType::F32: case GgufValueType::F64: return fmt::format("{}", as_float());
    case GgufValueType::Array:
      return fmt::format("[{} {}]", length_, gguf_value_type_name(element_type_));
    case GgufValueType::U64: return std::to_string(as_uint());
    default: return std::to_string(as_int());
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing

int64_t GgufTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string GgufTensor::dims_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Reads the header with every length checked against the bytes left before it is used.
class GgufParser {
 public:
  GgufParser(const uint8_t* bytes, uint64_t size, const std::string& path) : p_(bytes), size_(size), path_(path) {}

  void parse(GgufFile& file) {
    file.path_ = path_;
    file.size_ = size_;
    if (size_ < 4 || std::memcmp(p_, "GGUF", 4) != 0)
      throw Error("{}: not a GGUF file (the first 4 bytes are not 'GGUF')", path_);
    pos_ = 4;
    file.version_ = u32("the version");
    if (file.version_ == 1)
      throw Error("{}: GGUF version 1 is not supported (32-bit counts; re-convert the model with a current llama.cpp)",
                  path_);
    if (file.version_ != 2 && file.version_ != 3) {
      // A byte-swapped version is how a big-endian file shows up.
      if ((file.version_ & 0x00ffffff) == 0 && (file.version_ >> 24) >= 1 && (file.version_ >> 24) <= 3)
        throw Error("{}: GGUF file is big-endian (version bytes {:#010x}); only little-endian files are supported",
                    path_, file.version_);
      throw Error("{}: GGUF version {} is not supported (supported: 2, 3)", path_, file.version_);
    }
    const uint64_t n_tensors = u64("the tensor count");
    const uint64_t n_kv = u64("the metadata count");
    // Every key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes, every tensor info
    // at least 8 + 4 + 4 + 8: counts that cannot fit the file are refused before any allocation.
    if (n_kv > remaining() / 13)
      throw Error("{}: GGUF header claims {} metadata entries, more than the {} bytes left can hold", path_, n_kv,
                  remaining());
    file.values_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
      GgufValue v;
      v.key_ = std::string(string_at("metadata key #" + std::to_string(i)));
      if (v.key_.empty()) throw Error("{}: metadata key #{} is empty", path_, i);
      const uint32_t type = u32("the type of key '" + v.key_ + "'");
      if (!known_value_type(type)) throw Error("{}: metadata key '{}' has unknown value type {}", path_, v.key_, type);
      v.type_ = static_cast<GgufValueType>(type);
      read_value(v);
      if (!file.value_index_.emplace(v.key_, file.values_.size()).second)
        throw Error("{}: metadata key '{}' appears twice", path_, v.key_);
      file.values_.push_back(std::move(v));
    }
    if (const GgufValue* a = file.find("general.alignment")) {
      if (a->type() != GgufValueType::U32)
        throw Error("{}: 'general.alignment' has type {}, expected u32", path_, gguf_value_type_name(a->type()));
      const uint64_t al = a->as_uint();
      if (al == 0 || (al & (al - 1)) != 0)
        throw Error("{}: 'general.alignment' is {}, not a power of two", path_, al);
      file.alignment_ = al;
    } else {
      file.alignment_ = kDefaultAlignment;
    }

    if (n_tensors > remaining() / 24)
      throw Error("{}: GGUF header claims {} tensors, more than the {} bytes left can hold", path_, n_tensors,
                  remaining());
    file.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) file.tensors_.push_back(read_tensor_info(i, file.alignment_));

    // The data section starts at the next multiple of the alignment after the header.
    const uint64_t header_end = pos_;
    const uint64_t data_offset = (header_end + file.alignment_ - 1) / file.alignment_ * file.alignment_;
    if (file.tensors_.empty()) {
      file.data_offset_ = std::min<uint64_t>(data_offset, size_);
    } else {
      if (data_offset > size_)
        throw Error("{}: the data section would start at byte {} but the file has {} bytes (truncated?)", path_,
                    data_offset, size_);
      file.data_offset_ = data_offset;
    }
    const uint64_t data_size = size_ - file.data_offset_;
    std::vector<std::pair<uint64_t, size_t>> order;  // (offset, tensor index)
    for (size_t i = 0; i < file.tensors_.size(); ++i) {
      GgufTensor& t = file.tensors_[i];
      if (!file.tensor_index_.emplace(t.name, i).second)
        throw Error("{}: tensor '{}' appears twice", path_, t.name);
      if (t.offset > data_size || t.num_bytes > data_size - t.offset)
        throw Error("{}: tensor '{}' ({} bytes at data offset {}) ends past the end of the file ({} data bytes; "
                    "truncated?)",
                    path_, t.name, t.num_bytes, t.offset, data_size);
      t.data = p_ + file.data_offset_ + t.offset;
      order.emplace_back(t.offset, i);
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensor& prev = file.tensors_[order[k - 1].second];
      const GgufTensor& cur = file.tensors_[order[k].second];
      if (cur.offset < prev.offset + prev.num_bytes)
        throw Error("{}: tensors '{}' and '{}' overlap in the data section", path_, prev.name, cur.name);
    }
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  const std::string& path_;
  uint64_t pos_ = 0;

  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      throw Error("{}: {} needs {} bytes at offset {} but only {} are left (truncated file?)", path_, what, n, pos_,
                  remaining());
  }
  uint32_t u32(const std::string& what) {
    need(4, what);
    const uint32_t v = load<uint32_t>(p_ + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const std::string& what) {
    need(8, what);
    const uint64_t v = load<uint64_t>(p_ + pos_);
    pos_ += 8;
    return v;
  }
  std::string_view string_at(const std::string& what) {
    const uint64_t n = u64("the length of " + what);
    need(n, what + " (" + std::to_string(n) + " characters)");
    const std::string_view s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

  void read_value(GgufValue& v) {
    const std::string what = "the value of '" + v.key_ + "'";
    if (v.type_ == GgufValueType::String) {
      const std::string_view s = string_at(what);
      v.bytes_ = reinterpret_cast<const uint8_t*>(s.data());
      v.length_ = s.size();
      return;
    }
    if (v.type_ != GgufValueType::Array) {
      const size_t n = scalar_size(v.type_);
      need(n, what);
      v.bytes_ = p_ + pos_;
      if (v.type_ == GgufValueType::Bool && v.bytes_[0] > 1)
        throw Error("{}: metadata key '{}' is a bool with byte value {}", path_, v.key_, v.bytes_[0]);
      pos_ += n;
      return;
    }
    const uint32_t et = u32("the element type of '" + v.key_ + "'");
    if (!known_value_type(et)) throw Error("{}: metadata key '{}' is an array of unknown type {}", path_, v.key_, et);
    v.element_type_ = static_cast<GgufValueType>(et);
    if (v.element_type_ == GgufValueType::Array)
      throw Error("{}: metadata key '{}' is an array of arrays, which GGUF readers do not support", path_, v.key_);
    const uint64_t count = u64("the length of '" + v.key_ + "'");
    v.length_ = count;
    v.bytes_ = p_ + pos_;
    if (v.element_type_ == GgufValueType::String) {
      if (count > remaining() / 8)
        throw Error("{}: metadata key '{}' claims {} strings, more than the {} bytes left can hold", path_, v.key_,
                    count, remaining());
      v.strings_.reserve(count);
      for (uint64_t i = 0; i < count; ++i)
        v.strings_.push_back(string_at("element " + std::to_string(i) + " of '" + v.key_ + "'"));
      return;
    }
    const size_t es = scalar_size(v.element_type_);
    if (count > remaining() / es)
      throw Error("{}: metadata key '{}' claims {} elements of {} bytes but only {} bytes are left (truncated?)",
                  path_, v.key_, count, es, remaining());
    if (v.element_type_ == GgufValueType::Bool)
      for (uint64_t i = 0; i < count; ++i)
        if (p_[pos_ + i] > 1)
          throw Error("{}: metadata key '{}': element {} is a bool with byte value {}", path_, v.key_, i, p_[pos_ + i]);
    pos_ += count * es;
  }

  GgufTensor read_tensor_info(uint64_t index, uint64_t alignment) {
    GgufTensor t;
    t.name = std::string(string_at("the name of tensor #" + std::to_string(index)));
    if (t.name.empty()) throw Error("{}: tensor #{} has an empty name", path_, index);
    if (t.name.size() > kMaxNameLength)
      throw Error("{}: tensor name '{}' is {} characters, longer than ggml's {}", path_, t.name, t.name.size(),
                  kMaxNameLength);
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t n_dims = u32("the dimension count of " + what);
    if (n_dims == 0 || n_dims > kMaxDims)
      throw Error("{}: {} has {} dimensions (1 to {} allowed)", path_, what, n_dims, kMaxDims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = u64("dimension " + std::to_string(d) + " of " + what);
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("{}: {} has dimension {} of size {}", path_, what, d, static_cast<int64_t>(ne));
      if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
        throw Error("{}: {} has more elements than fit 63 bits", path_, what);
      elements *= ne;
      t.dims.push_back(static_cast<int64_t>(ne));
    }
    const uint32_t type = u32("the type of " + what);
    const auto traits = ggml_type_traits(type);
    if (!traits) throw Error("{}: {} has unknown ggml type {}", path_, what, type);
    t.type = static_cast<GgmlType>(type);
    if (t.dims[0] % traits->block_elements != 0)
      throw Error("{}: {} of type {} has {} elements per row, not a multiple of its block of {}", path_, what,
                  traits->name, t.dims[0], traits->block_elements);
    const uint64_t blocks = elements / static_cast<uint64_t>(traits->block_elements);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(traits->block_bytes))
      throw Error("{}: {} byte size overflows", path_, what);
    t.num_bytes = blocks * static_cast<uint64_t>(traits->block_bytes);
    t.offset = u64("the data offset of " + what);
    if (t.offset % alignment != 0)
      throw Error("{}: {} starts at data offset {}, not a multiple of the alignment {}", path_, what, t.offset,
                  alignment);
    return t;
  }
};

std::shared_ptr<const GgufFile> GgufFile::parse(const uint8_t* bytes, size_t size, const std::string& name) {
  std::shared_ptr<GgufFile> file(new GgufFile());
  GgufParser(bytes, size, name).parse(*file);
  return file;
}

std::shared_ptr<const GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot stat '{}': {}", path, std::strerror(err));
  }
  std::shared_ptr<GgufFile> file(new GgufFile());
  const size_t size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot mmap '{}': {}", path, std::strerror(err));
    }
    file->mapping_ = m;
    file->size_ = size;
  }
  ::close(fd);
  GgufParser(static_cast<const uint8_t*>(file->mapping_), size, path).parse(*file);
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = value_index_.find(key);
  return it == value_index_.end() ? nullptr : &values_[it->second];
}

const GgufValue& GgufFile::get(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw Error("{}: GGUF metadata key '{}' is missing", path_, key);
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensor* t = find_tensor(name)) return *t;
  throw Error("{}: GGUF tensor '{}' is missing", path_, name);
}

bool is_gguf_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, 4);
  ::close(fd);
  return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace tachyon::io
