// The common part of every quantized-checkpoint source: a safetensors checkpoint in which some
// tensors are stored as a published packed layout (a primary tensor such as `X.qweight` plus its
// companions `X.scales`, `X.qzeros`, ...). The source lists each such group under its logical
// Hugging Face name (`X.weight`), hides the companions, hands float tensors through unchanged,
// and asks the layout (a subclass, one per file in model/sources/) to describe and repack the
// quantized ones into kernels/weight.h's formats.
//
// Every layout validates all parts of a tensor in describe() (dtypes, shapes, group sizes), so
// WeightBinder's info() pass refuses a bad checkpoint, naming the tensor, before anything loads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

class PackedSource : public WeightSource {
 public:
  PackedSource(std::shared_ptr<io::Checkpoint> checkpoint, std::string method);
  const std::string& location() const override { return checkpoint_->location(); }
  bool has(const std::string& name) const override;
  Info info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  HostTensor load(const std::string& name) const override;
  const std::string& method() const { return method_; }

 protected:
  // The logical name of a stored tensor that is the primary part of a quantized tensor
  // (`X.qweight` -> `X.weight`), or nothing for any other tensor.
  virtual std::optional<std::string> logical_name(const io::TensorView& stored) const = 0;
  // The stored companions of a quantized tensor (hidden from names(); they need not exist).
  virtual std::vector<std::string> companions(const std::string& logical) const = 0;
  // Validates every part; throws tachyon::Error naming the tensor. `type` says how it is stored.
  virtual Info describe(const std::string& logical) const = 0;
  virtual HostTensor repack(const std::string& logical) const = 0;
  // Must be called by the subclass's constructor (the virtual functions above are needed).
  void index();

  const io::Checkpoint& checkpoint() const { return *checkpoint_; }
  // A companion tensor; throws "tensor 'X.scales' is missing (needed by 'X.weight', <method>)".
  const io::TensorView& part(const std::string& logical, const std::string& stored) const;
  const std::string& primary_of(const std::string& logical) const { return primary_.at(logical); }

 private:
  std::shared_ptr<io::Checkpoint> checkpoint_;
  std::string method_;
  std::map<std::string, std::string> primary_;  // logical name -> stored primary tensor
  std::map<std::string, bool> hidden_;          // stored companions of quantized tensors
};

// Helpers shared by the layouts.
std::string shape_text(const std::vector<int64_t>& shape);
// Throws naming `t` unless its dtype is one of `allowed`.
void expect_dtype(const io::TensorView& t, std::initializer_list<DType> allowed, const std::string& why);
void expect_shape(const io::TensorView& t, const std::vector<int64_t>& shape, const std::string& why);
// Element i of an F32 / F16 / BF16 tensor as float (exact).
float float_at(const io::TensorView& t, int64_t i);

// A published integer layout seen through accessors: element (r, c) of the logical [rows, cols]
// weight is (code(r, c) − zero(g, r)) · scale(g, r) with g = group_of_col[c] (one column of the
// published per-group tables per column, so act-order g_idx is expressed exactly).
struct IntegerGrid {
  int64_t rows = 0, cols = 0;
  int bits = 4;
  int64_t group_size = 0;             // the published group size (columns per group)
  std::vector<int32_t> group_of_col;  // [cols]
  std::function<uint32_t(int64_t r, int64_t c)> code;  // unsigned code in [0, 2^bits)
  std::function<float(int64_t g, int64_t r)> scale;
  std::function<int32_t(int64_t g, int64_t r)> zero;  // in code units; empty: 2^(bits − 1) (symmetric)
  DType scale_dtype = DType::F16;     // the published scales' dtype (kept when exact)
};
// Packs the grid into the smallest exact internal format: Symmetric when every zero is
// 2^(bits − 1), else Affine (b = −z·s, scales/biases in the published dtype when b is exact in
// it, else F32), in groups of uniform_group_block columns. When there is none (act-order g_idx
// that scatters groups) the weight is dequantized to F32 (exact) and `note` says so.
HostTensor pack_integer_grid(const IntegerGrid& grid, std::string* note);
// The block pack_integer_grid uses: group_size when it is 32, 64 or 128, else the largest of 128,
// 64, 32 that divides the columns with each aligned block inside one group; 0 when none does.
int64_t uniform_group_block(const std::vector<int32_t>& group_of_col, int64_t group_size);

// A HostTensor of a quantized format built from owned codes / scales / biases.
HostTensor make_quantized(kernels::WeightFormat format, int64_t rows, int64_t cols, int bits, int64_t group,
                          DType scale_dtype, std::vector<uint8_t> codes, std::vector<uint8_t> scales,
                          std::vector<uint8_t> biases, std::vector<int64_t> shape);
// Codes packed as kernels/weight.h's host layout (4-bit: two per byte, even column low).
std::vector<uint8_t> pack_codes(int64_t rows, int64_t cols, int bits, const std::function<uint32_t(int64_t, int64_t)>& code);
std::string format_name(const Weight& w);  // "Affine 4-bit g64 F16", "Fp8Block 128", ...

// The layouts (one file each). `q` is the config's quantization object.
std::shared_ptr<WeightSource> open_mlx_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);
std::shared_ptr<WeightSource> open_fp8_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);
std::shared_ptr<WeightSource> open_awq_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);
std::shared_ptr<WeightSource> open_gptq_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);
std::shared_ptr<WeightSource> open_compressed_tensors_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);
std::shared_ptr<WeightSource> open_mxfp4_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q);

}  // namespace tachyon::model
