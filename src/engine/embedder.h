// Embeddings from a decoder (OpenAI /v1/embeddings): the prompt is run through the model in
// chunks, the final hidden states (final norm applied, as transformers' last_hidden_state) are
// pooled as the checkpoint's sentence-transformers config says (last token, mean over tokens or
// the first token) and L2-normalized where it has a Normalize module. Each call has a KV cache
// of its own, sized to its input, freed after it.
//
// The model is not re-entrant, so calls run one at a time, and the server refuses generation on
// a model it serves for embeddings (the Engine built for it then never runs a step).
//
//   Embedder embedder(*model, {io::Pooling::LastToken, true}, /*max_context=*/8192);
//   std::vector<float> v = embedder.embed(ids);   // [hidden_size]
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "io/embedding_config.h"
#include "model/model.h"

namespace tachyon::engine {

class Embedder {
 public:
  Embedder(model::Model& model, io::EmbeddingConfig config, int32_t max_context, int32_t tokens_per_step = 512);

  // The embedding of one input. Throws tachyon::Error for an empty input, one longer than
  // max_context or an id outside the vocabulary.
  std::vector<float> embed(std::span<const int32_t> ids);

  int64_t dimensions() const { return model_.config().hidden_size; }
  int32_t max_context() const { return max_context_; }
  const io::EmbeddingConfig& config() const { return config_; }

 private:
  model::Model& model_;
  io::EmbeddingConfig config_;
  int32_t max_context_;
  int32_t tokens_per_step_;
  std::mutex mutex_;
};

// v / |v| (L2); a zero vector stays zero.
void l2_normalize(std::span<float> v);

}  // namespace tachyon::engine
