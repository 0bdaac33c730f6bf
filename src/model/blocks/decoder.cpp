#include "model/blocks/decoder.h"

#include <cmath>

#include "base/error.h"
#include "model/rope.h"

namespace tachyon::model {

AttentionOptions llama_attention_options(const io::ModelConfig& c, int64_t layer) {
  AttentionOptions o;
  o.hidden = c.hidden_size;
  o.num_heads = c.num_attention_heads;
  o.num_kv_heads = c.num_key_value_heads;
  o.head_dim = c.head_dim;
  o.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  const std::string& type = c.layer_types.at(layer);
  if (type == "sliding_attention") {
    if (!c.sliding_window) throw Error("{}: layer {} is sliding_attention but sliding_window is not set", c.path, layer);
    o.sliding_window = *c.sliding_window;
  } else if (type != "full_attention") {
    throw Error("{}: layer type '{}' is not supported by model_type '{}'", c.path, type, c.model_type);
  }
  o.norm_eps = static_cast<float>(c.rms_norm_eps);
  o.rope_params = c.rope_for(type);
  o.max_position_embeddings = c.max_position_embeddings;
  o.rope = make_rope_table(o.rope_params, o.head_dim, c.max_position_embeddings);
  return o;
}

DecoderSpec llama_family_spec(const io::ModelConfig& c) {
  DecoderSpec s;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.intermediate_size = c.intermediate_size;
  s.num_layers = c.num_hidden_layers;
  s.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
  s.tie_word_embeddings = c.tie_word_embeddings;
  const std::string act = c.raw.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error("{}: hidden_act '{}' is not supported for model_type '{}'", c.path, act, c.model_type);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) s.attention.push_back(llama_attention_options(c, l));
  return s;
}

namespace {

class DecoderModel final : public Model {
 public:
  DecoderModel(const io::ModelConfig& config, std::shared_ptr<io::Checkpoint> checkpoint, kernels::Backend& backend,
               DecoderSpec spec)
      : config_(config), checkpoint_(std::move(checkpoint)), backend_(backend), spec_(std::move(spec)), ws_(backend) {
    const int64_t hidden = spec_.hidden_size;
    WeightBinder b(*checkpoint_, backend_);
    b.bind(&embed_, "model.embed_tokens.weight", {spec_.vocab_size, hidden});
    layers_.resize(static_cast<size_t>(spec_.num_layers));
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      Layer& layer = layers_[l];
      b.bind(&layer.input_norm, p + "input_layernorm.weight", {hidden});
      b.bind(&layer.post_attention_norm, p + "post_attention_layernorm.weight", {hidden});
      bind_attention(b, layer.attention, p + "self_attn.", spec_.attention[l], spec_.qkv_bias, spec_.o_bias,
                     spec_.qk_norm);
      bind_gated_mlp(b, layer.mlp, p + "mlp.", hidden, spec_.intermediate_size);
    }
    b.bind(&final_norm_, "model.norm.weight", {hidden});
    if (!spec_.tie_word_embeddings) b.bind(&lm_head_, "lm_head.weight", {spec_.vocab_size, hidden});
    b.load();
    if (spec_.tie_word_embeddings) lm_head_ = embed_;
  }

  const io::ModelConfig& config() const override { return config_; }
  kernels::Backend& backend() override { return backend_; }

  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    return {spec_.num_layers, config_.num_key_value_heads, config_.head_dim, block_size, num_blocks};
  }

  StepOutput forward(const Batch& batch, kv::KvCache& kv) override {
    StepContext ctx(backend_, batch, kv);
    for (int32_t t : batch.tokens)
      TACHYON_CHECK(t >= 0 && t < spec_.vocab_size, "token id {} outside the vocabulary [0, {})", t, spec_.vocab_size);
    const int64_t rows = ctx.rows, hidden = spec_.hidden_size;
    float* x = ws_.get(Workspace::kResidual, rows * hidden);  // [rows, hidden] residual stream
    float* h = ws_.get(Workspace::kNormed, rows * hidden);    // [rows, hidden] normed input of a sub-block
    float* y = ws_.get(Workspace::kProj, rows * hidden);      // [rows, hidden] sub-block output
    backend_.embedding(embed_, batch.tokens.data(), rows, 1.f, x);
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const Layer& layer = layers_[l];
      backend_.rms_norm(x, layer.input_norm, rows, hidden, spec_.rms_norm_eps, 0.f, h);
      attention_forward(ctx, ws_, layer.attention, spec_.attention[l], kv.layer(l), h, y);
      backend_.add(x, y, rows * hidden);
      backend_.rms_norm(x, layer.post_attention_norm, rows, hidden, spec_.rms_norm_eps, 0.f, h);
      gated_mlp_forward(ctx, ws_, layer.mlp, spec_.activation, h, y);
      backend_.add(x, y, rows * hidden);
    }
    return finish(batch, x);
  }

 private:
  struct Layer {
    Weight input_norm, post_attention_norm;  // [hidden]
    AttentionWeights attention;
    GatedMlpWeights mlp;
  };

  StepOutput finish(const Batch& batch, const float* x) {
    StepOutput out;
    out.vocab_size = spec_.vocab_size;
    out.hidden_size = spec_.hidden_size;
    const int64_t hidden = spec_.hidden_size;
    if (!batch.hidden_rows.empty()) {
      const int64_t n = static_cast<int64_t>(batch.hidden_rows.size());
      float* hid = ws_.get(Workspace::kHidden, n * hidden);
      backend_.gather_rows(x, batch.hidden_rows.data(), n, hidden, hid);
      out.hidden.resize(static_cast<size_t>(n * hidden));
      backend_.copy_to_host(out.hidden.data(), hid, out.hidden.size() * sizeof(float));
    }
    if (!batch.logit_rows.empty()) {
      const int64_t n = static_cast<int64_t>(batch.logit_rows.size());
      float* in = ws_.get(Workspace::kLogitIn, n * hidden);              // [n, hidden]
      float* logits = ws_.get(Workspace::kLogits, n * spec_.vocab_size);  // [n, vocab]
      backend_.gather_rows(x, batch.logit_rows.data(), n, hidden, in);
      backend_.rms_norm(in, final_norm_, n, hidden, spec_.rms_norm_eps, 0.f, in);
      backend_.matmul(in, n, lm_head_, nullptr, logits);
      out.logits.resize(static_cast<size_t>(n * spec_.vocab_size));
      backend_.copy_to_host(out.logits.data(), logits, out.logits.size() * sizeof(float));
    }
    return out;
  }

  io::ModelConfig config_;
  std::shared_ptr<io::Checkpoint> checkpoint_;  // the mapping; the backend holds copies of the weights
  kernels::Backend& backend_;
  DecoderSpec spec_;
  Workspace ws_;
  Weight embed_, final_norm_, lm_head_;  // [vocab, hidden], [hidden], [vocab, hidden]
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_decoder_model(const io::ModelConfig& config, std::shared_ptr<io::Checkpoint> checkpoint,
                                          kernels::Backend& backend, DecoderSpec spec) {
  TACHYON_CHECK(static_cast<int64_t>(spec.attention.size()) == spec.num_layers, "one attention spec per layer");
  return std::make_unique<DecoderModel>(config, std::move(checkpoint), backend, std::move(spec));
}

}  // namespace tachyon::model
