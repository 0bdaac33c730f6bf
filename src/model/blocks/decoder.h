// The pre-norm decoder-only transformer shared by the llama family (Llama, Qwen2, Qwen3,
// Mistral): embedding → N × [x += Attn(RMSNorm(x)); x += MLP(RMSNorm(x))] → RMSNorm → LM head.
// An architecture file fills a DecoderSpec from its config (which options it uses, per-layer
// attention) and this block does the rest, including the fail-closed weight binding.
#pragma once

#include <memory>
#include <vector>

#include "io/safetensors.h"
#include "model/blocks/attention.h"
#include "model/blocks/mlp.h"
#include "model/model.h"

namespace tachyon::model {

struct DecoderSpec {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  float rms_norm_eps = 1e-6f;
  kernels::Activation activation = kernels::Activation::SiLU;
  bool qkv_bias = false, o_bias = false, qk_norm = false;
  bool tie_word_embeddings = false;
  std::vector<AttentionOptions> attention;  // one per layer
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
