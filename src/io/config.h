// config.json and generation_config.json, normalised.
//
// Checkpoints on the Hub carry transformers-v4 keys (`rope_theta`, `rope_scaling`,
// `torch_dtype`); transformers v5 writes `rope_parameters` (possibly one entry per layer
// type) and `dtype`. Both spellings are read into the same `ModelConfig`. Keys keep their
// Hugging Face names. Architecture-specific keys are read by the arch file from `raw`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace tachyon::io {

// Rotary embedding parameters of one layer type (HF `rope_parameters` / `rope_scaling`).
struct RopeParams {
  std::string rope_type = "default";  // default | linear | dynamic | llama3 | yarn | longrope
  double rope_theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<double> attention_factor;  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn
  std::optional<double> mscale, mscale_all_dim;  // yarn (deepseek)
  bool truncate = true;                           // yarn
  double partial_rotary_factor = 1.0;
};

struct ModelConfig {
  std::string model_type;
  std::vector<std::string> architectures;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  std::optional<int64_t> sliding_window;  // active only on layers whose type is "sliding_attention"
  std::vector<std::string> layer_types;   // one per layer: full_attention | sliding_attention | ...
  std::map<std::string, RopeParams> rope;  // by layer type; key "" is the default for all
  std::string dtype;                       // bfloat16 | float16 | float32
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  Json raw;                                // the whole config.json, for arch-specific keys
  std::string path;                        // where it came from (error messages)

  const RopeParams& rope_for(const std::string& layer_type) const;
};

// The most decoder layers a config may declare (refused beyond, before anything is sized by it).
inline constexpr int64_t kMaxHiddenLayers = 4096;

// Reads and validates a config.json. Unknown `model_type`s are accepted here; the model
// registry rejects them with the list of supported ones.
ModelConfig parse_model_config(const Json& config, const std::string& path);
ModelConfig load_model_config(const std::string& model_dir);

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id, pad_token_id;
  bool do_sample = false;
  // The model's sampling defaults; the server applies those a request leaves out.
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
};
GenerationConfig load_generation_config(const std::string& model_dir);  // absent file: defaults

// Typed field readers that name the file and field on error.
int64_t json_int(const Json& obj, const std::string& key, const std::string& path);
int64_t json_int_or(const Json& obj, const std::string& key, int64_t fallback, const std::string& path);
double json_double_or(const Json& obj, const std::string& key, double fallback, const std::string& path);
bool json_bool_or(const Json& obj, const std::string& key, bool fallback, const std::string& path);

}  // namespace tachyon::io
