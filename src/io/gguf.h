// GGUF files (llama.cpp's single-file model format), read by mmap.
//
// Layout (little-endian): "GGUF", u32 version (2 or 3), u64 tensor count, u64 key-value count,
// the key-value pairs (string key, u32 value type, value), the tensor infos (string name, u32
// dimension count, u64 per dimension with the contiguous one first, u32 ggml type, u64 offset
// into the data section), padding to `general.alignment` (default 32), the data section.
//
// `GgufFile` validates everything before it hands anything out: every count, string length and
// array length is checked against the bytes left before it is read, value and tensor types are
// known, keys and tensor names are unique, `general.alignment` is a u32 power of two, tensor
// dimensions are positive and their element count does not overflow, the first dimension is a
// multiple of the type's block, offsets are aligned and every tensor's bytes lie inside the
// data section without overlapping another. Any violation throws tachyon::Error naming the
// file and the key or tensor. Values and tensor data point into the mapping and stay valid
// while the GgufFile lives.
//
//   auto file = GgufFile::open("qwen3-0.6b-q4_0.gguf");
//   std::string arch(file->get("general.architecture").as_string());  // "qwen3"
//   int64_t layers = file->get(arch + ".block_count").as_int();
//   std::vector<std::string_view> tokens = file->get("tokenizer.ggml.tokens").as_strings();
//   const GgufTensor* w = file->find_tensor("blk.0.attn_q.weight");    // w->dims = {hidden, q_dim}
//   // w->type == GgmlType::Q4_0, w->data points at w->num_bytes bytes of blocks
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::io {

// Metadata value types (gguf.h's gguf_type).
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType type);  // "u32", "string", "array", ...

// Tensor element types (ggml.h's ggml_type); numbers as stored in files.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19,
  IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};
// Block geometry of a type: `block_elements` values stored in `block_bytes` bytes (1 and the
// element size for plain types). nullopt for numbers ggml does not define (or removed).
struct GgmlTypeTraits {
  std::string_view name;  // "Q4_K", "BF16", "IQ2_XS", ... (upper case, as llama.cpp prints file types)
  int64_t block_elements;
  int64_t block_bytes;
};
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);
std::string ggml_type_name(GgmlType type);  // traits' name, or "type N" for an unknown number

// One metadata value. Scalars and strings are read through the accessors; each throws
// tachyon::Error naming the key when the stored type does not fit.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  const std::string& key() const { return key_; }

  // Any integer type (u8..i64), range-checked into the result type.
  int64_t as_int() const;
  uint64_t as_uint() const;  // refuses negative values
  uint32_t as_u32() const;   // as_uint() that must fit 32 bits
  // F32 or F64 (integers are accepted too: some writers store e.g. rope factors as ints).
  double as_float() const;
  bool as_bool() const;
  std::string_view as_string() const;

  // Arrays: element type and count; then the elements converted like the scalar accessors.
  bool is_array() const { return type_ == GgufValueType::Array; }
  GgufValueType array_type() const;
  size_t array_size() const;
  std::vector<std::string_view> as_strings() const;  // array of strings
  std::vector<int64_t> as_ints() const;              // array of any integer type
  std::vector<double> as_floats() const;             // array of f32/f64 (or integers)
  std::vector<float> as_f32s() const;                // as_floats() narrowed (scores, ...)
  std::vector<bool> as_bools() const;                // array of bool

  // A short rendering for `tachyon info` ("qwen3", "40960", "[151936 strings]").
  std::string summary() const;

 private:
  friend class GgufParser;
  std::string key_;
  GgufValueType type_ = GgufValueType::U8;
  const uint8_t* bytes_ = nullptr;  // scalar: the value; string: its characters; array: first element
  uint64_t length_ = 0;             // string: characters; array: elements
  GgufValueType element_type_ = GgufValueType::U8;
  std::vector<std::string_view> strings_;  // array of strings: the elements (validated at parse time)
  [[noreturn]] void type_error(std::string_view wanted) const;
  int64_t element_int(size_t i, GgufValueType t, const uint8_t* p) const;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous one (a [rows, cols] matrix is {cols, rows})
  uint64_t offset = 0;        // into the data section
  const uint8_t* data = nullptr;
  uint64_t num_bytes = 0;

  int64_t num_elements() const;
  std::string dims_string() const;  // "[384, 8192]" in ggml order
};

class GgufFile {
 public:
  // Maps and validates `path`.
  static std::shared_ptr<const GgufFile> open(const std::string& path);
  // Validates `size` bytes already in memory (tests, fuzzing); they must outlive the result.
  static std::shared_ptr<const GgufFile> parse(const uint8_t* bytes, size_t size, const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts in the file
  uint64_t file_size() const { return size_; }

  // Metadata in file order; lookups by key.
  const std::vector<GgufValue>& metadata() const { return values_; }
  const GgufValue* find(std::string_view key) const;
  const GgufValue& get(std::string_view key) const;  // throws naming the key and the file when absent

  // Tensors in file order; lookups by name.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;  // throws naming the tensor when absent

 private:
  friend class GgufParser;
  GgufFile() = default;
  std::string path_;
  void* mapping_ = nullptr;  // set when open() mapped the file
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufValue> values_;
  std::map<std::string, size_t, std::less<>> value_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// True when the first bytes of `path` are the GGUF magic (cheap: reads 4 bytes).
bool is_gguf_file(const std::string& path);

}  // namespace tachyon::io
