// A single-sequence generation loop for the terminal commands: prefill, then sample and
// decode one token per forward until max_tokens or an end-of-sequence token. (The server's
// engine batches many sequences; this is the one-user path.)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "sampling/sampler.h"

namespace tachyon::tokenizer {
class Tokenizer;
}

namespace tachyon::cli {

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string stop_reason;  // "eos" | "length"
};

class Generator {
 public:
  Generator(model::Model& model, const std::string& model_dir, int32_t max_context);
  ~Generator();

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  std::vector<int32_t> encode(const std::string& text) const;  // throws when there is no tokenizer

  // on_token(id, text): text is the newly completed UTF-8 text (empty without a tokenizer).
  GenerateResult generate(const std::vector<int32_t>& prompt, const sampling::SamplingParams& params, int max_tokens,
                          const std::function<void(int32_t, const std::string&)>& on_token);

 private:
  model::Model& model_;
  std::string model_dir_;
  std::unique_ptr<kv::KvCache> kv_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::vector<int64_t> eos_ids_;
};

}  // namespace tachyon::cli
