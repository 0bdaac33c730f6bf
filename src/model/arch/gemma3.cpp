// Gemma 3 text (https://huggingface.co/docs/transformers/model_doc/gemma3; Gemma3ForCausalLM).
//   x = embed(ids) · sqrt(hidden_size)
//   per layer: n = RMSNorm_in(x);       x += RMSNorm_post_attn(o(Attn(RoPE(q_norm(q(n))), RoPE(k_norm(k(n))), v(n))))
//              n = RMSNorm_pre_ffw(x);  x += RMSNorm_post_ffw(down(gelu_tanh(gate(n)) ⊙ up(n)))
//   logits = lm_head(RMSNorm(x))
// Every RMSNorm (the four per layer, q_norm/k_norm over head_dim, the final one) multiplies by
// (1 + w). Attention scale query_pre_attn_scalar^-0.5 (not head_dim^-0.5), scores soft-capped
// by attn_logit_softcapping; sliding layers (key k visible to query q iff q − W < k ≤ q) and
// full layers come from `layer_types` and use their own RoPE (rope_parameters.{sliding,full}_attention;
// legacy: rope_local_base_freq unscaled for sliding, rope_theta + rope_scaling for full).
// RoPE layout: rotate-half over the full head_dim.
// Config: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim, rms_norm_eps, hidden_activation (gelu_pytorch_tanh),
//   query_pre_attn_scalar, sliding_window, layer_types (else sliding_window_pattern),
//   attn_logit_softcapping, final_logit_softcapping (must be null), attention_bias, tie_word_embeddings.
// Tensors (stored dtype): model.embed_tokens.weight [vocab, hidden]; per layer "model.layers.{l}.":
//   input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
//   post_feedforward_layernorm .weight [hidden]; self_attn.{q,k,v}_proj.weight [H·D, hidden],
//   [KV·D, hidden] x2, self_attn.o_proj.weight [hidden, H·D], self_attn.{q,k}_norm.weight [D],
//   self_attn.{q,k,v,o}_proj.bias (attention_bias); mlp.{gate,up}_proj.weight [I, hidden],
//   mlp.down_proj.weight [hidden, I]; model.norm.weight [hidden]; lm_head.weight [vocab, hidden]
//   unless tied.
#include <cmath>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec gemma3_layer(const io::ModelConfig& c, int64_t l) {
  const float eps = static_cast<float>(c.rms_norm_eps), one = 1.f;  // (1 + w) norms
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  const double query_pre_attn_scalar = io::json_double_or(c.raw, "query_pre_attn_scalar", 256.0, c.path);
  attention.scale = static_cast<float>(1.0 / std::sqrt(query_pre_attn_scalar));
  if (c.raw.contains("attn_logit_softcapping") && !c.raw["attn_logit_softcapping"].is_null())
    attention.softcap = static_cast<float>(c.raw["attn_logit_softcapping"].get<double>());
  attention.qkv_bias = attention.o_bias = c.attention_bias;
  attention.qk_norm = true;
  attention.norm_weight_offset = one;
  return {
      .input_norm = {"input_layernorm", eps, one},
      .mixer_name = "self_attn",
      .mixer = attention,
      .post_mixer_norm = RmsNormSpec{"post_attention_layernorm", eps, one},
      .ffn_norm = {"pre_feedforward_layernorm", eps, one},
      .ffn_name = "mlp",
      .ffn = gated_mlp_options(c, "gelu_pytorch_tanh"),
      .post_ffn_norm = RmsNormSpec{"post_feedforward_layernorm", eps, one},
  };
}

}  // namespace

void register_gemma3() {
  register_decoder_architecture({"Gemma3ForCausalLM"}, "gemma3_text", [](const io::ModelConfig& config) {
    io::ModelConfig c = config;
    if (!c.raw.contains("layer_types")) {  // transformers: every pattern-th layer is global
      const int64_t pattern = io::json_int_or(c.raw, "sliding_window_pattern", 6, c.path);
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        c.layer_types[l] = (l + 1) % pattern ? "sliding_attention" : "full_attention";
    }
    if (!c.rope.count("sliding_attention")) {  // legacy config without rope_local_base_freq: its default
      io::RopeParams local;
      local.rope_theta = 10000.0;
      c.rope["full_attention"] = c.rope_for("full_attention");
      c.rope["sliding_attention"] = local;
    }
    if (c.raw.contains("final_logit_softcapping") && !c.raw["final_logit_softcapping"].is_null())
      throw Error("{}: final_logit_softcapping is not supported", c.path);
    DecoderSpec spec = decoder_spec(c);
    spec.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
    spec.final_norm.weight_offset = 1.f;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(gemma3_layer(c, l));
    return spec;
  });
}

}  // namespace tachyon::model
