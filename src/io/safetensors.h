// safetensors checkpoints, read by mmap.
//
// A `SafetensorsFile` maps one file and validates its header completely before any tensor
// is handed out: header length within the file, header is a JSON object, every entry has
// a known dtype, a shape whose byte size equals its [begin, end) range, ranges inside the
// data section and not overlapping. Any violation throws tachyon::Error naming the file
// and the tensor.
//
// A `Checkpoint` is the set of tensors of a model directory: one `model.safetensors`, or
// the shards listed by `model.safetensors.index.json` (every shard it names must exist
// and hold exactly the tensors the index maps to it).
//
//   auto ckpt = Checkpoint::open("models/tachyon-demo");
//   const TensorView& w = ckpt.get("model.embed_tokens.weight");  // throws if absent
//   // w.dtype == DType::BF16, w.shape == {8192, 384}, w.data points into the mapping
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/dtype.h"

namespace tachyon::io {
using tachyon::DType;

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // into the file mapping; valid while the owner lives
  size_t num_bytes = 0;
  std::string file;            // path of the file that holds it (for error messages)

  int64_t num_elements() const;
  std::string shape_string() const;  // "[8192, 384]"
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const Json& metadata() const { return metadata_; }  // the "__metadata__" object, or null

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  Json metadata_;
};

// Parses and validates a header (exposed for tests and fuzzing): `file_bytes` is the whole
// file. Returns the tensors with `data` pointing into file_bytes.
std::map<std::string, TensorView> parse_safetensors(const uint8_t* file_bytes, size_t file_size,
                                                    const std::string& path, Json* metadata = nullptr);

class Checkpoint {
 public:
  static Checkpoint open(const std::string& model_dir);
  static Checkpoint open_file(const std::string& path);  // a single .safetensors file

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorView& get(const std::string& name) const;  // throws naming the tensor
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::string& location() const { return location_; }

 private:
  std::string location_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

// Writes tensors to a .safetensors file (used by `tachyon logits` and test/bench tools).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const Json& metadata = Json::object());

}  // namespace tachyon::io
