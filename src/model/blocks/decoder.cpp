#include "model/blocks/decoder.h"

#include <algorithm>

#include "base/error.h"

namespace tachyon::model {

DecoderSpec decoder_spec(const io::ModelConfig& c) {
  DecoderSpec s;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.final_norm = {"norm", static_cast<float>(c.rms_norm_eps)};
  s.tie_word_embeddings = c.tie_word_embeddings;
  // A base model saved without its LM head (Qwen3Model, LlamaModel: embedding checkpoints) has
  // no lm_head; the embedding table stands in for it, and only hidden states are read.
  for (const std::string& a : c.architectures)
    if (a.ends_with("Model") && a.find("For") == std::string::npos) s.tie_word_embeddings = true;
  return s;
}

namespace {

class DecoderModel final : public Model {
 public:
  DecoderModel(const io::ModelConfig& config, std::shared_ptr<WeightSource> checkpoint, kernels::Backend& backend,
               DecoderSpec spec)
      : config_(config), checkpoint_(std::move(checkpoint)), backend_(backend), spec_(std::move(spec)), ws_(backend) {
    const int64_t hidden = spec_.hidden_size;
    WeightBinder b(*checkpoint_, backend_);
    b.bind(&embed_, "model.embed_tokens.weight", {spec_.vocab_size, hidden},
           spec_.tie_word_embeddings ? WeightBinder::Use::TiedHead : WeightBinder::Use::Any);
    layers_.resize(spec_.layers.size());  // never again: the binder holds pointers into them
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerSpec& layer = spec_.layers[l];
      const std::optional<KvShape> kv = layer.kv_shape();
      if (kv && num_kv_layers_ > 0 && *kv != kv_shape_)
        throw Error("{}: layer {} keeps K/V of another shape than the layers before it", config_.path, l);
      if (!kv && num_state_layers_ > 0 && layer.state_floats() != state_floats_)
        throw Error("{}: layer {} keeps a recurrent state of another size than the layers before it", config_.path, l);
      if (kv) kv_shape_ = *kv;
      else state_floats_ = layer.state_floats();
      if (kv) {
        const auto* a = std::get_if<AttentionOptions>(&layer.mixer);
        layer_windows_.push_back(a ? static_cast<int32_t>(a->sliding_window) : 0);
      }
      layers_[l].bind(b, "model.layers." + std::to_string(l) + ".", layer, hidden,
                      kv ? num_kv_layers_++ : num_state_layers_++);
    }
    b.bind(&final_norm_, "model." + spec_.final_norm.name + ".weight", {hidden});
    if (!spec_.tie_word_embeddings) b.bind(&lm_head_, "lm_head.weight", {spec_.vocab_size, hidden}, WeightBinder::Use::Matmul);
    b.load();
    has_decode_weights_ = b.decode_copies() > 0;
    if (spec_.tie_word_embeddings) lm_head_ = embed_;
  }

  const io::ModelConfig& config() const override { return config_; }
  kernels::Backend& backend() override { return backend_; }
  bool has_decode_weights() const override { return has_decode_weights_; }

  void set_draft_vocabulary(int64_t n) override {
    const bool all = n <= 0 || n >= spec_.vocab_size;
    if (all && !draft_weights_) {
      draft_head_ = {};
      return;
    }
    // Row-major [vocab, hidden]: ids [0, n) are its first n rows. A drafter's head is its own
    // upload in draft precision, also for all ids (a tied head is the embedding table, exact).
    const HostTensor t = checkpoint_->load(spec_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    Weight host = t.weight;  // row-major in every format: the first n rows are a prefix
    host.rows = all ? spec_.vocab_size : n;
    draft_head_ = draft_weights_ ? backend_.upload_draft_weight(host) : backend_.upload_weight(host);
  }

  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    kv::KvLayout layout{num_kv_layers_, kv_shape_.num_kv_heads, kv_shape_.head_dim, block_size, num_blocks};
    layout.shared_kv = kv_shape_.shared_kv;
    if (std::any_of(layer_windows_.begin(), layer_windows_.end(), [](int32_t w) { return w > 0; }))
      layout.layer_window = layer_windows_;  // the engine decides whether the sliding layers get a pool of their own
    layout.num_state_layers = num_state_layers_;
    layout.state_floats = state_floats_;
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
    // Sliding blocks are released by the layout's windows: they must be the model's.
    TACHYON_CHECK(!kv.layout().splits_sliding() || kv.layout().layer_window == layer_windows_,
                  "the KV cache releases sliding-window blocks by windows other than this model's layers'");
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
    ctx.all_reduce = checkpoint_->tensor_parallel_ranks() > 1;
    // Decode rows read the weights' decode copies (--quantize-decode), prefill rows the weights.
    const kernels::DecodeRows kinds(backend_, batch.decode_rows);
    const int64_t rows = ctx.rows, hidden = spec_.hidden_size, num_layers = static_cast<int64_t>(layers_.size());
    float* x = ws_.get(Workspace::kResidual, rows * hidden);  // [rows, hidden] f32 residual stream
    float* h = ws_.get(Workspace::kNormed, rows * hidden);    // [rows, hidden] f32 normed input of a sub-block
    float* y = ws_.get(Workspace::kProj, rows * hidden);      // [rows, hidden] f32 sub-block output
    // Every row a logit row, in order (decode, verification): the last residual add and the final
    // norm are one op, with no gather (two launches fewer on a GPU's launch-bound small steps).
    float* normed = num_layers > 0 && batch.logits_on_every_row() ? ws_.get(Workspace::kLogitIn, rows * hidden)
                                                                    : nullptr;
    if (batch.device_tokens) backend_.embedding_device_ids(embed_, batch.device_tokens, rows, spec_.embed_scale, x);
    else backend_.embedding(embed_, batch.tokens.data(), rows, spec_.embed_scale, x);
    if (num_layers > 0) {
      const RmsNormSpec& n = spec_.layers[0].input_norm;
      backend_.rms_norm(x, layers_[0].input_norm(), rows, hidden, n.eps, n.weight_offset, h);
    }
    const RmsNormSpec& f = spec_.final_norm;
    // Named layers' outputs of the hidden rows (Batch::hidden_layers): [layer i][row][hidden].
    const int64_t num_hidden = static_cast<int64_t>(batch.hidden_rows.size());
    float* layer_hidden = nullptr;
    if (!batch.hidden_layers.empty() && num_hidden > 0) {
      for (int32_t l : batch.hidden_layers)
        TACHYON_CHECK(l >= 0 && l < num_layers, "hidden state of layer {} asked of a model with {} layers", l, num_layers);
      layer_hidden = ws_.get(Workspace::kLayerHidden, static_cast<int64_t>(batch.hidden_layers.size()) * num_hidden * hidden);
    }
    auto keep_layer_output = [&](int64_t l) {  // x holds layer l's output
      for (size_t i = 0; layer_hidden && i < batch.hidden_layers.size(); ++i)
        if (batch.hidden_layers[i] == l)
          backend_.gather_rows(x, batch.hidden_rows.data(), num_hidden, hidden,
                               layer_hidden + static_cast<int64_t>(i) * num_hidden * hidden);
    };
    // An attention probe that reads only the first layers (AttentionProbe::layers) stops after
    // them: it asks for no logits, and nothing after its last probed layer changes its result.
    AttentionProbe* probe = batch.attention_probe;
    const int64_t run_layers = probe && probe->layers > 0 ? std::min<int64_t>(probe->layers, num_layers) : num_layers;
    if (probe) probe->layers_run = static_cast<int32_t>(run_layers);
    TACHYON_CHECK(!probe || probe->first_layer < run_layers, "attention probe from layer {} of a model of {} layers",
                  probe ? probe->first_layer : 0, num_layers);
    for (int64_t l = 0; l < run_layers; ++l) {
      if (probe) probe->layer = static_cast<int32_t>(l);
      layers_[l].forward(ctx, ws_, kv, x, h, y);  // h = input_norm(x) on entry
      if (l + 1 < num_layers) {  // x += y; h = the next layer's input_norm(x)
        const RmsNormSpec& n = spec_.layers[l + 1].input_norm;
        backend_.add_rms_norm(x, y, layers_[l + 1].input_norm(), rows, hidden, n.eps, n.weight_offset, h);
      } else if (normed) {  // x += y; the LM head's input = final_norm(x), every row
        backend_.add_rms_norm(x, y, final_norm_, rows, hidden, f.eps, f.weight_offset, normed);
      } else {
        backend_.add(x, y, rows * hidden);
      }
      keep_layer_output(l);
    }
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
      const int32_t begin = ctx.seq_row_begin[s], end = ctx.seq_row_begin[s + 1];
      if (begin < end) kv.commit_state(batch.seqs[s], batch.positions[begin], batch.positions[end - 1] + 1);
    }
    return finish(batch, x, normed, layer_hidden);
  }

 private:
  // normed: final_norm(x) of every row when the last layer computed it (all rows are logit rows).
  // layer_hidden: the named layers' outputs of the hidden rows (Batch::hidden_layers), or null.
  StepOutput finish(const Batch& batch, const float* x, const float* normed, const float* layer_hidden) {
    const Weight& head = draft_head_.empty() ? lm_head_ : draft_head_;
    const int64_t vocab = head.rows;
    StepOutput out;
    out.vocab_size = vocab;
    out.hidden_size = spec_.hidden_size;
    const int64_t hidden = spec_.hidden_size;
    // Every op is issued before the first copy to the host (which waits for the device), so a
    // step that also returns hidden states waits once, not once more in the middle.
    const float* hid = nullptr;
    const int64_t num_layers_out = layer_hidden ? static_cast<int64_t>(batch.hidden_layers.size()) : 1;
    if (!batch.hidden_rows.empty()) {
      const int64_t n = static_cast<int64_t>(batch.hidden_rows.size());
      if (layer_hidden) {
        hid = layer_hidden;
      } else {
        float* gathered = ws_.get(Workspace::kHidden, n * hidden);
        backend_.gather_rows(x, batch.hidden_rows.data(), n, hidden, gathered);
        if (batch.hidden_after_final_norm)
          backend_.rms_norm(gathered, final_norm_, n, hidden, spec_.final_norm.eps, spec_.final_norm.weight_offset,
                            gathered);
        hid = gathered;
      }
      out.hidden.resize(static_cast<size_t>(n * hidden * num_layers_out));
      out.hidden_size = hidden * num_layers_out;
    }
    auto copy_hidden = [&] {
      if (!hid) return;
      if (num_layers_out == 1) {
        backend_.copy_to_host(out.hidden.data(), hid, out.hidden.size() * sizeof(float));
        return;
      }
      // [layer][row][hidden] on the device → [row][layer · hidden] (one copy, then a host shuffle)
      layer_rows_.resize(out.hidden.size());
      backend_.copy_to_host(layer_rows_.data(), hid, layer_rows_.size() * sizeof(float));
      const int64_t n = static_cast<int64_t>(batch.hidden_rows.size());
      for (int64_t i = 0; i < num_layers_out; ++i)
        for (int64_t r = 0; r < n; ++r)
          std::copy_n(layer_rows_.data() + (i * n + r) * hidden, hidden,
                      out.hidden.data() + (r * num_layers_out + i) * hidden);
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
        backend_.rms_norm(in, final_norm_, n, hidden, spec_.final_norm.eps, spec_.final_norm.weight_offset, in);
      }
      logit_decode_rows_.clear();  // the logit rows' kinds, in their order
      if (!batch.decode_rows.empty())
        for (int32_t r : batch.logit_rows) logit_decode_rows_.push_back(batch.decode_rows[static_cast<size_t>(r)]);
      const kernels::DecodeRows head_kinds(backend_, logit_decode_rows_);
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
  std::shared_ptr<WeightSource> checkpoint_;  // the mapping; the backend holds copies of the weights
  kernels::Backend& backend_;
  DecoderSpec spec_;
  Workspace ws_;
  Weight embed_, final_norm_, lm_head_;  // [vocab, hidden], [hidden], [vocab, hidden] stored
  Weight draft_head_;                    // [n, hidden] stored: set_draft_vocabulary's first n rows, or empty
  std::vector<float> layer_rows_;        // host staging of Batch::hidden_layers' outputs
  std::vector<uint8_t> logit_decode_rows_;  // the LM head's rows' Batch::decode_rows
  bool has_decode_weights_ = false;         // --quantize-decode: weights carry decode copies
  const bool draft_weights_ = backend_.loading_draft_weights();  // loaded as a drafter (kernels::DraftWeights)
  std::vector<DecoderLayer> layers_;
  int64_t num_kv_layers_ = 0, num_state_layers_ = 0;
  std::vector<int32_t> layer_windows_;  // per KV layer: its sliding window, 0 for full attention
  KvShape kv_shape_{config_.num_key_value_heads, config_.head_dim};  // every K/V layer's
  int64_t state_floats_ = 0;                                         // every state layer's, per slot
};

}  // namespace

std::unique_ptr<Model> make_decoder_model(const io::ModelConfig& config, std::shared_ptr<WeightSource> checkpoint,
                                          kernels::Backend& backend, DecoderSpec spec) {
  return std::make_unique<DecoderModel>(config, std::move(checkpoint), backend, std::move(spec));
}

}  // namespace tachyon::model
