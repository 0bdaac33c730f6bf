// A tokenizer as a GGUF file describes it (the `tokenizer.ggml.*` metadata keys), as plain
// data: tokenizer/ may not read files of io/, so a loader above it (cli/gguf_tokenizer.h)
// fills this from the GGUF reader and Tokenizer::from_gguf (gguf_tokenizer.h) builds the
// tokenizer from it, with the rules of llama.cpp (llama-vocab.cpp) so that the ids are
// those llama.cpp gives for the same file.
//
//   tokenizer::GgufVocab v;
//   v.model = "gpt2"; v.pre = "qwen2"; v.tokens = ...; v.merges = ...; v.token_types = ...;
//   auto tok = tokenizer::Tokenizer::from_gguf(v, "model.gguf");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tachyon::tokenizer {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;                   // tokenizer.ggml.pre: the pre-tokenizer family; "" when absent
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;         // tokenizer.ggml.scores: empty or one per token (SPM merge priority)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type: empty (all normal) or one per token
  std::vector<std::string> merges;   // tokenizer.ggml.merges: "left right", in rank order (gpt2)

  // tokenizer.ggml.{bos,eos,eot,eom,unknown,seperator,padding}_token_id. Kept 64-bit so that
  // a hostile value is reported rather than truncated.
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id;
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (SPM)
};

}  // namespace tachyon::tokenizer
