#include "model/mtp_head.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "io/safetensors.h"
#include "model/sources/safetensors_source.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"
#include "model/weights.h"

namespace tachyon::model {

namespace {

// Where a layout keeps the head's tensors.
struct MtpNames {
  std::string norm_embedding, norm_hidden, fc;  // e-norm, h-norm, the [hidden, 2·hidden] projection
  std::string layer;                             // prefix of the decoder layer's tensors
  std::string final_norm;
  std::string embed, head;                       // the head's own copies; "" or absent: the target's
  std::string counted_prefix;                    // tensors counted as "the head's"
};

MtpNames qwen_next_names() {
  return {"mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.fc.weight", "mtp.layers.0.",
          "mtp.norm.weight", "", "", "mtp."};
}

// DeepSeek-V3: the head is layer `num_hidden_layers` of the checkpoint.
MtpNames deepseek_names(int64_t layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  return {p + "enorm.weight", p + "hnorm.weight", p + "eh_proj.weight", p, p + "shared_head.norm.weight",
          p + "embed_tokens.weight", p + "shared_head.head.weight", p};
}

// The MTP module's decoder layer, of the target's own kind: the mixer of its last layer with
// K/V (attention or MLA, not Gated DeltaNet) and the FFN of its last layer (MoE where the
// target ends in MoE), with that attention layer's norms.
LayerSpec mtp_layer_spec(const DecoderSpec& target, const std::string& path) {
  for (auto layer = target.layers.rbegin(); layer != target.layers.rend(); ++layer) {
    if (!layer->kv_shape()) continue;
    LayerSpec spec = *layer;
    spec.ffn = target.layers.back().ffn;
    return spec;
  }
  throw Error("{}: an MTP head needs a target with an attention layer", path);
}

// One MTP module: z = W_fc·[RMSNorm_e(E[x]); RMSNorm_h(h)], then one decoder layer (blocks/
// decoder_layer.h) of the target's kind, then the final norm and the LM head. Both layouts share
// this math; only names differ. The MTP norms follow the target's final norm (eps, (1 + w)).
class MtpLayerHead final : public MtpHead {
 public:
  MtpLayerHead(const std::string& dir, const io::ModelConfig& c, kernels::Backend& backend, const MtpNames& names)
      : config_(c), backend_(backend), ws_(backend), spec_(decoder_spec_of(c)) {
    const int64_t hidden = c.hidden_size, vocab = c.vocab_size;
    LayerSpec layer = mtp_layer_spec(spec_, c.path);
    kv_shape_ = *layer.kv_shape();
    checkpoint_ = std::make_shared<io::Checkpoint>(io::Checkpoint::open(dir));
    const io::Checkpoint& checkpoint = *checkpoint_;
    const SafetensorsSource source(checkpoint_);
    WeightBinder b(source, backend);
    const bool own_embed = !names.embed.empty() && checkpoint.has(names.embed);
    b.bind(&embed_, own_embed ? names.embed : "model.embed_tokens.weight", {vocab, hidden});
    const bool own_head = !names.head.empty() && checkpoint.has(names.head);
    if (own_head) b.bind(&lm_head_, names.head, {vocab, hidden}, WeightBinder::Use::Matmul);
    else if (!c.tie_word_embeddings) b.bind(&lm_head_, "lm_head.weight", {vocab, hidden}, WeightBinder::Use::Matmul);
    b.bind(&norm_embedding_, names.norm_embedding, {hidden});
    b.bind(&norm_hidden_, names.norm_hidden, {hidden});
    b.bind(&final_norm_, names.final_norm, {hidden});
    layer_.bind(b, names.layer, std::move(layer), hidden, /*cache_index=*/0);
    Weight fc_host;  // [hidden, 2·hidden] stored: validated with the rest, split below
    b.bind(&fc_host, names.fc, {hidden, 2 * hidden});
    b.load();
    if (!own_head && c.tie_word_embeddings) lm_head_ = embed_;
    head_source_ = own_head ? names.head : (c.tie_word_embeddings ? (own_embed ? names.embed : "model.embed_tokens.weight")
                                                                   : "lm_head.weight");
    // Split W_fc [hidden, 2·hidden] into its embedding and hidden halves (two matmuls add up
    // to the concatenated one).
    const auto& fc = checkpoint.get(names.fc);
    const size_t esize = dtype_size(fc.dtype);
    std::vector<uint8_t> halves[2];
    for (int half = 0; half < 2; ++half) {
      halves[half].resize(static_cast<size_t>(hidden * hidden) * esize);
      for (int64_t r = 0; r < hidden; ++r)
        std::memcpy(halves[half].data() + r * hidden * esize,
                    static_cast<const uint8_t*>(fc.data) + (r * 2 * hidden + half * hidden) * esize, hidden * esize);
    }
    auto upload = [&](const Weight& host) {
      return draft_weights_ ? backend.upload_draft_weight(host) : backend.upload_weight(host);
    };
    fc_embedding_ = upload(Weight{halves[0].data(), fc.dtype, hidden, hidden});
    fc_hidden_ = upload(Weight{halves[1].data(), fc.dtype, hidden, hidden});
    num_tensors_ = static_cast<int32_t>(std::count_if(
        checkpoint.tensors().begin(), checkpoint.tensors().end(),
        [&](const auto& t) { return t.first.rfind(names.counted_prefix, 0) == 0; }));
  }

  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    kv::KvLayout layout{1, kv_shape_.num_kv_heads, kv_shape_.head_dim, block_size, num_blocks};
    layout.shared_kv = kv_shape_.shared_kv;
    return layout;
  }
  int64_t hidden_size() const override { return config_.hidden_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int32_t num_tensors() const override { return num_tensors_; }

  void set_draft_vocabulary(int64_t n) override {
    const bool all = n <= 0 || n >= config_.vocab_size;
    if (all && !draft_weights_) {
      draft_head_ = {};
      return;
    }
    // Row-major [vocab, hidden]: ids [0, n) are its first n rows (in draft precision when
    // loaded as a drafter, also for all ids).
    const auto& t = checkpoint_->get(head_source_);
    const Weight host{t.data, t.dtype, all ? config_.vocab_size : n, config_.hidden_size};
    draft_head_ = draft_weights_ ? backend_.upload_draft_weight(host) : backend_.upload_weight(host);
  }

  Output forward(const Batch& batch, std::span<const float> hidden_in, kv::KvCache& kv, bool return_hidden) override {
    const int64_t rows = static_cast<int64_t>(batch.tokens.size());
    TACHYON_CHECK(static_cast<int64_t>(hidden_in.size()) == rows * config_.hidden_size,
                  "MTP needs one hidden state per row");
    return run(batch, hidden_in.data(), kv, return_hidden);
  }
  Output forward_recursive(const Batch& batch, kv::KvCache& kv) override {
    TACHYON_CHECK(static_cast<int64_t>(batch.tokens.size()) == last_logit_rows_ && last_logit_rows_ > 0,
                  "recursive MTP step: {} rows after a step with {} outputs", batch.tokens.size(), last_logit_rows_);
    return run(batch, nullptr, kv, false);
  }

 private:
  // hidden_in: host [rows, hidden], or null for the previous call's o_t (on the device).
  Output run(const Batch& batch, const float* hidden_in, kv::KvCache& kv, bool return_hidden) {
    StepContext ctx(backend_, batch, kv);
    const Weight& head = draft_head_.empty() ? lm_head_ : draft_head_;
    const int64_t rows = ctx.rows, hidden = config_.hidden_size, vocab = head.rows;
    const float eps = spec_.final_norm.eps, offset = spec_.final_norm.weight_offset;
    float* e = ws_.get(Workspace::kNormed, rows * hidden);   // [rows, hidden] f32 normed embeddings
    float* g = ws_.get(Workspace::kAct, rows * hidden);      // [rows, hidden] f32 normed target hidden
    float* x = ws_.get(Workspace::kResidual, rows * hidden); // [rows, hidden] f32 z_t, then the layer's stream
    float* y = ws_.get(Workspace::kProj, rows * hidden);     // [rows, hidden] f32
    if (batch.device_tokens) backend_.embedding_device_ids(embed_, batch.device_tokens, rows, spec_.embed_scale, e);
    else backend_.embedding(embed_, batch.tokens.data(), rows, spec_.embed_scale, e);
    backend_.rms_norm(e, norm_embedding_, rows, hidden, eps, offset, e);
    float* previous_o = recursion_.get(Workspace::kHidden, rows * hidden);  // no growth when recursing
    if (hidden_in) backend_.copy_to_device(g, hidden_in, static_cast<size_t>(rows * hidden) * sizeof(float));
    backend_.rms_norm(hidden_in ? g : previous_o, norm_hidden_, rows, hidden, eps, offset, g);
    backend_.matmul(e, rows, fc_embedding_, nullptr, x);
    backend_.matmul(g, rows, fc_hidden_, nullptr, y);
    // z = x + y; then one decoder layer over z, whose last residual add is fused below.
    float* h = ws_.get(Workspace::kHidden, rows * hidden);  // [rows, hidden] f32
    const RmsNormSpec& input_norm = layer_.spec().input_norm;
    backend_.add_rms_norm(x, y, layer_.input_norm(), rows, hidden, input_norm.eps, input_norm.weight_offset, h);
    layer_.forward(ctx, ws_, kv, x, h, y);
    Output out;
    const int64_t n = static_cast<int64_t>(batch.logit_rows.size());
    last_logit_rows_ = n;
    const bool all_rows = batch.logits_on_every_row();  // drafting levels
    if (!all_rows) backend_.add(x, y, rows * hidden);
    if (n == 0) return out;
    float* o = ws_.get(Workspace::kLogitIn, n * hidden);
    float* logits = ws_.get(Workspace::kLogits, n * vocab);
    // o_t stays on the device for the next recursive step. Everything is issued before the
    // first copy to the host, which waits for the device: one wait per level of drafting.
    float* o_keep = recursion_.get(Workspace::kHidden, n * hidden);
    if (all_rows) {  // the residual add and the final norm in one op
      backend_.add_rms_norm(x, y, final_norm_, rows, hidden, eps, offset, o);
      backend_.copy_on_device(o_keep, x, static_cast<size_t>(rows * hidden) * sizeof(float));
    } else {
      backend_.gather_rows(x, batch.logit_rows.data(), n, hidden, o_keep);
      backend_.rms_norm(o_keep, final_norm_, n, hidden, eps, offset, o);
    }
    backend_.matmul(o, n, head, nullptr, logits);
    // Top-two on the device: it stays there; so does o_t (o_keep).
    if (batch.outputs.tokens == StepOutputs::Tokens::TopTwoOnDevice) {
      TACHYON_CHECK(!return_hidden, "MTP: top_two keeps everything on the device");
      backend_.top_two(logits, n, vocab, batch.outputs.top_two);
      return out;
    }
    if (return_hidden) {
      out.hidden.resize(static_cast<size_t>(n * hidden));
      backend_.copy_to_host(out.hidden.data(), o_keep, out.hidden.size() * sizeof(float));
    }
    out.logits.resize(static_cast<size_t>(n * vocab));
    backend_.copy_to_host(out.logits.data(), logits, out.logits.size() * sizeof(float));
    return out;
  }

  io::ModelConfig config_;
  kernels::Backend& backend_;
  Workspace ws_;
  Workspace recursion_{backend_};  // kHidden: the last call's o_t rows (the recursive step's input)
  int64_t last_logit_rows_ = 0;
  DecoderSpec spec_;      // the target's
  KvShape kv_shape_;      // the layer's K/V
  Weight embed_, lm_head_;                           // [vocab, hidden] stored
  Weight norm_embedding_, norm_hidden_, final_norm_;  // [hidden] stored
  Weight fc_embedding_, fc_hidden_;                  // [hidden, hidden] stored (draft precision as a drafter)
  DecoderLayer layer_;
  int32_t num_tensors_ = 0;
  std::shared_ptr<io::Checkpoint> checkpoint_;  // keeps the LM head's rows mapped for set_draft_vocabulary
  std::string head_source_;
  Weight draft_head_;                            // [n, hidden] stored: the LM head's first n rows, or empty
  const bool draft_weights_ = backend_.loading_draft_weights();  // loaded as a drafter (kernels::DraftWeights)
};

}  // namespace

std::unique_ptr<MtpHead> MtpHead::load(const std::string& dir, const io::ModelConfig& config,
                                       kernels::Backend& backend) {
  const int64_t qwen_layers = io::json_int_or(config.raw, "mtp_num_hidden_layers", 0, config.path);
  const int64_t deepseek_layers = io::json_int_or(config.raw, "num_nextn_predict_layers", 0, config.path);
  if (qwen_layers > 0 && deepseek_layers > 0)
    throw Error("{}: both mtp_num_hidden_layers and num_nextn_predict_layers are set", config.path);
  const int64_t layers = std::max(qwen_layers, deepseek_layers);
  if (layers <= 0) return nullptr;
  if (layers != 1)
    throw Error("{}: {} = {} is not supported (1 is)", config.path,
                qwen_layers > 0 ? "mtp_num_hidden_layers" : "num_nextn_predict_layers", layers);
  const MtpNames names = qwen_layers > 0 ? qwen_next_names() : deepseek_names(config.num_hidden_layers);
  return std::make_unique<MtpLayerHead>(dir, config, backend, names);
}

}  // namespace tachyon::model
