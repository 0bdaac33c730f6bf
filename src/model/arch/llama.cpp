// Llama (https://huggingface.co/docs/transformers/model_doc/llama; Llama 3 rope scaling).
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn(RoPE(q(n)), RoPE(k(n)), v(n)))    q/k/v/o biases when attention_bias
//              n = RMSNorm(x);  x += down(act(gate(n)) ⊙ up(n))
//   logits = lm_head(RMSNorm(x))
// RMSNorm(x) = x / rms(x) · w. RoPE layout: rotate-half over the full head_dim.
// Config: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim (default hidden/heads), rms_norm_eps, rope (default | linear |
//   dynamic | llama3 | yarn), layer_types / sliding_window, attention_bias, hidden_act (silu),
//   mlp_bias (unsupported: refused), tie_word_embeddings.
// Tensors (stored dtype): model.embed_tokens.weight [vocab, hidden]; per layer "model.layers.{l}.":
//   input_layernorm.weight [hidden], self_attn.{q,k,v}_proj.weight [H·D, hidden], [KV·D, hidden] x2,
//   self_attn.o_proj.weight [hidden, H·D], self_attn.{q,k,v,o}_proj.bias [H·D], [KV·D] x2, [hidden]
//   (attention_bias), post_attention_layernorm.weight [hidden], mlp.{gate,up}_proj.weight [I, hidden],
//   mlp.down_proj.weight [hidden, I]; model.norm.weight [hidden]; lm_head.weight [vocab, hidden]
//   unless tie_word_embeddings.
#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec llama_layer(const io::ModelConfig& c, int64_t l) {
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  attention.qkv_bias = attention.o_bias = c.attention_bias;
  return pre_norm_layer(c, attention, gated_mlp_options(c));
}

}  // namespace

void register_llama() {
  register_decoder_architecture({"LlamaForCausalLM"}, "llama", [](const io::ModelConfig& c) {
    if (c.raw.value("mlp_bias", false)) throw Error("{}: mlp_bias=true is not supported", c.path);
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(llama_layer(c, l));
    return spec;
  });
}

}  // namespace tachyon::model
