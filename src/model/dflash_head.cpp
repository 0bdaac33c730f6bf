#include "model/dflash_head.h"

#include <algorithm>

#include "base/error.h"
#include "io/safetensors.h"
#include "model/batch.h"
#include "model/blocks/attention.h"
#include "model/blocks/mlp.h"
#include "model/blocks/step_context.h"
#include "model/rope.h"
#include "model/sources/safetensors_source.h"
#include "model/weights.h"

namespace tachyon::model {

namespace {

struct DraftLayer {
  Weight input_norm, post_norm;  // [hidden] stored
  AttentionWeights attention;
  AttentionOptions options;
  GatedMlpWeights mlp;
};

class DFlashLayerHead final : public DFlashHead {
 public:
  DFlashLayerHead(const std::string& drafter_dir, const std::string& target_dir, const io::ModelConfig& target,
                  kernels::Backend& backend)
      : backend_(backend), ws_(backend), config_(io::load_model_config(drafter_dir)) {
    const io::ModelConfig& c = config_;
    const std::string& path = c.path;
    hidden_ = c.hidden_size;
    vocab_ = c.vocab_size;
    if (hidden_ != target.hidden_size)
      throw Error("{}: hidden_size {} differs from the target's {}: this DFlash drafter belongs to another model", path,
                  hidden_, target.hidden_size);
    if (vocab_ != target.vocab_size)
      throw Error("{}: vocab_size {} differs from the target's {}: the tokenizers are not compatible", path, vocab_,
                  target.vocab_size);
    block_size_ = static_cast<int32_t>(io::json_int(c.raw, "block_size", path));
    if (block_size_ < 2 || block_size_ > 64) throw Error("{}: block_size {} is not in [2, 64]", path, block_size_);
    if (!c.raw.contains("dflash_config") || !c.raw["dflash_config"].is_object())
      throw Error("{}: no \"dflash_config\" object: not a DFlash drafter", path);
    const Json& dc = c.raw["dflash_config"];
    mask_token_ = static_cast<int32_t>(io::json_int(dc, "mask_token_id", path));
    if (mask_token_ < 0 || mask_token_ >= vocab_)
      throw Error("{}: mask_token_id {} is outside the vocabulary [0, {})", path, mask_token_, vocab_);
    if (!dc.contains("target_layer_ids") || !dc["target_layer_ids"].is_array() || dc["target_layer_ids"].empty())
      throw Error("{}: dflash_config.target_layer_ids must be a non-empty list", path);
    const int64_t target_layers = target.num_hidden_layers;
    const int64_t declared = io::json_int_or(c.raw, "num_target_layers", target_layers, path);
    if (declared != target_layers)
      throw Error("{}: num_target_layers {} but the target has {} layers: this DFlash drafter belongs to another model",
                  path, declared, target_layers);
    for (const auto& id : dc["target_layer_ids"]) {
      if (!id.is_number_integer()) throw Error("{}: target_layer_ids must be integers", path);
      const int64_t l = id.get<int64_t>();
      // The last layer's output is where transformers' hidden_states ends with the final norm
      // applied; no published drafter reads it, and it would be ambiguous: refused.
      if (l < 0 || l >= target_layers - 1)
        throw Error("{}: target layer id {} is out of range: the target has {} layers (ids 0..{})", path, l,
                    target_layers, target_layers - 2);
      layer_ids_.push_back(static_cast<int32_t>(l));
    }
    const int64_t n = static_cast<int64_t>(layer_ids_.size());
    if (c.num_hidden_layers < 1) throw Error("{}: num_hidden_layers must be at least 1", path);
    if (c.attention_bias) throw Error("{}: attention_bias draft layers are not supported", path);

    // The drafter's own tensors.
    checkpoint_ = std::make_shared<io::Checkpoint>(io::Checkpoint::open(drafter_dir));
    const SafetensorsSource source(checkpoint_);
    WeightBinder b(source, backend);
    b.bind(&fc_, "fc.weight", {hidden_, n * hidden_}, WeightBinder::Use::Matmul);
    b.bind(&hidden_norm_, "hidden_norm.weight", {hidden_});
    b.bind(&final_norm_, "norm.weight", {hidden_});
    layers_.resize(static_cast<size_t>(c.num_hidden_layers));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      DraftLayer& layer = layers_[static_cast<size_t>(i)];
      const std::string p = "layers." + std::to_string(i) + ".";
      layer.options = attention_options(c, i, RopeLayout::RotateHalf);
      layer.options.qk_norm = true;  // Qwen3 layers
      if (layer.options.sliding_window) throw Error("{}: sliding-window draft layers are not supported", path);
      b.bind(&layer.input_norm, p + "input_layernorm.weight", {hidden_});
      b.bind(&layer.post_norm, p + "post_attention_layernorm.weight", {hidden_});
      bind_attention(b, layer.attention, p + "self_attn.", layer.options);
      bind_gated_mlp(b, layer.mlp, p + "mlp.", hidden_, c.intermediate_size);
    }
    b.load();
    num_tensors_ = static_cast<int32_t>(checkpoint_->tensors().size());
    const std::vector<std::string> expected = dflash_tensor_names(c.num_hidden_layers);
    for (const auto& [name, tensor] : checkpoint_->tensors())
      if (!std::binary_search(expected.begin(), expected.end(), name))
        throw Error("{}: tensor '{}' is not part of a DFlash drafter of {} layers", path, name, c.num_hidden_layers);
    act_ = hidden_activation(c, "silu");

    // The target's embedding and LM head (shared).
    target_checkpoint_ = std::make_shared<io::Checkpoint>(io::Checkpoint::open(target_dir));
    const SafetensorsSource target_source(target_checkpoint_);
    WeightBinder t(target_source, backend);
    t.bind(&embed_, "model.embed_tokens.weight", {vocab_, hidden_});
    head_name_ = target.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    if (!target.tie_word_embeddings) t.bind(&lm_head_, head_name_, {vocab_, hidden_}, WeightBinder::Use::Matmul);
    t.load();
    if (target.tie_word_embeddings) lm_head_ = embed_;
    eps_ = static_cast<float>(c.rms_norm_eps);
  }

  int32_t block_size() const override { return block_size_; }
  int32_t mask_token() const override { return mask_token_; }
  const std::vector<int32_t>& target_layer_ids() const override { return layer_ids_; }
  int64_t feature_size() const override { return static_cast<int64_t>(layer_ids_.size()) * hidden_; }
  int64_t vocab_size() const override { return vocab_; }
  int32_t num_tensors() const override { return num_tensors_; }
  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    const AttentionOptions& o = layers_.front().options;
    return kv::KvLayout{static_cast<int64_t>(layers_.size()), o.num_kv_heads, o.head_dim, block_size, num_blocks};
  }

  void set_draft_vocabulary(int64_t n) override {
    const bool all = n <= 0 || n >= vocab_;
    if (all && !draft_weights_) {
      draft_head_ = {};
      return;
    }
    // Row-major [vocab, hidden]: ids [0, n) are the first n rows (in draft precision when
    // loaded as a drafter).
    const auto& t = target_checkpoint_->get(head_name_);
    const Weight host{t.data, t.dtype, all ? vocab_ : n, hidden_};
    draft_head_ = draft_weights_ ? backend_.upload_draft_weight(host) : backend_.upload_weight(host);
  }
  int64_t draft_vocabulary() const override { return draft_head_.empty() ? vocab_ : draft_head_.rows; }

  std::vector<float> draft_block(kv::KvCache& kv, kv::SeqId seq, std::span<const float> features, int32_t first,
                                 int32_t num_context, int32_t anchor_token) override {
    const int64_t F = feature_size(), B = block_size_, C = num_context, rows = C + B;
    TACHYON_CHECK(static_cast<int64_t>(features.size()) == C * F, "DFlash: {} context floats for {} rows of {}",
                  features.size(), C, F);
    const int32_t anchor = first + num_context;
    TACHYON_CHECK(kv.num_tokens(seq) >= first, "DFlash: context rows from {} but the cache holds {}", first,
                  kv.num_tokens(seq));
    kv.truncate(seq, first);
    if (!kv.reserve(seq, anchor + static_cast<int32_t>(B))) return {};
    // Rows: the context rows at positions first.., then the block at anchor.. (consecutive).
    std::vector<int32_t> ids(static_cast<size_t>(rows), mask_token_);
    ids[static_cast<size_t>(C)] = anchor_token;
    Batch batch;
    batch.add(seq, ids, first, LogitRows::None);
    StepContext ctx(backend_, batch, kv);
    // The block's queries see every cached position up to the block's last: no causal mask
    // inside the block (its K/V are written first, then attended).
    attend_positions_.assign(static_cast<size_t>(B), anchor + static_cast<int32_t>(B) - 1);
    attend_seq_.assign(static_cast<size_t>(B), 0);
    kernels::AttentionMeta attend = ctx.meta;
    attend.positions = attend_positions_.data();
    attend.row_seq = attend_seq_.data();

    const AttentionOptions& o0 = layers_.front().options;
    const int64_t q_dim = o0.num_heads * o0.head_dim, kv_dim = o0.num_kv_heads * o0.head_dim;
    float* x = ws_.get(Workspace::kNormed, rows * hidden_);     // [rows, hidden]: context rows c, then normed block
    float* h = ws_.get(Workspace::kResidual, B * hidden_);      // [B, hidden] the block's residual stream
    float* y = ws_.get(Workspace::kProj, B * hidden_);          // [B, hidden]
    float* hn = ws_.get(Workspace::kAct, B * hidden_);          // [B, hidden]
    float* qkv = ws_.get(Workspace::kScratch0, rows * (q_dim + 2 * kv_dim));
    float* q = ws_.get(Workspace::kQ, rows * q_dim);
    float* k = ws_.get(Workspace::kK, rows * kv_dim);
    float* v = ws_.get(Workspace::kV, rows * kv_dim);
    float* attn = ws_.get(Workspace::kAttn, B * q_dim);
    float* block_x = x + C * hidden_;
    if (C > 0) {  // c = hidden_norm(fc · features)
      float* feat = ws_.get(Workspace::kScratch1, C * F);
      backend_.copy_to_device(feat, features.data(), features.size() * sizeof(float));
      backend_.matmul(feat, C, fc_, nullptr, x);
      backend_.rms_norm(x, hidden_norm_, C, hidden_, eps_, 0.f, x);
    }
    backend_.embedding(embed_, ids.data() + C, B, 1.f, h);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const DraftLayer& L = layers_[i];
      const AttentionOptions& o = L.options;
      backend_.rms_norm(h, L.input_norm, B, hidden_, eps_, 0.f, block_x);
      backend_.matmul(x, rows, L.attention.qkv, &L.attention.qkv_bias, qkv);
      kernels::QkvPrologue prologue;
      prologue.num_heads = o.num_heads;
      prologue.q_norm = &L.attention.q_norm;
      prologue.k_norm = &L.attention.k_norm;
      prologue.eps = o.norm_eps;
      prologue.weight_offset = o.norm_weight_offset;
      prologue.rope = &o.rope;
      prologue.positions = batch.positions.data();
      const kernels::PagedKv paged = kv.layer(static_cast<int64_t>(i));
      backend_.qkv_norm_rope_write_kv(qkv, rows, prologue, paged, ctx.meta, q, k, v);
      kernels::AttentionParams params;
      params.num_heads = o.num_heads;
      params.scale = o.scale;
      backend_.attention(q + C * q_dim, B, paged, attend, params, attn);
      backend_.matmul(attn, B, L.attention.o, &L.attention.o_bias, y);
      backend_.add_rms_norm(h, y, L.post_norm, B, hidden_, eps_, 0.f, hn);
      float* gate_up = ws_.get(Workspace::kGateUp, B * 2 * L.mlp.down.cols);
      float* mid = ws_.get(Workspace::kScratch2, B * L.mlp.down.cols);
      backend_.gated_mlp(hn, B, L.mlp.gate_up, L.mlp.down, act_, gate_up, mid, y);
      backend_.add(h, y, B * hidden_);
    }
    // Rows 1..B-1 (the mask rows) predict their own positions.
    const Weight& head = draft_head_.empty() ? lm_head_ : draft_head_;
    float* normed = ws_.get(Workspace::kLogitIn, (B - 1) * hidden_);
    backend_.rms_norm(h + hidden_, final_norm_, B - 1, hidden_, eps_, 0.f, normed);
    float* logits = ws_.get(Workspace::kLogits, (B - 1) * head.rows);
    backend_.matmul(normed, B - 1, head, nullptr, logits);
    std::vector<float> out(static_cast<size_t>((B - 1) * head.rows));
    backend_.copy_to_host(out.data(), logits, out.size() * sizeof(float));
    kv.truncate(seq, anchor);  // the block's K/V were built from drafts: not kept
    return out;
  }

 private:
  kernels::Backend& backend_;
  Workspace ws_;
  io::ModelConfig config_;
  int64_t hidden_ = 0, vocab_ = 0;
  int32_t block_size_ = 0, mask_token_ = 0, num_tensors_ = 0;
  float eps_ = 1e-6f;
  kernels::Activation act_ = kernels::Activation::SiLU;
  std::vector<int32_t> layer_ids_;
  std::vector<DraftLayer> layers_;
  Weight fc_, hidden_norm_, final_norm_;  // [hidden, n·hidden], [hidden], [hidden] stored
  Weight embed_, lm_head_, draft_head_;   // the target's [vocab, hidden]; draft_head_: its first rows, or empty
  std::string head_name_;
  std::shared_ptr<io::Checkpoint> checkpoint_, target_checkpoint_;
  std::vector<int32_t> attend_positions_, attend_seq_;
  const bool draft_weights_ = backend_.loading_draft_weights();
};

}  // namespace

std::vector<std::string> dflash_tensor_names(int64_t num_layers) {
  std::vector<std::string> names = {"fc.weight", "hidden_norm.weight", "norm.weight"};
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* t : {"input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                          "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      names.push_back(p + t + ".weight");
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<DFlashHead> DFlashHead::load(const std::string& drafter_dir, const std::string& target_dir,
                                             const io::ModelConfig& target, kernels::Backend& backend) {
  return std::make_unique<DFlashLayerHead>(drafter_dir, target_dir, target, backend);
}

}  // namespace tachyon::model
