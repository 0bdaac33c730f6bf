// Qwen3-Next (https://huggingface.co/docs/transformers/model_doc/qwen3_next): a hybrid decoder.
//   per layer: x += Mixer(RMSNorm(x));  x += MoE(RMSNorm(x))
//   Mixer = Gated DeltaNet (blocks/gated_delta_net.h) on "linear_attention" layers,
//           gated attention on "full_attention" layers:
//             [q | gate] = x·Wqᵀ (per head D query then D gate rows), q, k = RMSNorm(q), RMSNorm(k),
//             partial RoPE (first partial_rotary_factor·D dims, rotate-half), o = Attn ⊙ sigmoid(gate)
//   MoE = Σ_k w_k · Expert_k(x) + sigmoid(x·w_sgᵀ) · SharedExpert(x)     (softmax top-k, norm_topk_prob)
//   logits = lm_head(RMSNorm(x))
// Zero-centred norms: the decoder norms, q_norm/k_norm and the final norm use (1 + w); the
// gated RMSNorm inside the DeltaNet uses w.
// Config: hidden_size, num_hidden_layers, layer_types (else full_attention_interval),
//   num_attention_heads, num_key_value_heads, head_dim, partial_rotary_factor, rope,
//   rms_norm_eps, linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
//   linear_value_head_dim, linear_conv_kernel_dim, num_experts (v5: num_local_experts),
//   num_experts_per_tok, norm_topk_prob, moe_intermediate_size, shared_expert_intermediate_size,
//   decoder_sparse_step, mlp_only_layers, intermediate_size (dense layers), tie_word_embeddings.
// Tensors ("model.layers.{l}."): linear_attn.{in_proj_qkvz, in_proj_ba, conv1d [conv_dim, 1, K],
//   A_log [Hv], dt_bias [Hv], norm [dv], out_proj}; self_attn.{q_proj [2·H·D, hidden], k_proj,
//   v_proj, o_proj, q_norm, k_norm}; mlp.{gate, experts.{e}.*, shared_expert.*, shared_expert_gate}.
#include <algorithm>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_qwen3_next() {
  register_decoder_architecture({"Qwen3NextForCausalLM"}, "qwen3_next", [](const io::ModelConfig& config) {
    const auto& j = config.raw;
    std::vector<std::string> types = config.layer_types;
    if (!j.contains("layer_types")) {
      const int64_t interval = io::json_int_or(j, "full_attention_interval", 4, config.path);
      for (int64_t l = 0; l < config.num_hidden_layers; ++l)
        types[l] = (l + 1) % interval ? "linear_attention" : "full_attention";
    }
    io::ModelConfig c = config;  // attention options for every layer; linear layers ignore theirs
    for (std::string& t : c.layer_types)
      if (t == "linear_attention") t = "full_attention";
    DecoderSpec spec = llama_family_spec(c);
    spec.qk_norm = true;
    spec.qkv_bias = spec.o_bias = c.attention_bias;
    if (c.attention_bias) throw Error("{}: attention_bias=true is not supported for qwen3_next", c.path);
    for (AttentionOptions& o : spec.attention) {
      o.norm_weight_offset = 1.f;
      o.output_gate = true;
    }
    spec.norm_weight_offset = 1.f;
    for (const std::string& t : types) spec.linear_layers.push_back(t == "linear_attention");

    GatedDeltaNetOptions& gdn = spec.gated_delta_net;
    gdn.hidden = c.hidden_size;
    gdn.num_k_heads = io::json_int(j, "linear_num_key_heads", c.path);
    gdn.num_v_heads = io::json_int(j, "linear_num_value_heads", c.path);
    gdn.k_dim = io::json_int(j, "linear_key_head_dim", c.path);
    gdn.v_dim = io::json_int(j, "linear_value_head_dim", c.path);
    gdn.conv_kernel = io::json_int_or(j, "linear_conv_kernel_dim", 4, c.path);
    gdn.norm_eps = static_cast<float>(c.rms_norm_eps);
    if (gdn.num_v_heads % gdn.num_k_heads != 0)
      throw Error("{}: linear_num_value_heads must be a multiple of linear_num_key_heads", c.path);

    MoeOptions& moe = spec.moe;
    moe.routing.kind = kernels::MoeRouting::SoftmaxTopK;
    moe.routing.num_experts = io::json_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", c.path);
    moe.routing.top_k = io::json_int(j, "num_experts_per_tok", c.path);
    moe.routing.norm_topk_prob = io::json_bool_or(j, "norm_topk_prob", true, c.path);
    moe.hidden = c.hidden_size;
    moe.intermediate = io::json_int(j, "moe_intermediate_size", c.path);
    moe.shared_intermediate = io::json_int_or(j, "shared_expert_intermediate_size", 0, c.path);
    moe.shared = "shared_expert";
    moe.shared_gate = moe.shared_intermediate > 0;
    const int64_t sparse_step = io::json_int_or(j, "decoder_sparse_step", 1, c.path);
    std::vector<int64_t> mlp_only;
    if (j.contains("mlp_only_layers")) mlp_only = j["mlp_only_layers"].get<std::vector<int64_t>>();
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      spec.moe_layers.push_back(std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() &&
                                moe.routing.num_experts > 0 && (l + 1) % sparse_step == 0);
    return spec;
  });
}

}  // namespace tachyon::model
