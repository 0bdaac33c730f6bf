// The pre-norm decoder-only transformer shared by the llama family (Llama, Qwen2, Qwen3,
// Mistral) and its relatives (Gemma 3, Qwen3-MoE, gpt-oss, DeepSeek-V3, Qwen3-Next):
//   x = embed(ids) · embed_scale
//   per layer: x += Post(Attn(RMSNorm(x)));  x += Post(FFN(RMSNorm(x)))
//   logits = lm_head(RMSNorm(x))
// where Post is the identity, or an RMSNorm when `sandwich_norms` (Gemma 3's
// post_attention_layernorm / post_feedforward_layernorm), and FFN is the gated MLP or, on
// `moe_layers`, the MoE block. Attention is the llama block, or MLA when `use_mla`;
// `linear_layers` use Gated DeltaNet (recurrent state in the KV cache's state slots) instead.
// RMSNorm weights are used as (norm_weight_offset + w).
// An architecture file fills a DecoderSpec from its config (which options it uses, per-layer
// attention) and this block does the rest, including the fail-closed weight binding.
#pragma once

#include <memory>
#include <vector>

#include "io/safetensors.h"
#include "model/blocks/attention.h"
#include "model/blocks/gated_delta_net.h"
#include "model/blocks/mla.h"
#include "model/blocks/mlp.h"
#include "model/blocks/moe.h"
#include "model/model.h"

namespace tachyon::model {

struct DecoderSpec {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  float rms_norm_eps = 1e-6f;
  kernels::Activation activation = kernels::Activation::SiLU;
  bool qkv_bias = false, o_bias = false, qk_norm = false;
  bool tie_word_embeddings = false;
  std::vector<AttentionOptions> attention;  // one per layer
  float embed_scale = 1.f;                  // Gemma: sqrt(hidden_size)
  float norm_weight_offset = 0.f;           // Gemma: 1 ((1 + w) RMSNorm)
  bool sandwich_norms = false;              // Gemma: 4 norms per layer (see above)
  bool attention_sinks = false;             // gpt-oss: self_attn.sinks [heads]
  std::vector<bool> moe_layers;             // empty: no MoE layer
  MoeOptions moe;
  bool use_mla = false;                     // DeepSeek: every layer's attention is MLA (latent KV cache)
  MlaOptions mla;
  std::vector<bool> linear_layers;          // Qwen3-Next: Gated DeltaNet instead of attention ("linear_attn.")
  GatedDeltaNetOptions gated_delta_net;
};

// The attention options of `layer` as the llama family reads them from config.json:
// heads/kv_heads/head_dim, scale head_dim^-0.5, RoPE of the layer's type, and the sliding
// window on layers whose type is "sliding_attention".
AttentionOptions llama_attention_options(const io::ModelConfig& config, int64_t layer);

// The fields every llama-family config shares (sizes, eps, tying, per-layer attention).
DecoderSpec llama_family_spec(const io::ModelConfig& config);

std::unique_ptr<Model> make_decoder_model(const io::ModelConfig& config, std::shared_ptr<io::Checkpoint> checkpoint,
                                          kernels::Backend& backend, DecoderSpec spec);

}  // namespace tachyon::model
