// A DFlash block drafter (arXiv 2602.06036) in the published z-lab layout: it predicts a whole
// block of tokens in one forward, conditioned on hidden states the target computed anyway.
//
// Checkpoint (a folder: config.json + model.safetensors, names without a "model." prefix):
//   config: a Qwen3 config (hidden_size = the target's, num_hidden_layers = draft layers) plus
//     "block_size": B, "dflash_config": {"mask_token_id": M, "target_layer_ids": [l_0, ...]},
//     optionally "num_target_layers" (checked against the target).
//   fc.weight [hidden, n·hidden], hidden_norm.weight [hidden], norm.weight [hidden],
//   layers.{i}.{input_layernorm,post_attention_layernorm}.weight, layers.{i}.self_attn.
//   {q,k,v,o}_proj.weight, {q,k}_norm.weight, layers.{i}.mlp.{gate,up,down}_proj.weight.
//   No embedding and no LM head: the target's are shared.
//
// Math (n = |target_layer_ids|; F_t = concat of the target's layer-l outputs at position t, the
// residual stream after decoder layer l, before any final norm, in target_layer_ids order;
// this is transformers' hidden_states[l + 1]):
//   c_t = RMSNorm_hidden_norm(W_fc · F_t)                   the context row of position t
// A draft for committed tokens x_0..x_n (x_n: the last, whose hidden state is not known yet)
// is the block [x_n, M, ..., M] (B rows) at positions n..n+B-1, embedded with the target's
// table. Each draft layer i:
//   a = RMSNorm_input(h)                                     (block rows only)
//   q = RoPE(q_norm(W_q a))                                  queries from the block only
//   K/V = [k_norm(W_k c_0..c_{n-1}) ; k_norm(W_k a)], [W_v c ; W_v a], RoPE at their positions
//                                                            ("KV injection": the context enters
//                                                            every layer through its K/V only)
//   h += W_o · softmax(q·Kᵀ/√d)·V                            no mask: every block row sees the
//                                                            whole context and the whole block
//   h += MLP(RMSNorm_post(h))
// logits_j = E · RMSNorm_norm(h_j) for j = 1..B-1 predict x_{n+j} (each mask row predicts its own
// position). The context K/V are cached per request (they do not depend on the block); the
// block's K/V are dropped after the draft.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/config.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace tachyon::model {

// The tensor names of a DFlash checkpoint with `num_layers` draft layers (no biases), sorted: what
// load() requires, no more and no less.
std::vector<std::string> dflash_tensor_names(int64_t num_layers);

class DFlashHead {
 public:
  virtual ~DFlashHead() = default;

  // Loads `drafter_dir` for the target of `target_dir` (whose checkpoint supplies the embedding
  // and LM head). Fail closed: a hidden size or vocabulary that differs from the target's, a
  // target layer id out of range, a num_target_layers that is not the target's, a missing or
  // misshapen tensor: tachyon::Error naming it.
  static std::unique_ptr<DFlashHead> load(const std::string& drafter_dir, const std::string& target_dir,
                                          const io::ModelConfig& target, kernels::Backend& backend);

  virtual int32_t block_size() const = 0;
  virtual int32_t mask_token() const = 0;
  virtual const std::vector<int32_t>& target_layer_ids() const = 0;
  virtual int64_t feature_size() const = 0;  // n·hidden: the width of one context row
  virtual int64_t vocab_size() const = 0;
  virtual int32_t num_tensors() const = 0;   // verified at load
  virtual kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size = 16) const = 0;
  // Logits over token ids [0, n) only (see MtpHead::set_draft_vocabulary); 0: all of them.
  virtual void set_draft_vocabulary(int64_t n) = 0;
  virtual int64_t draft_vocabulary() const = 0;

  // Appends the context rows `features` ([num_context, feature_size], host) of positions
  // [first, first + num_context) to `seq`'s cache, then drafts the block anchored at
  // `anchor_token` at position first + num_context (every earlier position must be in the
  // cache). Returns the logits of block rows 1..B-1 ([B-1, draft_vocabulary()], host), or
  // nothing when the cache has no room. The cache keeps the context rows only.
  virtual std::vector<float> draft_block(kv::KvCache& kv, kv::SeqId seq, std::span<const float> features,
                                         int32_t first, int32_t num_context, int32_t anchor_token) = 0;
};

}  // namespace tachyon::model
