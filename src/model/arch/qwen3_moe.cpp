// Qwen3-MoE (https://huggingface.co/docs/transformers/model_doc/qwen3_moe): the Qwen3 layer
// (q_norm/k_norm per head before RoPE, explicit head_dim) with the MLP replaced by a sparse MoE
// on layers l with l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0:
//   x = embed(ids)
//   per layer: n = RMSNorm(x);  x += o(Attn(RoPE(RMSNorm_q(q(n))), RoPE(RMSNorm_k(k(n))), v(n)))
//              n = RMSNorm(x);  x += MoE(n)      (dense layers: down(silu(gate(n)) ⊙ up(n)))
//   logits = lm_head(RMSNorm(x))
//   MoE(n): p = softmax(n·Wgateᵀ) over num_experts; top-k (num_experts_per_tok);
//           w = p_topk / Σ p_topk when norm_topk_prob;  Σ w_i · down_i(silu(gate_i(n)) ⊙ up_i(n))
// RMSNorm(x) = x / rms(x) · w. RoPE layout: rotate-half over the full head_dim.
// Config: the Qwen3 keys plus num_experts (v5: num_local_experts), num_experts_per_tok,
//   moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers (dense layers
//   use intermediate_size).
// Tensors (stored dtype): the Qwen3 ones (qwen3.cpp), and on sparse layers "model.layers.{l}.mlp.":
//   gate.weight [E, hidden]; experts.{e}.{gate,up}_proj.weight [moe_I, hidden],
//   experts.{e}.down_proj.weight [hidden, moe_I].
#include <algorithm>

#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

namespace {

LayerSpec qwen3_moe_layer(const io::ModelConfig& c, int64_t l, const MoeOptions& moe, bool sparse) {
  AttentionOptions attention = attention_options(c, l, RopeLayout::RotateHalf);
  attention.qk_norm = true;
  attention.qkv_bias = attention.o_bias = c.attention_bias;
  return pre_norm_layer(c, attention, sparse ? FfnOptions{moe} : FfnOptions{gated_mlp_options(c)});
}

}  // namespace

void register_qwen3_moe() {
  register_decoder_architecture({"Qwen3MoeForCausalLM"}, "qwen3_moe", [](const io::ModelConfig& c) {
    MoeOptions moe;
    moe.routing.kind = kernels::MoeRouting::SoftmaxTopK;
    // transformers v5 writes num_local_experts; Hub checkpoints say num_experts.
    const char* num_experts = c.raw.contains("num_experts") ? "num_experts" : "num_local_experts";
    moe.routing.num_experts = io::json_int(c.raw, num_experts, c.path);
    moe.routing.top_k = io::json_int(c.raw, "num_experts_per_tok", c.path);
    moe.routing.norm_topk_prob = io::json_bool_or(c.raw, "norm_topk_prob", false, c.path);
    moe.hidden = c.hidden_size;
    moe.intermediate = io::json_int(c.raw, "moe_intermediate_size", c.path);
    const int64_t sparse_step = io::json_int_or(c.raw, "decoder_sparse_step", 1, c.path);
    std::vector<int64_t> mlp_only;
    if (c.raw.contains("mlp_only_layers")) mlp_only = c.raw["mlp_only_layers"].get<std::vector<int64_t>>();
    DecoderSpec spec = decoder_spec(c);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const bool sparse = std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end() &&
                          moe.routing.num_experts > 0 && (l + 1) % sparse_step == 0;
      spec.layers.push_back(qwen3_moe_layer(c, l, moe, sparse));
    }
    return spec;
  });
}

}  // namespace tachyon::model
