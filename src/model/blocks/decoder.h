// The pre-norm decoder-only transformer shared by the llama family (Llama, Qwen2, Qwen3,
// Mistral) and its relatives (Gemma 3, Qwen3-MoE, gpt-oss, DeepSeek-V3, Qwen3-Next):
//   x = embed_tokens(ids) · embed_scale
//   per layer: the layer its architecture file describes (blocks/decoder_layer.h)
//   logits = lm_head(final_norm(x))
// An architecture file fills a DecoderSpec from its config, one LayerSpec per layer; this
// block binds every tensor it names (fail closed: all are checked before anything runs) and
// runs it. Tensors: "model.embed_tokens.weight" [vocab, hidden], "model.layers.{l}." (each
// layer's), "model.{final_norm.name}.weight" [hidden], "lm_head.weight" [vocab, hidden] unless
// tied; all stored dtype.
#pragma once

#include <memory>
#include <vector>

#include "model/sources/weight_source.h"
#include "model/blocks/decoder_layer.h"
#include "model/model.h"

namespace tachyon::model {

struct DecoderSpec {
  int64_t vocab_size = 0, hidden_size = 0;
  float embed_scale = 1.f;           // Gemma: sqrt(hidden_size)
  std::vector<LayerSpec> layers;     // layer l: "model.layers.{l}."
  RmsNormSpec final_norm;            // "model.{name}.weight"
  bool tie_word_embeddings = false;  // the LM head is embed_tokens
};

// The fields every decoder config shares: vocab_size, hidden_size, tie_word_embeddings, and
// the final norm "norm" as x / rms(x) · w with rms_norm_eps. No layers.
DecoderSpec decoder_spec(const io::ModelConfig& config);

std::unique_ptr<Model> make_decoder_model(const io::ModelConfig& config, std::shared_ptr<WeightSource> checkpoint,
                                          kernels::Backend& backend, DecoderSpec spec);

}  // namespace tachyon::model
