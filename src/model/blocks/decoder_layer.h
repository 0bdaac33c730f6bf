// One pre-norm decoder layer, as an architecture file describes it, and the block that runs it:
//   n = input_norm(x);  x += post_mixer_norm(Mixer(n))      Mixer: attention | MLA | Gated DeltaNet
//   n = ffn_norm(x);    x += post_ffn_norm(Ffn(n))          Ffn: gated MLP | MoE
// where post_mixer_norm / post_ffn_norm are the identity unless the layer has them (Gemma's
// sandwich norms). Every name in the description is a module under the layer's prefix, so it
// also names the checkpoint's tensors: under "model.layers.3.", the norm "input_layernorm" is
// "model.layers.3.input_layernorm.weight" [hidden] and the mixer "self_attn" holds
// "model.layers.3.self_attn.q_proj.weight"; each block's header lists its own tensors.
//
//   LayerSpec layer{
//       .input_norm = {"input_layernorm", eps},
//       .mixer_name = "self_attn",
//       .mixer = attention_options(config, l, RopeLayout::RotateHalf),
//       .ffn_norm = {"post_attention_layernorm", eps},
//       .ffn_name = "mlp",
//       .ffn = GatedMlpOptions{hidden, intermediate, kernels::Activation::SiLU},
//   };
//   DecoderLayer d;                      // binds into itself: it must not move until load()
//   d.bind(binder, "model.layers.3.", layer, hidden, /*cache_index=*/3);
//   binder.load();
//   rms_norm(x) into h with d.input_norm(); d.forward(ctx, ws, kv, x, h, y); x += y
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "kv/kv_cache.h"
#include "model/blocks/attention.h"
#include "model/blocks/gated_delta_net.h"
#include "model/blocks/mla.h"
#include "model/blocks/mlp.h"
#include "model/blocks/moe.h"
#include "model/blocks/step_context.h"
#include "model/weights.h"

namespace tachyon::model {

// RMSNorm over the hidden size: y = x / sqrt(mean(x²) + eps) · (weight_offset + w), with
// w = "{prefix}{name}.weight" [hidden] stored.
struct RmsNormSpec {
  std::string name;
  float eps = 1e-6f;
  float weight_offset = 0.f;  // 1: the zero-centred (1 + w) convention (Gemma, Qwen3-Next)
};

using MixerOptions = std::variant<AttentionOptions, MlaOptions, GatedDeltaNetOptions>;
using FfnOptions = std::variant<GatedMlpOptions, MoeOptions>;

// The K/V one layer keeps per token in the paged cache.
struct KvShape {
  int64_t num_kv_heads = 0, head_dim = 0;
  bool shared_kv = false;  // MLA: one latent row serves as K and V
  bool operator==(const KvShape&) const = default;
};

struct LayerSpec {
  RmsNormSpec input_norm;
  std::string mixer_name;  // the mixer's module: "self_attn", "linear_attn"
  MixerOptions mixer;
  std::optional<RmsNormSpec> post_mixer_norm;
  RmsNormSpec ffn_norm;
  std::string ffn_name;    // the FFN's module: "mlp"
  FfnOptions ffn;
  std::optional<RmsNormSpec> post_ffn_norm;

  // Attention and MLA keep one paged K/V layer of the cache; Gated DeltaNet one recurrent
  // state layer instead (state_floats() per sequence slot).
  std::optional<KvShape> kv_shape() const;
  int64_t state_floats() const;
};

// The layer most architectures share (Llama's): RMSNorm "input_layernorm" before the mixer
// "self_attn", RMSNorm "post_attention_layernorm" before the FFN "mlp", both with config.json's
// rms_norm_eps and plain weights (no 1 + w), no sandwich norms.
LayerSpec pre_norm_layer(const io::ModelConfig& config, MixerOptions mixer, FfnOptions ffn);

class DecoderLayer {
 public:
  // Binds every tensor `spec` names under `prefix` ("model.layers.3."). The binder writes into
  // this object when it loads, so the object stays where it is until WeightBinder::load().
  // cache_index: the layer's K/V layer (kv_shape) or state layer in the KvCache it runs on.
  void bind(WeightBinder& binder, const std::string& prefix, LayerSpec spec, int64_t hidden, int64_t cache_index);

  const LayerSpec& spec() const { return spec_; }
  const Weight& input_norm() const { return input_norm_; }  // [hidden] stored

  // x, h, y: [rows, hidden] f32. On entry h = input_norm(x). Adds post_mixer_norm(Mixer(h))
  // to x and leaves post_ffn_norm(Ffn(ffn_norm(x))) in y, not yet added: the caller fuses that
  // residual add with the norm that follows it. h is overwritten. Writes the layer's K/V (or
  // advances its recurrent state) for every row.
  void forward(StepContext& ctx, Workspace& ws, kv::KvCache& kv, float* x, float* h, float* y) const;

 private:
  LayerSpec spec_;
  int64_t hidden_ = 0, cache_index_ = 0;
  Weight input_norm_, ffn_norm_;                // [hidden] stored
  Weight post_mixer_norm_, post_ffn_norm_;      // [hidden] stored, where the spec has them
  AttentionWeights attention_;                  // the mixer's weights: one of these three
  MlaWeights mla_;
  GatedDeltaNetWeights gated_delta_net_;
  GatedMlpWeights mlp_;                         // the FFN's weights: one of these two
  MoeWeights moe_;
};

}  // namespace tachyon::model
