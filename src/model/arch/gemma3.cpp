// Gemma 3 text (https://huggingface.co/docs/transformers/model_doc/gemma3; Gemma3ForCausalLM).
//   x = embed(ids) · sqrt(hidden_size)
//   per layer: x += RMSNorm_post_attn(o(Attn(q_norm(q(n)), k_norm(k(n)), v(n)))),   n = RMSNorm_in(x)
//              x += RMSNorm_post_ffw(down(gelu_tanh(gate(n)) ⊙ up(n))),              n = RMSNorm_pre_ffw(x)
//   logits = lm_head(RMSNorm(x))
// Every RMSNorm (the four per layer, q_norm/k_norm over head_dim, the final one) multiplies by
// (1 + w). Attention scale query_pre_attn_scalar^-0.5 (not head_dim^-0.5); sliding layers
// (key k visible to query q iff q − W < k ≤ q) and full layers come from `layer_types` and use
// their own RoPE (rope_parameters.{sliding,full}_attention; legacy: rope_local_base_freq
// unscaled for sliding, rope_theta + rope_scaling for full).
// Config: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim, rms_norm_eps, hidden_activation (gelu_pytorch_tanh),
//   query_pre_attn_scalar, sliding_window, layer_types (else sliding_window_pattern),
//   attn_logit_softcapping, final_logit_softcapping (must be null), attention_bias, tie_word_embeddings.
// Tensors (per layer "model.layers.{l}."): input_layernorm, post_attention_layernorm,
//   pre_feedforward_layernorm, post_feedforward_layernorm [hidden]; self_attn.{q,k,v,o}_proj,
//   self_attn.{q,k}_norm [head_dim]; mlp.{gate,up,down}_proj. lm_head tied unless present.
// RoPE layout: rotate-half over the full head_dim.
#include <cmath>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

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
    if (!c.raw.contains("hidden_activation") && !c.raw.contains("hidden_act"))
      c.raw["hidden_activation"] = "gelu_pytorch_tanh";
    DecoderSpec spec = llama_family_spec(c);
    const double query_pre_attn_scalar = io::json_double_or(c.raw, "query_pre_attn_scalar", 256.0, c.path);
    const bool softcap = c.raw.contains("attn_logit_softcapping") && !c.raw["attn_logit_softcapping"].is_null();
    for (AttentionOptions& o : spec.attention) {
      o.scale = static_cast<float>(1.0 / std::sqrt(query_pre_attn_scalar));
      o.norm_weight_offset = 1.f;
      if (softcap) o.softcap = static_cast<float>(c.raw["attn_logit_softcapping"].get<double>());
    }
    spec.qk_norm = true;
    spec.qkv_bias = spec.o_bias = c.attention_bias;
    spec.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
    spec.norm_weight_offset = 1.f;
    spec.sandwich_norms = true;
    return spec;
  });
}

}  // namespace tachyon::model
