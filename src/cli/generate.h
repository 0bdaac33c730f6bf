// Terminal generation for `tachyon run`: one request at a time through the same engine the
// server uses (so speculation, prefix caching and the exact sampling path are the same),
// with text streamed through the tokenizer's streaming decoder.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
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
  std::vector<int32_t> encode(const std::string& text) const;  // throws when there is no tokenizer

  // on_token(id, text): text is the newly completed UTF-8 text (empty without a tokenizer).
  GenerateResult generate(const std::vector<int32_t>& prompt, const sampling::SamplingParams& params, int max_tokens,
                          const std::function<void(int32_t, const std::string&)>& on_token);

 private:
  std::string model_dir_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
};

}  // namespace tachyon::cli
