// Fill-in-the-middle prompts (completions `suffix`): the model writes what goes between the
// prompt (the text before the gap) and the suffix (the text after it). Code models trained for
// it mark the parts with special tokens, in prefix-suffix-middle order:
//   Qwen2.5-Coder / Qwen3:  <|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>
//   StarCoder / SantaCoder: <fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>
//   DeepSeek-Coder:         <｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>
// A model whose vocabulary has none of these sets cannot do it: 400 naming `suffix`.
#pragma once

#include <string>

#include "server/generation.h"

namespace tachyon::server {

// The prompt for `request.suffix` around `request.prompt_text` (or `prompt_ids`, taken as the
// prefix's tokens), ids checked against `vocab_size`. Throws ApiError.
Prompt fill_in_middle_prompt(const tokenizer::Tokenizer& tokenizer, const ParsedRequest& request,
                             const std::string& model_id, int64_t vocab_size);

}  // namespace tachyon::server
