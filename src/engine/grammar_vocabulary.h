// The token trie constrained decoding walks (sampling/token_mask.h), built from a tokenizer:
// every token's bytes in text (tokenizer/token_bytes.h), and special tokens as the bytes a
// grammar's token reference names (<|channel|>: sampling/cfg.h special_token_bytes), so a
// grammar can require the special token itself where a format is written in them (harmony,
// DeepSeek V3 tool calls) while its text spelled out in ordinary tokens stays apart.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sampling/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine {

// token_byte_strings(tokenizer), special tokens replaced by their grammar bytes.
std::vector<std::string> grammar_token_bytes(const tokenizer::Tokenizer& tokenizer);
std::shared_ptr<const sampling::TokenVocabulary> grammar_vocabulary(const tokenizer::Tokenizer& tokenizer);

}  // namespace tachyon::engine
