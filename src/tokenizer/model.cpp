#include "tokenizer/model.h"

#include "base/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/hash_maps.h"
#include "tokenizer/json_fields.h"

namespace tachyon::tokenizer {

namespace {

// A whole word is one token, or the unk token.
class WordLevelModel : public Model {
 public:
  WordLevelModel(const Json& m, const std::string& path) {
    const std::string vocab_path = join_path(path, "vocab");
    const Json& vocab = require_object(require_field(m, "vocab", path), vocab_path);
    vocab_.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int32_t id = to_token_id(it.value(), join_path(vocab_path, it.key()));
      if (static_cast<size_t>(id) > vocab.size() * 4 + 4096)
        throw Error("{}: token id {} is far beyond the {} entries; ids must be (nearly) contiguous",
                    join_path(vocab_path, it.key()), id, vocab.size());
      vocab_.insert(it.key(), id);
      if (static_cast<size_t>(id) >= id_to_token_.size()) id_to_token_.resize(static_cast<size_t>(id) + 1);
      id_to_token_[static_cast<size_t>(id)] = it.key();
    }
    if (auto unk = get_optional_string(m, "unk_token", path)) {
      unk_id_ = vocab_.find(*unk);
      if (unk_id_ < 0) throw Error("{}: unk_token '{}' is not in the vocab", join_path(path, "unk_token"), *unk);
    }
  }
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    } else {
      throw Error("WordLevel: '{}' is not in the vocab and there is no unk_token", word);
    }
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    const int32_t id = vocab_.find(token);
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  const std::string* id_to_token(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
    const std::string& s = id_to_token_[static_cast<size_t>(id)];
    return vocab_.find(s) == id ? &s : nullptr;
  }
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  StringIdMap vocab_;
  std::vector<std::string> id_to_token_;
  int32_t unk_id_ = -1;
};

}  // namespace

std::unique_ptr<Model> make_model(const Json& value, const std::string& path, const ModelTables* tables) {
  require_object(value, path);
  // Old files omit the type of a BPE model; Hugging Face then recognises it by its merges.
  std::string type;
  if (const Json* t = optional_field(value, "type", path)) {
    type = get_type(value, path);
    (void)t;
  } else if (value.contains("merges")) {
    type = "BPE";
  } else {
    throw Error("{}: missing field 'type'", path);
  }
  if (type == "BPE") return BpeModel::from_json(value, path, tables);
  if (tables) throw Error("{}: internal: pre-scanned tables for a {} model", path, type);
  if (type == "WordLevel") return std::make_unique<WordLevelModel>(value, path);
  throw Error("{}.type: unsupported model type '{}' (supported: BPE, WordLevel)", path, type);
}

}  // namespace tachyon::tokenizer
