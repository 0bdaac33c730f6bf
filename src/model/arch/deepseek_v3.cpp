// DeepSeek-V3 (https://huggingface.co/docs/transformers/model_doc/deepseek_v3): pre-norm decoder
// with multi-head latent attention (blocks/mla.h) and DeepSeekMoE:
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += MLA(n)
//              n = RMSNorm(x);  x += FFN(n)
//   logits = lm_head(RMSNorm(x))
//   FFN = dense gated MLP down(silu(gate(n)) ⊙ up(n)) on layers l < first_k_dense_replace, else
//         Σ_k w_k · Expert_k(n) + SharedExperts(n), with noaux_tc routing:
//         s = sigmoid(n·Wgateᵀ); choice = s + e_score_correction_bias; keep topk_group of n_group
//         groups (group score = sum of its top-2 choices); top-k inside them;
//         w = s_k / Σ s_k (norm_topk_prob) · routed_scaling_factor
// RMSNorm(x) = x / rms(x) · w. MLA scale: (qk_nope_head_dim + qk_rope_head_dim)^-0.5, times
// mscale(factor, mscale_all_dim)² under yarn. RoPE layout: rope_interleave (default true)
// rotates pairs (2i, 2i + 1) of the qk_rope_head_dim tail of q and of the shared rope key.
// Config: vocab_size, hidden_size, intermediate_size, moe_intermediate_size, num_hidden_layers,
//   num_attention_heads, rms_norm_eps, q_lora_rank (null: q_proj), kv_lora_rank, qk_nope_head_dim,
//   qk_rope_head_dim, v_head_dim, rope (default | yarn with mscale/mscale_all_dim),
//   rope_interleave, n_routed_experts, num_experts_per_tok, n_group, topk_group,
//   norm_topk_prob, routed_scaling_factor, n_shared_experts, first_k_dense_replace,
//   scoring_func (sigmoid), topk_method (noaux_tc), attention_bias (must be false), hidden_act,
//   tie_word_embeddings. MTP layers (num_nextn_predict_layers) are loaded by model/mtp_head.cpp,
//   as a drafter.
// Tensors (stored dtype unless noted): model.embed_tokens.weight [vocab, hidden]; per layer
//   "model.layers.{l}.": input_layernorm.weight, post_attention_layernorm.weight [hidden];
//   self_attn.{q_a_proj.weight [q_lora, hidden], q_a_layernorm.weight [q_lora], q_b_proj.weight
//   [H·(nope+rope), q_lora] (or q_proj.weight [H·(nope+rope), hidden]), kv_a_proj_with_mqa.weight
//   [kv_lora + rope, hidden], kv_a_layernorm.weight [kv_lora], kv_b_proj.weight [H·(nope+v), kv_lora],
//   o_proj.weight [hidden, H·v]}; dense layers: mlp.{gate,up}_proj.weight [I, hidden],
//   mlp.down_proj.weight [hidden, I]; MoE layers: mlp.gate.weight [E, hidden],
//   mlp.gate.e_score_correction_bias [E] (to f32), mlp.experts.{e}.{gate,up}_proj.weight [moe_I, hidden],
//   mlp.experts.{e}.down_proj.weight [hidden, moe_I], mlp.shared_experts.{gate,up}_proj.weight
//   [moe_I·n_shared, hidden], mlp.shared_experts.down_proj.weight [hidden, moe_I·n_shared];
//   model.norm.weight [hidden]; lm_head.weight [vocab, hidden] unless tied.
#include <cmath>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"
#include "model/rope.h"

namespace tachyon::model {

namespace {

MlaOptions deepseek_mla(const io::ModelConfig& c) {
  const auto& j = c.raw;
  MlaOptions mla;
  mla.hidden = c.hidden_size;
  mla.num_heads = c.num_attention_heads;
  const bool q_lora = j.contains("q_lora_rank") && !j["q_lora_rank"].is_null();
  mla.q_lora_rank = q_lora ? io::json_int(j, "q_lora_rank", c.path) : 0;
  mla.kv_lora_rank = io::json_int(j, "kv_lora_rank", c.path);
  mla.qk_nope_head_dim = io::json_int(j, "qk_nope_head_dim", c.path);
  mla.qk_rope_head_dim = io::json_int(j, "qk_rope_head_dim", c.path);
  mla.v_head_dim = io::json_int(j, "v_head_dim", c.path);
  mla.norm_eps = static_cast<float>(c.rms_norm_eps);
  const io::RopeParams& rope = c.rope_for("full_attention");
  mla.rope = make_rope_table(rope, mla.qk_rope_head_dim, c.max_position_embeddings);
  mla.rope.interleaved = io::json_bool_or(j, "rope_interleave", true, c.path);  // else rotate-half
  double scale = 1.0 / std::sqrt(static_cast<double>(mla.qk_nope_head_dim + mla.qk_rope_head_dim));
  if (rope.rope_type == "yarn" && rope.mscale_all_dim && *rope.mscale_all_dim != 0 && rope.factor > 1) {
    const double m = 0.1 * *rope.mscale_all_dim * std::log(rope.factor) + 1.0;
    scale *= m * m;
  }
  mla.scale = static_cast<float>(scale);
  return mla;
}

MoeOptions deepseek_moe(const io::ModelConfig& c) {
  const auto& j = c.raw;
  if (j.value("scoring_func", std::string("sigmoid")) != "sigmoid" ||
      j.value("topk_method", std::string("noaux_tc")) != "noaux_tc")
    throw Error("{}: only scoring_func=sigmoid with topk_method=noaux_tc is supported", c.path);
  MoeOptions moe;
  moe.routing.kind = kernels::MoeRouting::SigmoidGroupTopK;
  moe.routing.num_experts = io::json_int(j, "n_routed_experts", c.path);
  moe.routing.top_k = io::json_int(j, "num_experts_per_tok", c.path);
  moe.routing.norm_topk_prob = io::json_bool_or(j, "norm_topk_prob", true, c.path);
  moe.routing.n_group = io::json_int_or(j, "n_group", 1, c.path);
  moe.routing.topk_group = io::json_int_or(j, "topk_group", 1, c.path);
  moe.routing.routed_scaling_factor = static_cast<float>(io::json_double_or(j, "routed_scaling_factor", 1.0, c.path));
  if (moe.routing.num_experts % moe.routing.n_group != 0 || moe.routing.topk_group > moe.routing.n_group)
    throw Error("{}: n_routed_experts must split into n_group groups, topk_group <= n_group", c.path);
  moe.hidden = c.hidden_size;
  moe.intermediate = io::json_int(j, "moe_intermediate_size", c.path);
  moe.correction_bias = true;
  moe.shared = "shared_experts";
  moe.shared_intermediate = moe.intermediate * io::json_int_or(j, "n_shared_experts", 0, c.path);
  return moe;
}

LayerSpec deepseek_layer(const io::ModelConfig& c, const MlaOptions& mla, FfnOptions ffn) {
  return pre_norm_layer(c, mla, std::move(ffn));
}

}  // namespace

void register_deepseek_v3() {
  register_decoder_architecture({"DeepseekV3ForCausalLM"}, "deepseek_v3", [](const io::ModelConfig& c) {
    if (c.attention_bias) throw Error("{}: attention_bias=true is not supported for deepseek_v3", c.path);
    const MoeOptions moe = deepseek_moe(c);
    const MlaOptions mla = deepseek_mla(c);
    const GatedMlpOptions dense{c.hidden_size, c.intermediate_size, hidden_activation(c, "silu")};
    const int64_t first_dense = io::json_int_or(c.raw, "first_k_dense_replace", 0, c.path);
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      spec.layers.push_back(deepseek_layer(c, mla, l >= first_dense ? FfnOptions{moe} : FfnOptions{dense}));
    return spec;
  });
}

}  // namespace tachyon::model
