#include "model/blocks/decoder.h"

#include <algorithm>
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
  const std::string key = c.raw.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = c.raw.value(key, std::string("silu"));
  if (act == "silu") s.activation = kernels::Activation::SiLU;
  else if (act == "gelu_pytorch_tanh") s.activation = kernels::Activation::GeluTanh;
  else throw Error("{}: {} '{}' is not supported for model_type '{}'", c.path, key, act, c.model_type);
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
      if (spec_.sandwich_norms) {
        b.bind(&layer.pre_feedforward_norm, p + "pre_feedforward_layernorm.weight", {hidden});
        b.bind(&layer.post_feedforward_norm, p + "post_feedforward_layernorm.weight", {hidden});
      }
      layer.is_linear = !spec_.linear_layers.empty() && spec_.linear_layers[l];
      if (layer.is_linear) {
        layer.cache_index = num_state_layers_++;
        bind_gated_delta_net(b, layer.gated_delta_net, p + "linear_attn.", spec_.gated_delta_net);
      } else if (spec_.use_mla) {
        layer.cache_index = num_kv_layers_++;
        bind_mla(b, layer.mla, p + "self_attn.", spec_.mla);
      } else {
        layer.cache_index = num_kv_layers_++;
        bind_attention(b, layer.attention, p + "self_attn.", spec_.attention[l], spec_.qkv_bias, spec_.o_bias,
                       spec_.qk_norm);
      }
      if (spec_.attention_sinks && !layer.is_linear)
        bind_attention_sinks(b, layer.attention, p + "self_attn.", spec_.attention[l]);
      layer.is_moe = !spec_.moe_layers.empty() && spec_.moe_layers[l];
      if (layer.is_moe) bind_moe(b, layer.moe, p + "mlp.", spec_.moe);
      else bind_gated_mlp(b, layer.mlp, p + "mlp.", hidden, spec_.intermediate_size);
    }
    b.bind(&final_norm_, "model.norm.weight", {hidden});
    if (!spec_.tie_word_embeddings) b.bind(&lm_head_, "lm_head.weight", {spec_.vocab_size, hidden}, WeightBinder::Use::Matmul);
    b.load();
    if (spec_.tie_word_embeddings) lm_head_ = embed_;
  }

  const io::ModelConfig& config() const override { return config_; }
  kernels::Backend& backend() override { return backend_; }

  void set_draft_vocabulary(int64_t n) override {
    const bool all = n <= 0 || n >= spec_.vocab_size;
    if (all && !draft_weights_) {
      draft_head_ = {};
      return;
    }
    // Row-major [vocab, hidden]: ids [0, n) are its first n rows. A drafter's head is its own
    // upload in draft precision, also for all ids (a tied head is the embedding table, exact).
    const auto& t = checkpoint_->get(spec_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    const Weight host{t.data, t.dtype, all ? spec_.vocab_size : n, spec_.hidden_size};
    draft_head_ = draft_weights_ ? backend_.upload_draft_weight(host) : backend_.upload_weight(host);
  }

  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    kv::KvLayout layout{num_kv_layers_, config_.num_key_value_heads, config_.head_dim, block_size, num_blocks};
    if (spec_.use_mla) {
      layout.num_kv_heads = 1;
      layout.head_dim = spec_.mla.cache_dim();
      layout.shared_kv = true;
    }
    layout.num_state_layers = num_state_layers_;
    layout.state_floats = num_state_layers_ > 0 ? spec_.gated_delta_net.state_floats() : 0;
    if (num_state_layers_ > 0) {  // snapshots may cost as much memory as the K/V they stand beside, no more
      const int64_t kv_floats = 2 * layout.num_layers * block_size * layout.num_kv_heads * layout.head_dim;
      const int64_t state = layout.num_state_layers * layout.state_floats;
      layout.state_snapshot_interval =
          static_cast<int32_t>(std::max<int64_t>(1, (state + kv_floats - 1) / std::max<int64_t>(1, kv_floats)));
    }
    return layout;
  }

  StepOutput forward(const Batch& batch, kv::KvCache& kv) override {
    TACHYON_CHECK(kv.layout().num_layers == num_kv_layers_ && kv.layout().num_state_layers == num_state_layers_,
                  "KV cache layout does not match the model");
    if (!batch.device_tokens)
      for (int32_t t : batch.tokens)
        TACHYON_CHECK(t >= 0 && t < spec_.vocab_size, "token id {} outside the vocabulary [0, {})", t, spec_.vocab_size);
    if (kv.has_state()) {  // each sequence's recurrent state to its first position (rows are contiguous)
      for (size_t r = 0; r < batch.tokens.size(); ++r) {
        const int32_t s = batch.row_seq[r];
        if (r + 1 == batch.tokens.size() || batch.row_seq[r + 1] != s) {
          size_t first = r;
          while (first > 0 && batch.row_seq[first - 1] == s) --first;
          kv.prepare_state(batch.seqs.at(static_cast<size_t>(s)), batch.positions[first], batch.positions[r] + 1);
        }
      }
    }
    StepContext ctx(backend_, batch, kv);
    const int64_t rows = ctx.rows, hidden = spec_.hidden_size;
    float* x = ws_.get(Workspace::kResidual, rows * hidden);  // [rows, hidden] residual stream
    float* h = ws_.get(Workspace::kNormed, rows * hidden);    // [rows, hidden] normed input of a sub-block
    float* y = ws_.get(Workspace::kProj, rows * hidden);      // [rows, hidden] sub-block output
    const float eps = spec_.rms_norm_eps, offset = spec_.norm_weight_offset;
    // Every row a logit row, in order (decode, verification): the last residual add and the final
    // norm are one op, with no gather (two launches fewer on a GPU's launch-bound small steps).
    float* normed = spec_.num_layers > 0 && batch.logits_on_every_row() ? ws_.get(Workspace::kLogitIn, rows * hidden)
                                                                          : nullptr;
    if (batch.device_tokens) backend_.embedding_device_ids(embed_, batch.device_tokens, rows, spec_.embed_scale, x);
    else backend_.embedding(embed_, batch.tokens.data(), rows, spec_.embed_scale, x);
    if (spec_.num_layers > 0) backend_.rms_norm(x, layers_[0].input_norm, rows, hidden, eps, offset, h);
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const Layer& layer = layers_[l];  // h = input_norm(x) on entry
      if (layer.is_linear)
        gated_delta_net_forward(ctx, ws_, layer.gated_delta_net, spec_.gated_delta_net, kv.state(layer.cache_index), h,
                                y);
      else if (spec_.use_mla)
        mla_forward(ctx, ws_, layer.mla, spec_.mla, kv.layer(layer.cache_index), h, y);
      else
        attention_forward(ctx, ws_, layer.attention, spec_.attention[l], kv.layer(layer.cache_index), h, y);
      if (spec_.sandwich_norms) backend_.rms_norm(y, layer.post_attention_norm, rows, hidden, eps, offset, y);
      const Weight& ffn_norm = spec_.sandwich_norms ? layer.pre_feedforward_norm : layer.post_attention_norm;
      backend_.add_rms_norm(x, y, ffn_norm, rows, hidden, eps, offset, h);  // x += y; h = ffn_norm(x)
      if (layer.is_moe) moe_forward(ctx, ws_, layer.moe, spec_.moe, h, y);
      else gated_mlp_forward(ctx, ws_, layer.mlp, spec_.activation, h, y);
      if (spec_.sandwich_norms) backend_.rms_norm(y, layer.post_feedforward_norm, rows, hidden, eps, offset, y);
      if (l + 1 < spec_.num_layers)  // x += y; h = the next layer's input_norm(x)
        backend_.add_rms_norm(x, y, layers_[l + 1].input_norm, rows, hidden, eps, offset, h);
      else if (normed)  // x += y; the LM head's input = final_norm(x), every row
        backend_.add_rms_norm(x, y, final_norm_, rows, hidden, eps, offset, normed);
      else
        backend_.add(x, y, rows * hidden);
    }
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
      const int32_t begin = ctx.seq_row_begin[s], end = ctx.seq_row_begin[s + 1];
      if (begin < end) kv.commit_state(batch.seqs[s], batch.positions[begin], batch.positions[end - 1] + 1);
    }
    return finish(batch, x, normed);
  }

 private:
  struct Layer {
    Weight input_norm, post_attention_norm;           // [hidden]
    Weight pre_feedforward_norm, post_feedforward_norm;  // [hidden], sandwich_norms only
    AttentionWeights attention;
    MlaWeights mla;                                    // use_mla
    bool is_linear = false;
    GatedDeltaNetWeights gated_delta_net;              // linear_layers
    int64_t cache_index = 0;                           // KV layer (attention) or state layer (linear)
    bool is_moe = false;
    GatedMlpWeights mlp;                               // dense layers
    MoeWeights moe;                                    // MoE layers
  };

  // normed: final_norm(x) of every row when the last layer computed it (all rows are logit rows).
  StepOutput finish(const Batch& batch, const float* x, const float* normed) {
    const Weight& head = draft_head_.empty() ? lm_head_ : draft_head_;
    const int64_t vocab = head.rows;
    StepOutput out;
    out.vocab_size = vocab;
    out.hidden_size = spec_.hidden_size;
    const int64_t hidden = spec_.hidden_size;
    // Every op is issued before the first copy to the host (which waits for the device), so a
    // step that also returns hidden states waits once, not once more in the middle.
    float* hid = nullptr;
    if (!batch.hidden_rows.empty()) {
      const int64_t n = static_cast<int64_t>(batch.hidden_rows.size());
      hid = ws_.get(Workspace::kHidden, n * hidden);
      backend_.gather_rows(x, batch.hidden_rows.data(), n, hidden, hid);
      out.hidden.resize(static_cast<size_t>(n * hidden));
    }
    auto copy_hidden = [&] {
      if (hid) backend_.copy_to_host(out.hidden.data(), hid, out.hidden.size() * sizeof(float));
    };
    if (batch.logit_rows.empty()) {
      copy_hidden();
      return out;
    }
    {
      const int64_t n = static_cast<int64_t>(batch.logit_rows.size());
      const StepOutputs& outputs = batch.outputs;
      outputs.check(n);
      float* in = ws_.get(Workspace::kLogitIn, n * hidden);              // [n, hidden]
      float* logits = ws_.get(Workspace::kLogits, n * vocab);  // [n, vocab]
      if (!normed) {
        backend_.gather_rows(x, batch.logit_rows.data(), n, hidden, in);
        backend_.rms_norm(in, final_norm_, n, hidden, spec_.rms_norm_eps, spec_.norm_weight_offset, in);
      }
      backend_.matmul(in, n, head, nullptr, logits);
      if (outputs.tokens == StepOutputs::Tokens::TopTwoOnDevice) {  // stays on the device
        backend_.top_two(logits, n, vocab, outputs.top_two);
        copy_hidden();
        return out;
      }
      if (outputs.token_ids()) {
        int32_t* ids = ws_.get_ints(Workspace::kTokenIds, n);  // [n] int32
        if (outputs.tokens == StepOutputs::Tokens::Argmax) backend_.argmax(logits, n, vocab, ids);
        else backend_.sample_tokens(logits, n, vocab, outputs.sampling.data(), ids);
        out.argmax.resize(static_cast<size_t>(n));
        out.device_ids = ids;
        if (outputs.read_tokens_later && !hid) {
          out.pending_read = backend_.copy_to_host_later(out.argmax.data(), ids, out.argmax.size() * sizeof(int32_t));
          out.tokens_pending = true;
          return out;
        }
        copy_hidden();
        backend_.copy_to_host(out.argmax.data(), ids, out.argmax.size() * sizeof(int32_t));
        out.tokens_pending = true;  // read already: collect_tokens only checks them
        collect_tokens(backend_, out);
        return out;
      }
      out.logits.resize(static_cast<size_t>(n * vocab));
      copy_hidden();
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
  Weight draft_head_;                    // set_draft_vocabulary: the LM head's first n rows, or empty
  const bool draft_weights_ = backend_.loading_draft_weights();  // loaded as a drafter (kernels::DraftWeights)
  std::vector<Layer> layers_;
  int64_t num_kv_layers_ = 0, num_state_layers_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_decoder_model(const io::ModelConfig& config, std::shared_ptr<io::Checkpoint> checkpoint,
                                          kernels::Backend& backend, DecoderSpec spec) {
  TACHYON_CHECK(static_cast<int64_t>(spec.attention.size()) == spec.num_layers, "one attention spec per layer");
  return std::make_unique<DecoderModel>(config, std::move(checkpoint), backend, std::move(spec));
}

}  // namespace tachyon::model
