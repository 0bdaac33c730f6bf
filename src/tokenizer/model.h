// Models of tokenizer.json ("model"): turn one pre-tokenized word into token ids.
//
// BPE is implemented exactly as Hugging Face's: initial symbols are the word's characters
// (with continuing_subword_prefix / end_of_word_suffix), characters missing from the vocab
// become <0xNN> byte tokens when byte_fallback is on, else the unk token (fused when
// fuse_unk), else they are dropped; then the lowest-ranked adjacent pair is merged until
// none is left (ties: leftmost). ignore_merges returns a word found whole in the vocab
// as is. Merges are "a b" strings or [a, b] pairs. WordLevel maps a whole word or unk.
//
// Thread-safe: `tokenize` is const; the BPE word cache is internally synchronised.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace tachyon::tokenizer {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word` (non-empty, valid UTF-8) to `out`.
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // nullptr when no token has this id.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  // Number of vocabulary entries (Hugging Face get_vocab_size(false)).
  virtual size_t vocab_size() const = 0;
};

struct ModelTables;

// Unknown model types throw an Error naming the type and the path. `tables` (may be null)
// carries a BPE vocab and merges decoded by the fast scanner (json_scan.h).
std::unique_ptr<Model> make_model(const Json& value, const std::string& path, const ModelTables* tables = nullptr);

}  // namespace tachyon::tokenizer
