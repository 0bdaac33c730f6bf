// A WeightSource over one GGUF file: the model asks for Hugging Face names, the source finds the
// llama.cpp tensor, reverses ggml's dimension order and repacks the ggml type into a format of
// kernels/weight.h (model/sources/gguf_repack.h).
//
// Names (llama.cpp's llama-arch.cpp ↔ transformers), per layer "blk.N." ↔ "model.layers.N.":
//   token_embd, output_norm, output            model.embed_tokens, model.norm, lm_head
//   attn_norm, ffn_norm                         input_layernorm, post_attention_layernorm
//     (gemma3: post_attention_norm → post_attention_layernorm, ffn_norm → pre_feedforward_layernorm,
//      post_ffw_norm → post_feedforward_layernorm)
//   attn_q/k/v/output (.weight, .bias)          self_attn.q/k/v/o_proj
//   attn_q_norm, attn_k_norm                    self_attn.q_norm, self_attn.k_norm
//   ffn_gate/up/down                            mlp.gate/up/down_proj
//   ffn_gate_inp, ffn_{gate,up,down}_exps[e]    mlp.gate, mlp.experts.e.{gate,up,down}_proj
// Shapes: ggml lists the contiguous dimension first ({cols, rows[, experts]}); the source hands
// out [rows, cols] per expert, as transformers stores them.
// Converter changes undone: llama's q/k rows were permuted for llama.cpp's interleaved rope
// (convert_hf_to_gguf.py LlamaModel.permute; qwen2/qwen3/gemma3 were not): the rows are put back
// in rotate-half order. Gemma3's norm weights were stored as 1 + w: the source gives w back
// (F32, one rounding of the subtraction).
// The parts of a fused weight (q/k/v, gate/up) must share a format: when their GGUF types differ
// (Q4_K_M files mix Q4_K and Q6_K) every part is handed out as Affine 8-bit with F32 scales at
// the smallest group (exact, see widen_to_affine8), or Dense F32 when a part is a float type.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/config.h"
#include "io/gguf.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

class GgufSource : public WeightSource {
 public:
  GgufSource(std::shared_ptr<const io::GgufFile> file, const io::ModelConfig& config);
  const std::string& location() const override { return file_->path(); }
  bool has(const std::string& name) const override { return entries_.count(name) != 0; }
  Info info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  HostTensor load(const std::string& name) const override;
  const io::GgufFile& file() const { return *file_; }

  // The GGUF tensor an HF name comes from (tests, `info`); nullptr when unknown.
  const io::GgufTensor* gguf_tensor(const std::string& name) const;

 private:
  enum class Fix { None, LlamaRopeRows, GemmaNormShift };
  struct Entry {
    const io::GgufTensor* tensor = nullptr;
    int64_t expert = -1;          // slice of a 3-D expert tensor
    std::vector<int64_t> shape;   // HF shape
    Fix fix = Fix::None;
    int64_t rope_heads = 0;       // LlamaRopeRows: heads of this projection
    std::string sibling_group;    // fused with the other entries of this group (may be empty)
  };
  // How every member of a sibling group is handed out when the members' GGUF types differ.
  struct GroupFormat {
    bool mixed = false;
    bool dense_f32 = false;
    int32_t group = 32;
    std::string type;  // Info::type shared by the members
  };
  std::shared_ptr<const io::GgufFile> file_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, GroupFormat> groups_;

  void add(const std::string& hf_name, const io::GgufTensor& t, int64_t expert, Fix fix, int64_t rope_heads);
  void resolve_groups();
  HostTensor load_entry(const std::string& name, const Entry& e) const;
};

// The source for a model file: a GgufSource when `path` names a GGUF model
// (io::gguf_model_file), else nullptr.
std::shared_ptr<WeightSource> open_gguf_source(const std::string& path, const io::ModelConfig& config);

}  // namespace tachyon::model
