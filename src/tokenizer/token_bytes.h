// The bytes each token adds to decoded text, for constrained decoding (sampling/token_mask.h
// walks them through a grammar). Decoding one token alone is not enough: a byte-level token
// that is half of a UTF-8 character decodes to U+FFFD, and a Metaspace decoder drops the
// leading space of the first token. Here a token's bytes are what it adds in the middle of
// a sequence.
//
//   std::vector<std::string> bytes = tokenizer::token_byte_strings(tok);   // [vocab_size()]
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {

// One entry per id in [0, vocab_size()); empty for special tokens and ids that are no token.
std::vector<std::string> token_byte_strings(const Tokenizer& tokenizer);
// The same for one id.
std::string token_byte_string(const Tokenizer& tokenizer, int32_t id);

}  // namespace tachyon::tokenizer
