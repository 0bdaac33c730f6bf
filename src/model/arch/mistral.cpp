// Mistral (https://huggingface.co/docs/transformers/model_doc/mistral): the Llama layer without
// biases, with sliding-window attention on every layer when sliding_window is set (key k
// visible to query q iff q − W < k ≤ q; io/config.cpp derives layer_types so).
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn(RoPE(q(n)), RoPE(k(n)), v(n)))
//              n = RMSNorm(x);  x += down(act(gate(n)) ⊙ up(n))
//   logits = lm_head(RMSNorm(x))
// RMSNorm(x) = x / rms(x) · w. RoPE layout: rotate-half over the full head_dim.
// Config: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim, rms_norm_eps, rope, sliding_window, layer_types, hidden_act
//   (silu), tie_word_embeddings.
// Tensors (stored dtype): model.embed_tokens.weight [vocab, hidden]; per layer "model.layers.{l}.":
//   input_layernorm.weight [hidden], self_attn.{q,k,v}_proj.weight [H·D, hidden], [KV·D, hidden] x2,
//   self_attn.o_proj.weight [hidden, H·D], post_attention_layernorm.weight [hidden],
//   mlp.{gate,up}_proj.weight [I, hidden], mlp.down_proj.weight [hidden, I]; model.norm.weight
//   [hidden]; lm_head.weight [vocab, hidden] unless tie_word_embeddings.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec mistral_layer(const io::ModelConfig& c, int64_t l) {
  return pre_norm_layer(c, attention_options(c, l, RopeLayout::RotateHalf), gated_mlp_options(c));
}

}  // namespace

void register_mistral() {
  register_decoder_architecture({"MistralForCausalLM"}, "mistral", [](const io::ModelConfig& c) {
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(mistral_layer(c, l));
    return spec;
  });
}

}  // namespace tachyon::model
