// The loaded state behind a Tokenizer (tokenizer.h), shared by the loaders: tokenizer.json
// (tokenizer.cpp) and GGUF metadata (gguf_tokenizer.cpp). Internal to tokenizer/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/decoders.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {

// Cuts the input text at special tokens in place of AddedVocabulary's Hugging Face rules
// (GGUF files follow llama.cpp's, see gguf_special_split.h). Appends non-empty pieces.
class SpecialSplitter {
 public:
  virtual ~SpecialSplitter() = default;
  virtual void split(std::string_view text, Pieces& out) const = 0;
};

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  std::unique_ptr<SpecialSplitter> special_splitter;  // null: `added` splits (tokenizer.json)
  size_t vocab_size_with_added = 0;
  std::optional<int32_t> bos_id, eos_id;
  std::optional<bool> add_bos_token;

  const std::string* token_of(int32_t id) const {
    if (const AddedToken* t = added.find_by_id(id)) return &t->content;
    return model->id_to_token(id);
  }
};

}  // namespace tachyon::tokenizer
