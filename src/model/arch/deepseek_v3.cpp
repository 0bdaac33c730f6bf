// DeepSeek-V3 (https://huggingface.co/docs/transformers/model_doc/deepseek_v3): pre-norm decoder
// with multi-head latent attention (blocks/mla.h) and DeepSeekMoE:
//   per layer: x += MLA(RMSNorm(x));  x += FFN(RMSNorm(x))
//   FFN = dense gated MLP on layers l < first_k_dense_replace, else
//         Σ_k w_k · Expert_k(x) + SharedExperts(x), with noaux_tc routing:
//         s = sigmoid(x·Wgateᵀ); choice = s + e_score_correction_bias; keep topk_group of n_group
//         groups (group score = sum of its top-2 choices); top-k inside them;
//         w = s_k / Σ s_k (norm_topk_prob) · routed_scaling_factor
// MLA scale: (qk_nope_head_dim + qk_rope_head_dim)^-0.5, times mscale(factor, mscale_all_dim)²
// under yarn. RoPE layout: rope_interleave (default true) rotates pairs (2i, 2i + 1) of the
// qk_rope_head_dim tail of q and of the shared rope key.
// Config: hidden_size, intermediate_size, moe_intermediate_size, num_hidden_layers,
//   num_attention_heads, q_lora_rank (null: q_proj), kv_lora_rank, qk_nope_head_dim,
//   qk_rope_head_dim, v_head_dim, rope (default | yarn with mscale/mscale_all_dim),
//   rope_interleave, n_routed_experts, num_experts_per_tok, n_group, topk_group,
//   norm_topk_prob, routed_scaling_factor, n_shared_experts, first_k_dense_replace,
//   scoring_func (sigmoid), topk_method (noaux_tc). MTP layers (num_nextn_predict_layers) are loaded by model/mtp_head.cpp, as a drafter.
// Tensors ("model.layers.{l}."): self_attn.{q_a_proj [q_lora, hidden], q_a_layernorm [q_lora],
//   q_b_proj [H·(nope+rope), q_lora], kv_a_proj_with_mqa [kv_lora + rope, hidden],
//   kv_a_layernorm [kv_lora], kv_b_proj [H·(nope+v), kv_lora], o_proj [hidden, H·v]};
//   MoE layers: mlp.gate.weight [E, hidden], mlp.gate.e_score_correction_bias [E],
//   mlp.experts.{e}.{gate,up,down}_proj, mlp.shared_experts.{gate,up,down}_proj.
#include <cmath>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"
#include "model/rope.h"

namespace tachyon::model {

void register_deepseek_v3() {
  register_decoder_architecture({"DeepseekV3ForCausalLM"}, "deepseek_v3", [](const io::ModelConfig& c) {
    const auto& j = c.raw;
    if (c.attention_bias) throw Error("{}: attention_bias=true is not supported for deepseek_v3", c.path);
    if (j.value("scoring_func", std::string("sigmoid")) != "sigmoid" ||
        j.value("topk_method", std::string("noaux_tc")) != "noaux_tc")
      throw Error("{}: only scoring_func=sigmoid with topk_method=noaux_tc is supported", c.path);
    DecoderSpec spec = llama_family_spec(c);
    spec.use_mla = true;
    MlaOptions& mla = spec.mla;
    mla.hidden = c.hidden_size;
    mla.num_heads = c.num_attention_heads;
    mla.q_lora_rank = j.contains("q_lora_rank") && !j["q_lora_rank"].is_null() ? io::json_int(j, "q_lora_rank", c.path) : 0;
    mla.kv_lora_rank = io::json_int(j, "kv_lora_rank", c.path);
    mla.qk_nope_head_dim = io::json_int(j, "qk_nope_head_dim", c.path);
    mla.qk_rope_head_dim = io::json_int(j, "qk_rope_head_dim", c.path);
    mla.v_head_dim = io::json_int(j, "v_head_dim", c.path);
    mla.norm_eps = static_cast<float>(c.rms_norm_eps);
    const io::RopeParams& rope = c.rope_for("full_attention");
    mla.rope = make_rope_table(rope, mla.qk_rope_head_dim, c.max_position_embeddings);
    mla.rope.interleaved = io::json_bool_or(j, "rope_interleave", true, c.path);
    double scale = 1.0 / std::sqrt(static_cast<double>(mla.qk_nope_head_dim + mla.qk_rope_head_dim));
    if (rope.rope_type == "yarn" && rope.mscale_all_dim && *rope.mscale_all_dim != 0 && rope.factor > 1) {
      const double m = 0.1 * *rope.mscale_all_dim * std::log(rope.factor) + 1.0;
      scale *= m * m;
    }
    mla.scale = static_cast<float>(scale);

    MoeOptions& moe = spec.moe;
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
    const int64_t first_dense = io::json_int_or(j, "first_k_dense_replace", 0, c.path);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) spec.moe_layers.push_back(l >= first_dense);
    return spec;
  });
}

}  // namespace tachyon::model
