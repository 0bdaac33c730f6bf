// SentencePiece-style tokenization of GGUF `llama` vocabularies (Llama 2, Gemma, Mistral
// v1...) as llama.cpp does it, which needs only the pieces and their scores:
//
// - GgufSpmEscape (a pre-tokenizer over the pieces left between special tokens): spaces
//   become U+2581 "▁"; with add_space_prefix one " " is put before the first piece and
//   before every piece that follows a special token (llama.cpp's is_prev_special rule).
// - GgufSpmModel: the piece is cut into UTF-8 characters; then, repeatedly, the adjacent
//   pair whose concatenation is a vocabulary token with the highest score is merged (ties:
//   leftmost). A character that is no token becomes byte tokens <0xXX> (byte fallback;
//   the unknown token for a byte without one).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/hash_maps.h"
#include "tokenizer/model.h"
#include "tokenizer/pre_tokenizers.h"

namespace tachyon::tokenizer {

class GgufSpmEscape : public PreTokenizer {
 public:
  explicit GgufSpmEscape(bool add_space_prefix) : add_space_prefix_(add_space_prefix) {}
  void pre_tokenize(Pieces& pieces) const override;

 private:
  bool add_space_prefix_;
};

class GgufSpmModel : public Model {
 public:
  // `tokens` are distinct (the caller checks); `scores` has one entry per token. `unk_id`
  // (or -1) stands for a byte the vocabulary has no token for.
  GgufSpmModel(std::vector<std::string> tokens, std::vector<float> scores, int32_t unk_id);

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t vocab_size() const override { return tokens_.size(); }

 private:
  int32_t byte_token(unsigned char b) const;

  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  StringIdMap vocab_;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX>, else the one-byte token, else unk, else -1
};

}  // namespace tachyon::tokenizer
