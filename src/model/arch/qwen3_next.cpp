// Qwen3-Next (https://huggingface.co/docs/transformers/model_doc/qwen3_next): a hybrid decoder.
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += Mixer(n)
//              n = RMSNorm(x);  x += MoE(n)
//   logits = lm_head(RMSNorm(x))
//   Mixer = Gated DeltaNet (blocks/gated_delta_net.h) on "linear_attention" layers,
//           gated attention on "full_attention" layers:
//             [q | gate] = n·Wqᵀ (per head D query then D gate rows), q, k = RMSNorm(q), RMSNorm(k),
//             partial RoPE (first partial_rotary_factor·D dims, rotate-half), o = Attn ⊙ sigmoid(gate)
//   MoE = Σ_k w_k · Expert_k(n) + sigmoid(n·w_sgᵀ) · SharedExpert(n)     (softmax top-k, norm_topk_prob);
//         dense layers (mlp_only_layers): down(silu(gate(n)) ⊙ up(n))
// Zero-centred norms: the decoder norms, q_norm/k_norm and the final norm use (1 + w); the
// gated RMSNorm inside the DeltaNet uses w.
// Config: vocab_size, hidden_size, num_hidden_layers, layer_types (else full_attention_interval),
//   num_attention_heads, num_key_value_heads, head_dim, partial_rotary_factor, rope,
//   rms_norm_eps, attention_bias (must be false), linear_num_key_heads, linear_num_value_heads,
//   linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim, num_experts (v5:
//   num_local_experts), num_experts_per_tok, norm_topk_prob, moe_intermediate_size,
//   shared_expert_intermediate_size, decoder_sparse_step, mlp_only_layers, intermediate_size
//   (dense layers), tie_word_embeddings.
// Tensors (stored dtype unless noted): model.embed_tokens.weight [vocab, hidden]; per layer
//   "model.layers.{l}.": input_layernorm.weight, post_attention_layernorm.weight [hidden];
//   linear_attn.{in_proj_qkvz.weight [Hk·(2dk + 2·(Hv/Hk)·dv), hidden], in_proj_ba.weight
//   [2·Hv, hidden], conv1d.weight [conv_dim, 1, K], A_log [Hv] (to f32), dt_bias [Hv] (to f32),
//   norm.weight [dv], out_proj.weight [hidden, Hv·dv]}; self_attn.{q_proj.weight [2·H·D, hidden],
//   k_proj.weight, v_proj.weight [KV·D, hidden], o_proj.weight [hidden, H·D], q_norm.weight,
//   k_norm.weight [D]}; mlp.{gate.weight [E, hidden], experts.{e}.{gate,up}_proj.weight [moe_I, hidden],
//   experts.{e}.down_proj.weight [hidden, moe_I], shared_expert.{gate,up,down}_proj.weight,
//   shared_expert_gate.weight [1, hidden]}; model.norm.weight [hidden]; lm_head.weight [vocab, hidden]
//   unless tied.
#include <algorithm>

#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

struct Qwen3NextBlocks {
  GatedDeltaNetOptions gated_delta_net;
  MoeOptions moe;
  GatedMlpOptions mlp;
};

LayerSpec qwen3_next_layer(const io::ModelConfig& c, int64_t l, bool linear, bool sparse, const Qwen3NextBlocks& b) {
  const float eps = static_cast<float>(c.rms_norm_eps), one = 1.f;  // (1 + w) norms
  MixerOptions mixer = b.gated_delta_net;
  if (!linear) {
    AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
    attention.qk_norm = true;
    attention.norm_weight_offset = one;
    attention.output_gate = true;
    mixer = attention;
  }
  return {
      .input_norm = {"input_layernorm", eps, one},
      .mixer_name = linear ? "linear_attn" : "self_attn",
      .mixer = mixer,
      .ffn_norm = {"post_attention_layernorm", eps, one},
      .ffn_name = "mlp",
      .ffn = sparse ? FfnOptions{b.moe} : FfnOptions{b.mlp},
  };
}

}  // namespace

void register_qwen3_next() {
  register_decoder_architecture({"Qwen3NextForCausalLM"}, "qwen3_next", [](const io::ModelConfig& c) {
    const auto& j = c.raw;
    if (c.attention_bias) throw Error("{}: attention_bias=true is not supported for qwen3_next", c.path);
    std::vector<std::string> types = c.layer_types;
    if (!j.contains("layer_types")) {
      const int64_t interval = io::json_int_or(j, "full_attention_interval", 4, c.path);
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        types[l] = (l + 1) % interval ? "linear_attention" : "full_attention";
    }
    Qwen3NextBlocks b;
    GatedDeltaNetOptions& gdn = b.gated_delta_net;
    gdn.hidden = c.hidden_size;
    gdn.num_k_heads = io::json_int(j, "linear_num_key_heads", c.path);
    gdn.num_v_heads = io::json_int(j, "linear_num_value_heads", c.path);
    gdn.k_dim = io::json_int(j, "linear_key_head_dim", c.path);
    gdn.v_dim = io::json_int(j, "linear_value_head_dim", c.path);
    gdn.conv_kernel = io::json_int_or(j, "linear_conv_kernel_dim", 4, c.path);
    gdn.norm_eps = static_cast<float>(c.rms_norm_eps);
    if (gdn.num_v_heads % gdn.num_k_heads != 0)
      throw Error("{}: linear_num_value_heads must be a multiple of linear_num_key_heads", c.path);

    MoeOptions& moe = b.moe;
    moe.routing.kind = kernels::MoeRouting::SoftmaxTopK;
    moe.routing.num_experts = io::json_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", c.path);
    moe.routing.top_k = io::json_int(j, "num_experts_per_tok", c.path);
    moe.routing.norm_topk_prob = io::json_bool_or(j, "norm_topk_prob", true, c.path);
    moe.hidden = c.hidden_size;
    moe.intermediate = io::json_int(j, "moe_intermediate_size", c.path);
    moe.shared_intermediate = io::json_int_or(j, "shared_expert_intermediate_size", 0, c.path);
    moe.shared = "shared_expert";
    moe.shared_gate = moe.shared_intermediate > 0;
    b.mlp = {c.hidden_size, c.intermediate_size, hidden_activation(c, "silu")};
    const int64_t sparse_step = io::json_int_or(j, "decoder_sparse_step", 1, c.path);
    std::vector<int64_t> mlp_only;
    if (j.contains("mlp_only_layers")) mlp_only = j["mlp_only_layers"].get<std::vector<int64_t>>();

    DecoderSpec spec = decoder_spec(c);
    spec.final_norm.weight_offset = 1.f;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const bool sparse = std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() &&
                          moe.routing.num_experts > 0 && (l + 1) % sparse_step == 0;
      spec.layers.push_back(qwen3_next_layer(c, l, types[l] == "linear_attention", sparse, b));
    }
    return spec;
  });
}

}  // namespace tachyon::model
