// Terminal generation for `tachyon run`: one request at a time through the same engine the
// server uses (so speculation, prefix caching and the exact sampling path are the same),
// with text streamed through the tokenizer's streaming decoder.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/spec_options.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace tachyon::tokenizer {
class Tokenizer;
}

namespace tachyon::cli {

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string stop_reason;  // "stop" | "length" | ...
  engine::SpecUsage spec;
};

class Generator {
 public:
  Generator(model::Model& model, const std::string& model_dir, const engine::EngineConfig& config);
  ~Generator();

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  // Throws when there is no tokenizer. A rendered chat template already holds its special
  // tokens: encode it with add_special_tokens false.
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) const;
  int32_t max_context() const { return engine_->max_context(); }

  // on_token(id, text): text is the newly completed UTF-8 text (empty without a tokenizer).
  // `stop` (polled every 50 ms) cancels the request: the result then has stop_reason "cancelled".
  GenerateResult generate(const std::vector<int32_t>& prompt, const sampling::SamplingParams& params, int max_tokens,
                          const std::function<void(int32_t, const std::string&)>& on_token,
                          const std::function<bool()>& stop = nullptr);

 private:
  std::string model_dir_;
  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
};

// The flags `run` and `chat` share: sampling (--temperature, greedy unless given, --top-p --top-k
// --min-p --repetition-penalty --seed), --device, and speculation (SpecOptions).
struct GenerateOptions {
  sampling::SamplingParams sampling{.temperature = 0.f};
  uint64_t seed = 0;
  std::string device;
  std::string quantize;  // --quantize
  std::string quantize_decode;  // --quantize-decode
  std::string int8_activations;  // --int8-activations
  int tensor_parallel = 1;  // --tensor-parallel
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype (model/kv_format_choice.h)
  SpecOptions spec;
  // The KV pool (cli/kv_options.h); left out: sized from the machine for one sequence.
  int32_t kv_blocks = 0;
  int64_t kv_cache_memory = 0;
  double gpu_memory_utilization = 0.90;
  void add_to(CLI::App& command);
};

// What a terminal command generates with, loaded from those flags: the backend, the model, its
// drafter and a one-request engine. Members go in reverse order, so the engine stops first.
struct TerminalModel {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<model::Model> model;
  SpecDrafters drafters;
  std::unique_ptr<Generator> generator;
};
// Applies --seed when `command` got it and validates the sampling parameters against the model.
TerminalModel load_terminal_model(const std::string& model_dir, GenerateOptions& options, const CLI::App& command);

}  // namespace tachyon::cli
