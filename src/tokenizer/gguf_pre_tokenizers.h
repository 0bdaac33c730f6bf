// The pre-tokenizer families of GGUF byte-level BPE tokenizers (`tokenizer.ggml.pre`): for
// each family name llama.cpp knows, the regexes that cut text into words before the byte-
// level mapping and BPE, and whether whole words found in the vocabulary skip the merges.
//
// The words of one regex are cut again by the next (llama.cpp's unicode_regex_split); the
// text between matches is kept as words of its own, which is Hugging Face's Split with
// behavior Isolated. Families llama.cpp implements with hand-written splitters outside
// regexes (kimi-k2, afmoe) or without the byte-level mapping (gemma4, sarvam-moe,
// whitespace) are refused by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon::tokenizer {

struct GgufPreTokenizer {
  std::string family;                // the canonical family (e.g. "llama3" for "llama-bpe")
  std::vector<std::string> regexes;  // applied in order, each on the words of the previous
  bool ignore_merges = false;        // a word that is a token is emitted whole
};

// `pre` is the value of tokenizer.ggml.pre ("" when the key is absent: llama.cpp then uses
// "default"). Throws Error naming `pre` when it is not a known family.
GgufPreTokenizer gguf_pre_tokenizer(std::string_view pre);

}  // namespace tachyon::tokenizer
