// Tokenizer::from_gguf (declared in tokenizer.h) builds a Tokenizer from GGUF tokenizer
// metadata (gguf_vocab.h) with llama.cpp's rules, on the stages of the tokenizer.json
// pipeline:
//
//   gpt2  : special tokens (gguf_special_split.h) -> the family's regex splits and the
//           byte-level mapping (gguf_pre_tokenizers.h) -> BPE over the merges (bpe.h)
//           -> ByteLevel decoding
//   llama : special tokens -> "▁" escaping and add_space_prefix (gguf_spm.h) -> merges by
//           score with byte fallback (gguf_spm.h) -> "▁" -> " ", byte tokens, fused
//
// Token types decide what is special: control, user-defined and unknown tokens are cut out
// of the input text; control and unknown tokens are skipped by decode(ids, true). BOS/EOS
// are added by encode(text, true) when add_bos_token/add_eos_token say so (defaults as
// llama.cpp: SPM adds BOS, gpt2 adds nothing). As llama.cpp does, tokens whose text marks
// the end of a turn ("<|im_end|>", "<end_of_turn>", ...) count as control tokens and end
// generation (gguf_end_of_generation_ids).
//
// Malformed metadata fails closed with an Error naming the key: no tokens, score/type
// arrays of another length, duplicate tokens, special-token ids outside the vocabulary,
// merges naming text that is no token, an unknown model or pre-tokenizer family.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tokenizer/gguf_vocab.h"

namespace tachyon::tokenizer {

// The ids that end generation, as llama.cpp's special_eog_ids: EOS, EOT, EOM and the tokens
// whose text is a known end-of-turn marker, sorted. Validates `vocab` like from_gguf.
std::vector<int32_t> gguf_end_of_generation_ids(const GgufVocab& vocab);

// The end-of-turn token: tokenizer.ggml.eot_token_id, else the first token (by id) whose
// text is a known end-of-turn marker.
std::optional<int32_t> gguf_eot_id(const GgufVocab& vocab);

}  // namespace tachyon::tokenizer
