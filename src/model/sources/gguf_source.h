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
// deepseek2 (MLA, DeepSeekMoE):
//   attn_q_a, attn_q_a_norm, attn_q_b / attn_q  self_attn.q_a_proj, q_a_layernorm, q_b_proj / q_proj
//   attn_kv_a_mqa, attn_kv_a_norm               self_attn.kv_a_proj_with_mqa, kv_a_layernorm
//   attn_kv_b, or attn_k_b + attn_v_b           self_attn.kv_b_proj [H·(nope+v), kv_lora]: newer
//     converters split it per head into k_b (transposed, {nope, kv_lora, H}) and v_b ({kv_lora, v, H});
//     the source puts the rows back together as F32 (k_b's transpose cuts across quantized blocks)
//   ffn_{gate,up,down}_shexp                    mlp.shared_experts.{gate,up,down}_proj
//   exp_probs_b.bias                            mlp.gate.e_score_correction_bias
//   blk.N with N ≥ the model's layers (NextN/MTP blocks) are not loaded.
// gpt-oss (fused Hub expert layout, as transformers stores it):
//   post_attention_norm, attn_sinks             post_attention_layernorm, self_attn.sinks
//   ffn_gate_inp (.weight, .bias)               mlp.router
//   ffn_gate_exps + ffn_up_exps {H, I, E}       mlp.experts.gate_up_proj [E, H, 2I], gate/up rows
//     interleaved again and stored transposed (HostTensor::stored_transposed: E matrices [2I, H],
//     codes kept, MXFP4 too); their biases → gate_up_proj_bias [E, 2I] interleaved
//   ffn_down_exps {I, H, E}, its bias {H, E}    mlp.experts.down_proj [E, I, H] (stored transposed),
//                                               down_proj_bias [E, H]
// The parts of a fused weight (q/k/v, gate/up) must share a format: when their GGUF types differ
// (Q4_K_M files mix Q4_K and Q6_K) every part is handed out as Affine 8-bit with F32 scales at
// the smallest group (exact, see widen_to_affine8), or Dense F32 when a part is a float type.
#pragma once

#include <map>
#include <utility>
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
  // llama.cpp quantizes the activations of its integer block types to int8 (Q8_0 / Q8_K).
  bool int8_activation_numerics() const override { return true; }
  const io::GgufFile& file() const { return *file_; }

  // The GGUF tensor an HF name comes from (tests, `info`); nullptr when unknown.
  const io::GgufTensor* gguf_tensor(const std::string& name) const;

 private:
  // How an entry's values are made from its GGUF tensor(s).
  enum class Fix {
    None,
    LlamaRopeRows,      // rows put back in rotate-half order
    GemmaNormShift,     // w = stored − 1
    ExpertsTransposed,  // a whole 3-D expert tensor, each expert's matrix [out, in] (stored_transposed)
    InterleavedExperts, // gpt-oss gate_up_proj from `tensor` (gate) and `second` (up)
    InterleavedBias,    // gpt-oss gate_up_proj_bias from `tensor` (gate) and `second` (up), F32
    MlaKvB,             // deepseek2 kv_b_proj from `tensor` (k_b) and `second` (v_b), F32
  };
  struct Entry {
    const io::GgufTensor* tensor = nullptr;
    const io::GgufTensor* second = nullptr;  // the other part of a rebuilt tensor
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
  // Rebuilt HF tensor → its two GGUF parts (k_b, v_b; gate, up), filled while indexing.
  std::map<std::string, std::pair<const io::GgufTensor*, const io::GgufTensor*>> pairs_;

  void add(const std::string& hf_name, const io::GgufTensor& t, int64_t expert, Fix fix, int64_t rope_heads);
  // An entry rebuilt from two GGUF tensors (or one whole 3-D one) with the HF shape `shape`.
  void add_rebuilt(const std::string& hf_name, const io::GgufTensor& t, const io::GgufTensor* second, Fix fix,
                   std::vector<int64_t> shape);
  bool add_deepseek2(const std::string& prefix, const std::string& part, const std::string& kind,
                     const io::GgufTensor& t);
  bool add_gpt_oss(const std::string& prefix, const std::string& part, const std::string& kind,
                   const io::GgufTensor& t);
  HostTensor load_rebuilt(const Entry& e) const;
  void resolve_groups();
  HostTensor load_entry(const std::string& name, const Entry& e) const;
};

// The source for a model file: a GgufSource when `path` names a GGUF model
// (io::gguf_model_file), else nullptr.
std::shared_ptr<WeightSource> open_gguf_source(const std::string& path, const io::ModelConfig& config);

}  // namespace tachyon::model
