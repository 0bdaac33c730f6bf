// gpt-oss (https://huggingface.co/docs/transformers/model_doc/gpt_oss):
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn_sinks(RoPE(q(n)), RoPE(k(n)), v(n)))   q/k/v/o with biases, GQA
//              n = RMSNorm(x);  x += MoE(n)
//   logits = lm_head(RMSNorm(x))
// Attn_sinks: per-head learned sinks (one extra logit per head in the softmax denominator);
//   sliding (q − W < k ≤ q) and full layers alternate per `layer_types`.
// MoE: logits = n·Wrouterᵀ + b; top-k of the logits; w = softmax over the k;
//   expert(n) = down((up + 1) · g · sigmoid(1.702 · g)) + b_down with g = min(gate, limit),
//   up = clamp(up, ±limit), [gate | up] = n·W_gate_up + b (interleaved).
// RMSNorm(x) = x / rms(x) · w. RoPE layout: rotate-half over the full head_dim (yarn).
// Config: vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
//   head_dim, rms_norm_eps, rope (yarn), sliding_window, layer_types (else alternating, sliding
//   first), num_local_experts, num_experts_per_tok (or experts_per_token), intermediate_size (per
//   expert), swiglu_limit, tie_word_embeddings.
// Tensors (stored dtype unless noted): model.embed_tokens.weight [vocab, hidden]; per layer
//   "model.layers.{l}.": input_layernorm.weight, post_attention_layernorm.weight [hidden];
//   self_attn.{q,k,v}_proj.{weight [H·D, hidden], [KV·D, hidden] x2, bias [H·D], [KV·D] x2},
//   self_attn.o_proj.{weight [hidden, H·D], bias [hidden]}, self_attn.sinks [H] (to f32);
//   mlp.router.{weight [E, hidden], bias [E]}; mlp.experts.gate_up_proj [E, hidden, 2I],
//   gate_up_proj_bias [E, 2I], down_proj [E, I, hidden], down_proj_bias [E, hidden];
//   model.norm.weight [hidden]; lm_head.weight [vocab, hidden].
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec gpt_oss_layer(const io::ModelConfig& c, int64_t l, const MoeOptions& moe) {
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  attention.qkv_bias = attention.o_bias = true;
  attention.sinks = true;
  return pre_norm_layer(c, attention, moe);
}

MoeOptions gpt_oss_moe(const io::ModelConfig& c) {
  MoeOptions moe;
  moe.routing.kind = kernels::MoeRouting::TopKSoftmax;
  moe.routing.num_experts = io::json_int(c.raw, "num_local_experts", c.path);
  moe.routing.top_k = c.raw.contains("num_experts_per_tok") ? io::json_int(c.raw, "num_experts_per_tok", c.path)
                                                            : io::json_int(c.raw, "experts_per_token", c.path);
  moe.hidden = c.hidden_size;
  moe.intermediate = c.intermediate_size;
  moe.layout = MoeOptions::Layout::FusedGptOss;
  moe.router = "router";
  moe.router_bias = true;
  moe.clamped_swiglu = true;
  moe.swiglu_limit = static_cast<float>(io::json_double_or(c.raw, "swiglu_limit", 7.0, c.path));
  return moe;
}

}  // namespace

void register_gpt_oss() {
  register_decoder_architecture({"GptOssForCausalLM"}, "gpt_oss", [](const io::ModelConfig& config) {
    io::ModelConfig c = config;
    if (!c.raw.contains("layer_types"))
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        c.layer_types[l] = (l + 1) % 2 ? "sliding_attention" : "full_attention";
    const MoeOptions moe = gpt_oss_moe(c);
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.layers.push_back(gpt_oss_layer(c, l, moe));
    return spec;
  });
}

}  // namespace tachyon::model
