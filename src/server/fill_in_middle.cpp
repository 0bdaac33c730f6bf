#include "server/fill_in_middle.h"

#include <fmt/format.h>

#include <array>

#include "server/api_error.h"

namespace tachyon::server {

namespace {

struct FimTokens {
  const char* prefix;
  const char* suffix;
  const char* middle;
};

constexpr std::array<FimTokens, 3> kFimSets = {{
    {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},
    {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},
    {"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
     "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>"},
}};

struct FimIds {
  int32_t prefix, suffix, middle;
};

std::optional<FimIds> find_fim_ids(const tokenizer::Tokenizer& tokenizer) {
  for (const FimTokens& set : kFimSets) {
    auto p = tokenizer.token_to_id(set.prefix), s = tokenizer.token_to_id(set.suffix),
         m = tokenizer.token_to_id(set.middle);
    if (p && s && m) return FimIds{*p, *s, *m};
  }
  return std::nullopt;
}

}  // namespace

Prompt fill_in_middle_prompt(const tokenizer::Tokenizer& tokenizer, const ParsedRequest& request,
                             const std::string& model_id, int64_t vocab_size) {
  const std::optional<FimIds> fim = find_fim_ids(tokenizer);
  if (!fim)
    throw ApiError::invalid(fmt::format("model '{}' does not support 'suffix': its vocabulary has no "
                                        "fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>)",
                                        model_id),
                            "suffix");
  std::vector<int32_t> prefix;
  if (request.prompt_ids) {
    prefix = *request.prompt_ids;
    for (int32_t id : prefix)
      if (id >= vocab_size)
        throw ApiError::invalid(
            fmt::format("token id {} in 'prompt' is outside the vocabulary of {} tokens", id, vocab_size), "prompt");
  } else {
    prefix = tokenizer.encode(request.prompt_text.value_or(""), /*add_special_tokens=*/false);
  }
  const std::vector<int32_t> suffix = tokenizer.encode(*request.suffix, /*add_special_tokens=*/false);
  Prompt prompt;
  // A tokenizer that starts every sequence with BOS (Llama-family coders) wants it first here too.
  if (tokenizer.add_bos_token().value_or(false) && tokenizer.bos_id()) prompt.ids.push_back(*tokenizer.bos_id());
  prompt.ids.push_back(fim->prefix);
  prompt.ids.insert(prompt.ids.end(), prefix.begin(), prefix.end());
  prompt.ids.push_back(fim->suffix);
  prompt.ids.insert(prompt.ids.end(), suffix.begin(), suffix.end());
  prompt.ids.push_back(fim->middle);
  prompt.text = tokenizer.decode(prompt.ids, /*skip_special_tokens=*/false);
  return prompt;
}

}  // namespace tachyon::server
