#include "model/mtp_head.h"

#include <cstring>

#include "base/error.h"
#include "io/safetensors.h"
#include "model/blocks/attention.h"
#include "model/blocks/decoder.h"
#include "model/blocks/mlp.h"
#include "model/weights.h"

namespace tachyon::model {

namespace {

class QwenNextMtp final : public MtpHead {
 public:
  QwenNextMtp(const std::string& dir, const io::ModelConfig& c, kernels::Backend& backend)
      : config_(c), backend_(backend), ws_(backend), attention_(llama_attention_options(c, 0)) {
    const int64_t hidden = c.hidden_size, vocab = c.vocab_size;
    const auto checkpoint = io::Checkpoint::open(dir);
    WeightBinder b(checkpoint, backend);
    b.bind(&embed_, "model.embed_tokens.weight", {vocab, hidden});
    if (!c.tie_word_embeddings) b.bind(&lm_head_, "lm_head.weight", {vocab, hidden});
    b.bind(&norm_embedding_, "mtp.pre_fc_norm_embedding.weight", {hidden});
    b.bind(&norm_hidden_, "mtp.pre_fc_norm_hidden.weight", {hidden});
    b.bind(&final_norm_, "mtp.norm.weight", {hidden});
    const std::string p = "mtp.layers.0.";
    b.bind(&input_norm_, p + "input_layernorm.weight", {hidden});
    b.bind(&post_attention_norm_, p + "post_attention_layernorm.weight", {hidden});
    bind_attention(b, attn_, p + "self_attn.", attention_, c.attention_bias, c.attention_bias, /*qk_norm=*/true);
    bind_gated_mlp(b, mlp_, p + "mlp.", hidden, c.intermediate_size);
    Weight fc_host;  // validated with the rest, split below
    b.bind(&fc_host, "mtp.fc.weight", {hidden, 2 * hidden});
    b.load();
    if (c.tie_word_embeddings) lm_head_ = embed_;
    // Split W_fc [hidden, 2·hidden] into its embedding and hidden halves (two matmuls add up
    // to the concatenated one).
    const auto& fc = checkpoint.get("mtp.fc.weight");
    const size_t esize = dtype_size(fc.dtype);
    std::vector<uint8_t> halves[2];
    for (int half = 0; half < 2; ++half) {
      halves[half].resize(static_cast<size_t>(hidden * hidden) * esize);
      for (int64_t r = 0; r < hidden; ++r)
        std::memcpy(halves[half].data() + r * hidden * esize,
                    static_cast<const uint8_t*>(fc.data) + (r * 2 * hidden + half * hidden) * esize, hidden * esize);
    }
    fc_embedding_ = backend.upload_weight(Weight{halves[0].data(), fc.dtype, hidden, hidden});
    fc_hidden_ = backend.upload_weight(Weight{halves[1].data(), fc.dtype, hidden, hidden});
    num_tensors_ = static_cast<int32_t>(std::count_if(checkpoint.tensors().begin(), checkpoint.tensors().end(),
                                                      [](const auto& t) { return t.first.rfind("mtp.", 0) == 0; }));
  }

  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    return {1, config_.num_key_value_heads, config_.head_dim, block_size, num_blocks};
  }
  int64_t hidden_size() const override { return config_.hidden_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int32_t num_tensors() const override { return num_tensors_; }

  Output forward(const Batch& batch, std::span<const float> hidden_in, kv::KvCache& kv) override {
    StepContext ctx(backend_, batch, kv);
    const int64_t rows = ctx.rows, hidden = config_.hidden_size, vocab = config_.vocab_size;
    TACHYON_CHECK(static_cast<int64_t>(hidden_in.size()) == rows * hidden, "MTP needs one hidden state per row");
    const float eps = static_cast<float>(config_.rms_norm_eps);
    float* e = ws_.get(Workspace::kNormed, rows * hidden);   // [rows, hidden] normed embeddings
    float* g = ws_.get(Workspace::kAct, rows * hidden);      // [rows, hidden] normed target hidden
    float* x = ws_.get(Workspace::kResidual, rows * hidden); // [rows, hidden] z_t, then the layer's stream
    float* y = ws_.get(Workspace::kProj, rows * hidden);     // [rows, hidden]
    backend_.embedding(embed_, batch.tokens.data(), rows, 1.f, e);
    backend_.rms_norm(e, norm_embedding_, rows, hidden, eps, 0.f, e);
    backend_.copy_to_device(g, hidden_in.data(), hidden_in.size() * sizeof(float));
    backend_.rms_norm(g, norm_hidden_, rows, hidden, eps, 0.f, g);
    backend_.matmul(e, rows, fc_embedding_, nullptr, x);
    backend_.matmul(g, rows, fc_hidden_, nullptr, y);
    backend_.add(x, y, rows * hidden);
    // One Qwen3 decoder layer over z.
    float* h = ws_.get(Workspace::kHidden, rows * hidden);
    backend_.rms_norm(x, input_norm_, rows, hidden, eps, 0.f, h);
    attention_forward(ctx, ws_, attn_, attention_, kv.layer(0), h, y);
    backend_.add(x, y, rows * hidden);
    backend_.rms_norm(x, post_attention_norm_, rows, hidden, eps, 0.f, h);
    gated_mlp_forward(ctx, ws_, mlp_, kernels::Activation::SiLU, h, y);
    backend_.add(x, y, rows * hidden);
    Output out;
    const int64_t n = static_cast<int64_t>(batch.logit_rows.size());
    if (n == 0) return out;
    float* o = ws_.get(Workspace::kLogitIn, n * hidden);
    float* logits = ws_.get(Workspace::kLogits, n * vocab);
    backend_.gather_rows(x, batch.logit_rows.data(), n, hidden, o);
    out.hidden.resize(static_cast<size_t>(n * hidden));
    backend_.copy_to_host(out.hidden.data(), o, out.hidden.size() * sizeof(float));
    backend_.rms_norm(o, final_norm_, n, hidden, eps, 0.f, o);
    backend_.matmul(o, n, lm_head_, nullptr, logits);
    out.logits.resize(static_cast<size_t>(n * vocab));
    backend_.copy_to_host(out.logits.data(), logits, out.logits.size() * sizeof(float));
    return out;
  }

 private:
  io::ModelConfig config_;
  kernels::Backend& backend_;
  Workspace ws_;
  AttentionOptions attention_;
  Weight embed_, lm_head_, norm_embedding_, norm_hidden_, final_norm_, fc_embedding_, fc_hidden_;
  Weight input_norm_, post_attention_norm_;
  AttentionWeights attn_;
  GatedMlpWeights mlp_;
  int32_t num_tensors_ = 0;
};

}  // namespace

std::unique_ptr<MtpHead> MtpHead::load(const std::string& dir, const io::ModelConfig& config,
                                       kernels::Backend& backend) {
  const int64_t layers = io::json_int_or(config.raw, "mtp_num_hidden_layers", 0, config.path);
  if (layers <= 0) return nullptr;
  if (layers != 1) throw Error("{}: mtp_num_hidden_layers = {} is not supported (1 is)", config.path, layers);
  return std::make_unique<QwenNextMtp>(dir, config, backend);
}

}  // namespace tachyon::model
