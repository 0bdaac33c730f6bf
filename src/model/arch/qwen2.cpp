// Qwen2 (https://huggingface.co/docs/transformers/model_doc/qwen2): the Llama layer with biases
// on q/k/v (never on o), and sliding-window attention on layers >= max_window_layers when
// use_sliding_window (config.layer_types in transformers v5; io/config.cpp derives it so).
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn(RoPE(q(n) + bq), RoPE(k(n) + bk), v(n) + bv))
//              n = RMSNorm(x);  x += down(act(gate(n)) ⊙ up(n))
//   logits = lm_head(RMSNorm(x))
// RMSNorm(x) = x / rms(x) · w. RoPE layout: rotate-half over the full head_dim.
// Config: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, rms_norm_eps, rope, use_sliding_window, sliding_window,
//   max_window_layers, layer_types, hidden_act (silu), tie_word_embeddings.
// Tensors (stored dtype): model.embed_tokens.weight [vocab, hidden]; per layer "model.layers.{l}.":
//   input_layernorm.weight [hidden], self_attn.{q,k,v}_proj.weight [H·D, hidden], [KV·D, hidden] x2,
//   self_attn.{q,k,v}_proj.bias [H·D], [KV·D] x2, self_attn.o_proj.weight [hidden, H·D],
//   post_attention_layernorm.weight [hidden], mlp.{gate,up}_proj.weight [I, hidden],
//   mlp.down_proj.weight [hidden, I]; model.norm.weight [hidden]; lm_head.weight [vocab, hidden]
//   unless tie_word_embeddings.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec qwen2_layer(const io::ModelConfig& c, int64_t l) {
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  attention.qkv_bias = true;
  return pre_norm_layer(c, attention, gated_mlp_options(c));
}

}  // namespace

void register_qwen2() {
  register_decoder_architecture({"Qwen2ForCausalLM"}, "qwen2", [](const io::ModelConfig& c) {
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(qwen2_layer(c, l));
    return spec;
  });
}

}  // namespace tachyon::model
