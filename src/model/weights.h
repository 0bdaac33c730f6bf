// Fail-closed weight loading. An architecture binds every tensor it needs to a field,
// with the shape it expects; `load()` then checks all of them — presence, shape, dtype —
// before anything runs, and throws one message naming each bad tensor and its file.
// Only then are the weights handed to the backend (fused where asked), which keeps its own
// copy in the layout its kernels read.
//
//   WeightBinder w(source, backend);  // a WeightSource (model/sources/weight_source.h)
//   w.bind(&layer.input_norm, p + "input_layernorm.weight", {hidden});
//   w.bind_fused(&layer.qkv, {p + "q_proj.weight", p + "k_proj.weight", p + "v_proj.weight"},
//                {{q_dim, hidden}, {kv_dim, hidden}, {kv_dim, hidden}});
//   w.bind_optional(&lm_head, "lm_head.weight", {vocab, hidden});  // absent: stays empty
//   w.load();
//
// Weight declarations state the logical shape. A tensor keeps the form its source hands out (a
// float dtype, or a quantized format of kernels/weight.h; the backend repacks it for its
// kernels); Remap::to_f32 converts to float32 at load. Element remaps read dense tensors; a
// quantized one is dequantized first (and stays float32). With `--quantize-decode` a weight that
// `--quantize` would quantize keeps its stored form and gets that quantized form beside it as
// its decode copy (kernels::Weight::decode), which decode rows read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

using kernels::Weight;

class WeightBinder {
 public:
  WeightBinder(const WeightSource& source, kernels::Backend& backend) : source_(source), backend_(backend) {}

  // How the model reads a weight. Matmul: only through Backend::matmul (linear layers, LM
  // heads); a drafter's such weights go through Backend::upload_draft_weight (kernels::DraftWeights).
  // Expert: a MoE expert's matrix (most of a MoE model's bytes): `--quantize` quantizes it into a
  // group format the grouped expert kernels read (int8: Symmetric g64, int4: Affine g64, g32 where 64 does not divide the columns; fp8:
  // blocks); a drafter's stay as stored. TiedHead: the embedding table that is also the LM head:
  // `--quantize int8|int4` store it as int8 Symmetric g64 (4 bits there would cost accuracy:
  // llama.cpp's Q4_K_M likewise keeps its output matrix at 6 bits); fp8 leaves it as stored (on
  // the demo model an int8 or e4m3 head on top of fp8 layers took the code prompt's greedy match
  // with bf16 from 24 to 9 of 24 tokens). Router: a MoE router's matrix, read only through
  // Backend::router_logits (Backend::upload_router_weight), never quantized.
  enum class Use { Any, Matmul, Expert, TiedHead, Router };
  void bind(Weight* target, const std::string& name, std::vector<int64_t> shape, Use use = Use::Any);
  void bind_optional(Weight* target, const std::string& name, std::vector<int64_t> shape);
  // Concatenates the tensors along dim 0 into one weight (e.g. q/k/v into qkv). All parts
  // must be present with the given shapes; 1-D parts (biases) concatenate the same way.
  void bind_fused(Weight* target, const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                  Use use = Use::Any);

  // A weight built from one checkpoint tensor of `shape` by an element mapping: element (r, c)
  // of the [rows, cols] result is the tensor's element at row-major flat index source(r, c).
  // Slices, transposes and de-interleaving (gpt-oss fused experts, MLA kv_b heads) are all
  // remaps. With to_f32 the result is stored as float32 (small vectors read by ops as float*).
  struct Remap {
    int64_t rows = 0, cols = 0;
    std::function<int64_t(int64_t r, int64_t c)> source;
    bool to_f32 = false;
  };
  void bind_remapped(Weight* target, const std::string& name, std::vector<int64_t> shape, Remap remap,
                     Use use = Use::Any);

  // Validates every binding, then loads. Throws tachyon::Error listing every problem.
  void load();
  // How many weights load() gave a decode copy (WeightSource::decode_quantization).
  int64_t decode_copies() const { return decode_copies_; }

 private:
  struct Binding {
    Weight* target;
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    bool optional;
    std::shared_ptr<Remap> remap;  // null: the tensor as it is
    Use use = Use::Any;
  };
  Weight upload(const Binding& b, const Weight& host);
  // The form `--quantize` in `mode` gives a weight of this use (kernels/quantize.h), or nothing
  // when it stays as stored.
  static std::optional<kernels::QuantizedWeight> quantized_form(Use use, const Weight& host, kernels::QuantizeMode mode);
  std::vector<Binding> bindings_;
  int64_t decode_copies_ = 0;
  const WeightSource& source_;
  kernels::Backend& backend_;
};

// The parts stacked row-wise into one tensor (q, k and v into qkv): codes, scales and biases of
// a quantized format each concatenated; 1-D parts become one longer vector. Parts must share
// their storage (format, dtype, group); throws naming `name` otherwise.
HostTensor concat_rows(const std::vector<HostTensor>& parts, const std::string& name);
// Rows `rows` of a quantized (Affine, Symmetric, Mxfp4) row-major tensor, codes with their
// scales and biases; an empty HostTensor for a format whose scales span several rows (Fp8Block)
// or a dense one.
HostTensor gather_rows(const HostTensor& t, const std::vector<int64_t>& rows, const std::string& name);

}  // namespace tachyon::model
