// A loaded model: `forward` over a ragged Batch, writing K/V into the KvCache and returning
// logits (and hidden states) for the requested rows. The model knows nothing of requests,
// sampling or scheduling.
//
//   auto backend = kernels::make_backend("cpu");
//   auto model = load_model("models/tachyon-demo", *backend);   // fail-closed
//   kv::KvCache kv(*backend, model->kv_layout(/*num_blocks=*/256));
//   auto seq = kv.add_sequence();
//   kv.reserve(seq, ids.size());
//   Batch batch; batch.add(seq, ids, 0, LogitRows::All);
//   StepOutput out = model->forward(batch, kv);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "io/config.h"
#include "kernels/backend.h"
#include "kernels/quantize.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/shard_plan.h"

namespace tachyon::model {

class Model {
 public:
  virtual ~Model() = default;
  // Preconditions: every sequence of the batch has KV reserved up to its largest position;
  // positions of a sequence's rows are consecutive and follow what the cache already holds.
  virtual StepOutput forward(const Batch& batch, kv::KvCache& kv) = 0;

  // For a model that drafts for another: logits (and argmax) over token ids [0, n) only; n <= 0
  // or >= vocab_size: all of them. Drafting needs the likely tokens, and byte-level BPE
  // vocabularies number tokens in merge order, so the first ids are the frequent ones; the LM
  // head is most of a small drafter's weights. Lossless: the target verifies every draft.
  virtual void set_draft_vocabulary(int64_t n) = 0;

  virtual const io::ModelConfig& config() const = 0;
  virtual kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size = 16) const = 0;
  virtual kernels::Backend& backend() = 0;
  // Whether decode rows (Batch::decode_rows) read other weights than prefill rows: loaded with
  // `--quantize-decode`, its weights carry decode copies (kernels::Weight::decode).
  virtual bool has_decode_weights() const { return false; }
};

// Loads config.json + safetensors from `dir`, picks the architecture by `architectures`
// (or `model_type`), checks every tensor, and returns the model on `backend`.
std::unique_ptr<Model> load_model(const std::string& dir, kernels::Backend& backend);
struct LoadOptions {
  // `--quantize`: every matmul weight (linear layers, an untied lm_head) stored as dense floats is
  // quantized at load (kernels/quantize.h); embeddings, norms and biases stay as they are.
  kernels::QuantizeMode quantize = kernels::QuantizeMode::None;
  // `--quantize-decode` (Int8 or Int4): those weights stay as stored for prefill rows, and each
  // gets the form `--quantize` would give it as a decode copy that decode and verification rows
  // read (Batch::decode_rows). A checkpoint with no such weight is refused, as is both options.
  kernels::QuantizeMode quantize_decode = kernels::QuantizeMode::None;
  // `--int8-activations` (kernels/quantize.h): Auto is on for a GGUF file, off elsewhere. Set on
  // the backend (Backend::set_int8_activations) while this model's weights are uploaded;
  // Backend::int8_activation_weights counts the weights it applied to.
  kernels::Int8ActivationMode int8_activations = kernels::Int8ActivationMode::Auto;
  // Called with each weight handed to the backend, in its host form (`tachyon info`); with each
  // decode copy, on_decode_weight.
  std::function<void(const std::string& name, const kernels::Weight& host)> on_weight, on_decode_weight;
  // Tensor parallelism: load rank `rank`'s shard under this plan (the backend joins the plan's
  // group itself); null: the whole model.
  const ShardPlan* shard = nullptr;
  int rank = 0;
};
std::unique_ptr<Model> load_model(const std::string& dir, kernels::Backend& backend, const LoadOptions& options);

}  // namespace tachyon::model
