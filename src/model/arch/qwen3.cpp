// Qwen3 (https://huggingface.co/docs/transformers/model_doc/qwen3): the Llama layer with a
// per-head RMSNorm on q and on k (over head_dim) before RoPE, an explicit head_dim that may
// differ from hidden/heads, and q/k/v/o biases when attention_bias.
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn(RoPE(RMSNorm_q(q(n))), RoPE(RMSNorm_k(k(n))), v(n)))
//              n = RMSNorm(x);  x += down(act(gate(n)) ⊙ up(n))
//   logits = lm_head(RMSNorm(x))
// RMSNorm(x) = x / rms(x) · w, also q_norm/k_norm. RoPE layout: rotate-half over the full head_dim.
// Config: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim, rms_norm_eps, rope, layer_types / sliding_window,
//   attention_bias, hidden_act (silu), tie_word_embeddings.
// Tensors (stored dtype): model.embed_tokens.weight [vocab, hidden]; per layer "model.layers.{l}.":
//   input_layernorm.weight [hidden], self_attn.{q,k,v}_proj.weight [H·D, hidden], [KV·D, hidden] x2,
//   self_attn.o_proj.weight [hidden, H·D], self_attn.{q,k}_norm.weight [D], self_attn.{q,k,v,o}_proj.bias
//   (attention_bias), post_attention_layernorm.weight [hidden], mlp.{gate,up}_proj.weight
//   [I, hidden], mlp.down_proj.weight [hidden, I]; model.norm.weight [hidden]; lm_head.weight
//   [vocab, hidden] unless tie_word_embeddings.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec qwen3_layer(const io::ModelConfig& c, int64_t l) {
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  attention.qk_norm = true;
  attention.qkv_bias = attention.o_bias = c.attention_bias;
  return pre_norm_layer(c, attention, gated_mlp_options(c));
}

}  // namespace

void register_qwen3() {
  register_decoder_architecture({"Qwen3ForCausalLM"}, "qwen3", [](const io::ModelConfig& c) {
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(qwen3_layer(c, l));
    return spec;
  });
}

}  // namespace tachyon::model
