// gpt-oss (https://huggingface.co/docs/transformers/model_doc/gpt_oss): pre-norm decoder with
//   attention: q/k/v/o with biases, GQA, yarn RoPE (rotate-half), per-head learned sinks (one
//     extra logit per head in the softmax denominator), sliding (q − W < k ≤ q) and full
//     layers alternating per `layer_types`;
//   MoE on every layer: logits = x·Wrouterᵀ + b; top-k of the logits; w = softmax over the k;
//     expert(x) = down((up + 1) · g · sigmoid(1.702 · g)) + b_down with
//     g = min(gate, limit), up = clamp(up, ±limit), [gate | up] = x·W_gate_up + b (interleaved).
// Config: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
//   rms_norm_eps, rope (yarn), sliding_window, layer_types (else alternating, sliding first),
//   num_local_experts, num_experts_per_tok (or experts_per_token), intermediate_size (per
//   expert), swiglu_limit.
// Tensors ("model.layers.{l}."): self_attn.{q,k,v,o}_proj.{weight,bias}, self_attn.sinks [H];
//   mlp.router.{weight [E, hidden], bias [E]}; mlp.experts.gate_up_proj [E, hidden, 2I],
//   gate_up_proj_bias [E, 2I], down_proj [E, I, hidden], down_proj_bias [E, hidden];
//   input_layernorm, post_attention_layernorm [hidden]; lm_head untied.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_gpt_oss() {
  register_decoder_architecture({"GptOssForCausalLM"}, "gpt_oss", [](const io::ModelConfig& config) {
    io::ModelConfig c = config;
    if (!c.raw.contains("layer_types"))
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        c.layer_types[l] = (l + 1) % 2 ? "sliding_attention" : "full_attention";
    DecoderSpec spec = llama_family_spec(c);
    spec.qkv_bias = spec.o_bias = true;
    spec.attention_sinks = true;
    MoeOptions& moe = spec.moe;
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
    spec.moe_layers.assign(static_cast<size_t>(c.num_hidden_layers), true);
    return spec;
  });
}

}  // namespace tachyon::model
