// Native multi-token prediction heads in both layouts: Qwen3-Next / Qwen3.5 (`mtp.*` tensors,
// config `mtp_num_hidden_layers`) and DeepSeek-V3 (layer `num_hidden_layers` of the checkpoint:
// `model.layers.{L}.{enorm,hnorm,eh_proj,shared_head.norm,shared_head.head}` + that layer's
// attention/MLP, config `num_nextn_predict_layers`). The math, as the demo model's
// MODEL_CARD.md states it (DeepSeek: enorm, hnorm, eh_proj, shared_head.norm, shared_head.head):
//   e_t = RMSNorm_emb(E[x_{t+1}])          g_t = RMSNorm_hid(h_t)   (h_t: target's last layer, pre final norm)
//   z_t = W_fc · [e_t ; g_t]               (embedding half first; W_fc [hidden, 2·hidden], no bias)
//   o_t = DecoderLayer(z_0..z_t)[t]        (own KV cache, RoPE position t)
//   m_t = E · RMSNorm_mtp(o_t)             (predicts x_{t+2}; E shared with the target, tied)
// Recursive drafting feeds o_t (pre-norm) back as the next h. The decoder layer is of the
// target's own kind (attention or MLA, dense MLP or MoE).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/config.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/batch.h"

namespace tachyon::model {

class MtpHead {
 public:
  virtual ~MtpHead() = default;

  // The MTP head of the checkpoint in `dir`, or null when its config declares none. When the
  // config declares MTP layers, every head tensor is checked (fail closed): a missing or
  // misshapen one throws tachyon::Error naming it.
  static std::unique_ptr<MtpHead> load(const std::string& dir, const io::ModelConfig& config,
                                       kernels::Backend& backend);

  virtual kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size = 16) const = 0;
  virtual int64_t hidden_size() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t num_tensors() const = 0;  // verified at load

  // Drafting only needs the argmax, and mostly among frequent tokens: with n > 0, forward
  // computes logits for token ids [0, n) only (byte-level BPE vocabularies number tokens in
  // merge order, so the first ids are the most frequent), which cuts the head's largest matmul.
  // Lossless for speculation: the target verifies every draft. 0: the whole vocabulary.
  virtual void set_draft_vocabulary(int64_t n) = 0;

  struct Output {
    std::vector<float> logits;  // [logit rows, vocab] (or [logit rows, n], set_draft_vocabulary)
    std::vector<float> hidden;  // [logit rows, hidden] o_t before mtp.norm (for recursion)
  };
  // Rows of `batch`: tokens x_{t+1} at positions t; `hidden` holds h_t per row [rows, hidden]
  // (host). Returns logits and (when `return_hidden`) o_t for batch.logit_rows; o_t also stays
  // on the device for forward_recursive. With StepOutputs::top_two_on_device (and
  // Batch::device_tokens) the levels stay on the device: the output is empty and nothing waits
  // (return_hidden must be false).
  virtual Output forward(const Batch& batch, std::span<const float> hidden, kv::KvCache& kv,
                         bool return_hidden = true) = 0;
  // The recursive drafting step: forward with each row's h_t = the previous call's o_t of the
  // same logit row, read where it stayed on the device (no round trip through the host, which
  // on a GPU costs two waits per level). `batch` has as many rows as the previous call had
  // logit rows. Output::hidden stays empty.
  virtual Output forward_recursive(const Batch& batch, kv::KvCache& kv) = 0;
};

}  // namespace tachyon::model
