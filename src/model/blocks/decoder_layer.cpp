#include "model/blocks/decoder_layer.h"

namespace tachyon::model {

LayerSpec pre_norm_layer(const io::ModelConfig& config, MixerOptions mixer, FfnOptions ffn) {
  const float eps = static_cast<float>(config.rms_norm_eps);
  return {
      .input_norm = {"input_layernorm", eps},
      .mixer_name = "self_attn",
      .mixer = std::move(mixer),
      .ffn_norm = {"post_attention_layernorm", eps},
      .ffn_name = "mlp",
      .ffn = std::move(ffn),
  };
}

std::optional<KvShape> LayerSpec::kv_shape() const {
  if (const auto* a = std::get_if<AttentionOptions>(&mixer)) return KvShape{a->num_kv_heads, a->head_dim, false};
  if (const auto* m = std::get_if<MlaOptions>(&mixer)) return KvShape{1, m->cache_dim(), true};
  return std::nullopt;
}

int64_t LayerSpec::state_floats() const {
  const auto* g = std::get_if<GatedDeltaNetOptions>(&mixer);
  return g ? g->state_floats() : 0;
}

void DecoderLayer::bind(WeightBinder& b, const std::string& p, LayerSpec spec, int64_t hidden, int64_t cache_index) {
  spec_ = std::move(spec);
  hidden_ = hidden;
  cache_index_ = cache_index;
  auto bind_norm = [&](Weight* w, const std::optional<RmsNormSpec>& n) {
    if (n) b.bind(w, p + n->name + ".weight", {hidden});
  };
  bind_norm(&input_norm_, spec_.input_norm);
  const std::string mixer = p + spec_.mixer_name + ".";
  if (const auto* a = std::get_if<AttentionOptions>(&spec_.mixer)) bind_attention(b, attention_, mixer, *a);
  else if (const auto* m = std::get_if<MlaOptions>(&spec_.mixer)) bind_mla(b, mla_, mixer, *m);
  else bind_gated_delta_net(b, gated_delta_net_, mixer, std::get<GatedDeltaNetOptions>(spec_.mixer));
  bind_norm(&post_mixer_norm_, spec_.post_mixer_norm);
  bind_norm(&ffn_norm_, spec_.ffn_norm);
  const std::string ffn = p + spec_.ffn_name + ".";
  if (const auto* m = std::get_if<GatedMlpOptions>(&spec_.ffn))
    bind_gated_mlp(b, mlp_, ffn, m->hidden, m->intermediate);
  else
    bind_moe(b, moe_, ffn, std::get<MoeOptions>(spec_.ffn));
  bind_norm(&post_ffn_norm_, spec_.post_ffn_norm);
}

void DecoderLayer::forward(StepContext& ctx, Workspace& ws, kv::KvCache& kv, float* x, float* h, float* y) const {
  auto& be = ctx.backend;
  const int64_t rows = ctx.rows;
  if (const auto* a = std::get_if<AttentionOptions>(&spec_.mixer))
    attention_forward(ctx, ws, attention_, *a, kv.layer(cache_index_, &be), ctx.attention_meta(kv, cache_index_), h, y);
  else if (const auto* m = std::get_if<MlaOptions>(&spec_.mixer))
    mla_forward(ctx, ws, mla_, *m, kv.layer(cache_index_, &be), h, y);
  else
    gated_delta_net_forward(ctx, ws, gated_delta_net_, std::get<GatedDeltaNetOptions>(spec_.mixer),
                            kv.state(cache_index_, &be), h, y);
  // Tensor parallelism (shard_plan.h): each rank's o_proj / down_proj saw only its heads' or its
  // intermediate slice's inputs, so y holds a partial sum until the ranks add theirs.
  if (ctx.all_reduce) be.all_reduce_sum(y, rows * hidden_);
  if (const auto& n = spec_.post_mixer_norm)
    be.rms_norm(y, post_mixer_norm_, rows, hidden_, n->eps, n->weight_offset, y);
  const RmsNormSpec& ffn_norm = spec_.ffn_norm;
  be.add_rms_norm(x, y, ffn_norm_, rows, hidden_, ffn_norm.eps, ffn_norm.weight_offset, h);  // x += y; h = ffn_norm(x)
  if (const auto* m = std::get_if<GatedMlpOptions>(&spec_.ffn)) gated_mlp_forward(ctx, ws, mlp_, m->activation, h, y);
  else moe_forward(ctx, ws, moe_, std::get<MoeOptions>(spec_.ffn), h, y);
  if (ctx.all_reduce) be.all_reduce_sum(y, rows * hidden_);
  if (const auto& n = spec_.post_ffn_norm)
    be.rms_norm(y, post_ffn_norm_, rows, hidden_, n->eps, n->weight_offset, y);
}

}  // namespace tachyon::model
