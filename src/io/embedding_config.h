// How an embedding checkpoint turns hidden states into one vector, as sentence-transformers
// describes it: modules.json lists the pipeline (Transformer, then a Pooling module with its own
// config.json, then optionally Normalize). Qwen/Qwen3-Embedding-*: pooling_mode_lasttoken, then
// Normalize; most BERT-style and many decoder embedders: pooling_mode_mean_tokens.
//
//   if (auto e = io::load_embedding_config("models/qwen3-embedding")) ...   // nullopt: a generator
#pragma once

#include <optional>
#include <string>

namespace tachyon::io {

enum class Pooling { LastToken, Mean, Cls };
const char* pooling_name(Pooling pooling);  // "last_token" | "mean" | "cls"

struct EmbeddingConfig {
  Pooling pooling = Pooling::LastToken;
  bool normalize = false;  // an L2 Normalize module follows the pooling
};

// nullopt when `dir` has no modules.json with a Pooling module (the model is no embedding
// model). Throws tachyon::Error for a pooling mode not supported (max, weighted mean, several
// modes at once), naming the file.
std::optional<EmbeddingConfig> load_embedding_config(const std::string& dir);

}  // namespace tachyon::io
