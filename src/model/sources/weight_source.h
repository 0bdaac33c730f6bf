// Where WeightBinder finds a model's tensors, by their Hugging Face names, whatever the file
// format: safetensors with float tensors, a quantized checkpoint in one of the published
// layouts (MLX affine, FP8 block, AWQ, GPTQ, compressed-tensors, MXFP4) or a GGUF file. Each
// source hands a tensor out as a host row-major kernels::Weight: a float dtype, or one of the
// formats of kernels/weight.h into which the source repacked the published layout. The model
// never sees which.
//
//   std::shared_ptr<WeightSource> src = open_weight_source(dir, config);
//   if (src->has("model.layers.0.mlp.up_proj.weight")) {
//     HostTensor t = src->load("model.layers.0.mlp.up_proj.weight");  // t.weight: [I, hidden]
//     Weight device = backend.upload_weight(t.weight);
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/config.h"
#include "kernels/quantize.h"
#include "kernels/weight.h"

namespace tachyon::model {

using kernels::Weight;

// A tensor on the host. `weight` points into the source's mapping, or into `owned` when the
// source built it (a repack); it stays valid while both the HostTensor and the source live.
struct HostTensor {
  Weight weight;                               // [rows, cols] as the model sees it; 1-D: rows = 1
  std::vector<int64_t> shape;                  // the logical (dequantized) shape
  std::vector<std::vector<uint8_t>> owned;     // codes, scales, biases built by the source
  // A 3-D logical [E, A, B] tensor stored as E matrices [B, A] one after another (weight rows =
  // E·B, cols = A): gpt-oss's MXFP4 experts are [E, out, in] while its float release is
  // [E, in, out]. WeightBinder's element remaps index the logical shape and account for it.
  bool stored_transposed = false;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // What to name in messages (the directory or file).
  virtual const std::string& location() const = 0;
  virtual bool has(const std::string& name) const = 0;
  // What a tensor is without reading its data: the logical shape, how it is stored ("BF16",
  // "MLX affine 4-bit g64", "Q4_K", ...), and the file that holds it.
  struct Info {
    std::vector<int64_t> shape;
    std::string type;
    std::string file;
    bool dense = true;  // stored as F32, BF16 or F16 (element remaps read it as it is)
  };
  virtual Info info(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // The tensor, repacked where needed. Throws tachyon::Error naming the tensor when its parts do
  // not fit together (a missing scale, a group size that does not divide the columns, ...).
  virtual HostTensor load(const std::string& name) const = 0;
  // The format `--quantize` asks for (kernels/quantize.h): WeightBinder quantizes each dense float
  // weight it binds for matmuls (after fusing) before uploading it.
  virtual kernels::QuantizeMode matmul_quantization() const { return kernels::QuantizeMode::None; }
  // The format `--quantize-decode` asks for (Int8 or Int4): WeightBinder keeps each weight that
  // `--quantize` in this format would quantize as it is, for prefill rows, and uploads the
  // quantized form beside it as its decode copy (kernels::Weight::decode).
  virtual kernels::QuantizeMode decode_quantization() const { return kernels::QuantizeMode::None; }
  // Called by WeightBinder with each weight it hands to the backend (host form, after fusing,
  // remapping and quantizing): `tachyon info` tallies bytes per format through it.
  virtual void bound(const std::string& name, const Weight& host) const {}
  // Likewise with the decode copy bound beside a weight (decode_quantization).
  virtual void bound_decode_copy(const std::string& name, const Weight& host) const {}
  // Tensor parallelism (sharded_source.h): how many ranks share the model these tensors are one
  // rank's slice of; a model built from them adds its row-parallel partial sums across them.
  virtual int tensor_parallel_ranks() const { return 1; }
  // Whether the runtime these files were written for computes their integer weights on int8
  // activations (GGUF: llama.cpp): `--int8-activations auto` then turns the mode on.
  virtual bool int8_activation_numerics() const { return false; }
};

// Opens the tensors of a model directory (or single file) for `config`: plain safetensors, or
// the quantized layout its config.json names. Throws for a layout that is not supported,
// naming it and the supported ones.
std::shared_ptr<WeightSource> open_weight_source(const std::string& path, const io::ModelConfig& config);
// The quantization method config.json names ("mlx", "fp8", "awq", "gptq", "compressed-tensors",
// "mxfp4", or another that open_weight_source refuses), or "" for a float checkpoint.
std::string quantization_method(const io::ModelConfig& config);

}  // namespace tachyon::model
