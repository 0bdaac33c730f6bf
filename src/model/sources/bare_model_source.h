// A base-model checkpoint saved without its LM-head wrapper (transformers' Qwen3Model, LlamaModel,
// ...: Qwen/Qwen3-Embedding-* and most sentence-transformers checkpoints) names its tensors
// "embed_tokens.weight", "layers.0. ...", "norm.weight"; the decoder binds the wrapper's names
// ("model.embed_tokens.weight"). This source hands the bare tensors out under the wrapper's
// names. wrap_bare_model() applies it only where the checkpoint is bare.
#pragma once

#include <memory>

#include "model/sources/weight_source.h"

namespace tachyon::model {

// `inner` itself unless it has "embed_tokens.weight" and no "model.embed_tokens.weight".
std::shared_ptr<WeightSource> wrap_bare_model(std::shared_ptr<WeightSource> inner);

}  // namespace tachyon::model
