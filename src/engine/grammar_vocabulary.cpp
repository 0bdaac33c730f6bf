#include "engine/grammar_vocabulary.h"

#include "sampling/cfg.h"
#include "tokenizer/token_bytes.h"

namespace tachyon::engine {

std::vector<std::string> grammar_token_bytes(const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::string> bytes = tokenizer::token_byte_strings(tokenizer);
  for (size_t id = 0; id < bytes.size(); ++id) {
    const auto token = static_cast<int32_t>(id);
    if (!tokenizer.is_special(token)) continue;
    const std::string text = tokenizer.decode(std::span<const int32_t>(&token, 1), /*skip_special_tokens=*/false);
    if (!text.empty()) bytes[id] = sampling::special_token_bytes(text);
  }
  return bytes;
}

std::shared_ptr<const sampling::TokenVocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tokenizer) {
  return std::make_shared<const sampling::TokenVocabulary>(grammar_token_bytes(tokenizer));
}

}  // namespace tachyon::engine
