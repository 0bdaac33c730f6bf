#include "cli/generate.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "io/config.h"
#if __has_include("tokenizer/tokenizer.h")
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#define TACHYON_HAVE_TOKENIZER 1
#endif

namespace tachyon::cli {

Generator::Generator(model::Model& model, const std::string& model_dir, int32_t max_context)
    : model_(model), model_dir_(model_dir) {
  const int32_t block_size = 16;
  kv_ = std::make_unique<kv::KvCache>(model.backend(), model.kv_layout((max_context + block_size - 1) / block_size, block_size));
  eos_ids_ = io::load_generation_config(model_dir).eos_token_ids;
  if (eos_ids_.empty()) eos_ids_ = model.config().eos_token_ids;
#ifdef TACHYON_HAVE_TOKENIZER
  if (std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.json"))
    tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_model_dir(model_dir));
#endif
}

Generator::~Generator() = default;

std::vector<int32_t> Generator::encode(const std::string& text) const {
#ifdef TACHYON_HAVE_TOKENIZER
  if (tokenizer_) return tokenizer_->encode(text, true);
#endif
  throw Error("{}: no tokenizer available; give the prompt as --ids", model_dir_);
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const sampling::SamplingParams& params,
                                   int max_tokens, const std::function<void(int32_t, const std::string&)>& on_token) {
  if (prompt.empty()) throw Error("the prompt is empty");
  const int32_t capacity = static_cast<int32_t>(kv_->layout().num_blocks) * kv_->layout().block_size;
  if (static_cast<int32_t>(prompt.size()) + max_tokens > capacity)
    throw Error("prompt ({} tokens) + max tokens ({}) exceed the context of {} tokens", prompt.size(), max_tokens, capacity);
  sampling::Sampler sampler(params);
  GenerateResult result{{}, "length"};
  const auto seq = kv_->add_sequence();
#ifdef TACHYON_HAVE_TOKENIZER
  std::unique_ptr<tokenizer::StreamingDecoder> detok;
  if (tokenizer_) detok = std::make_unique<tokenizer::StreamingDecoder>(*tokenizer_, true);
#endif
  std::vector<int32_t> feed = prompt;
  int32_t position = 0;
  try {
    for (int i = 0; i < max_tokens; ++i) {
      kv_->reserve(seq, position + static_cast<int32_t>(feed.size()));
      model::Batch batch;
      batch.add(seq, feed, position, model::LogitRows::Last);
      auto out = model_.forward(batch, *kv_);
      position += static_cast<int32_t>(feed.size());
      const int32_t token = sampler.sample(out.logits, {prompt, result.tokens});
      result.tokens.push_back(token);
      const bool eos = std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
      std::string text;
#ifdef TACHYON_HAVE_TOKENIZER
      if (detok) text = detok->push(token);
#endif
      if (!eos) on_token(token, text);
      if (eos) {
        result.stop_reason = "eos";
        break;
      }
      feed = {token};
    }
  } catch (...) {
    kv_->remove_sequence(seq);
    throw;
  }
  kv_->remove_sequence(seq);
  return result;
}

}  // namespace tachyon::cli
