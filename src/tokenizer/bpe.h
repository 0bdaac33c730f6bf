// Byte-pair-encoding model (see model.h for the algorithm and its Hugging Face semantics).
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/hash_maps.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/model.h"

namespace tachyon::tokenizer {

class BpeModel : public Model {
 public:
  // `tables`, when given, holds model.vocab and model.merges already decoded (json_scan.h).
  static std::unique_ptr<BpeModel> from_json(const Json& model, const std::string& path,
                                             const ModelTables* tables = nullptr);

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  // Merges without the cache; `out` gets the ids.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t symbol_id(std::string_view word, size_t begin, size_t end, bool first, bool last) const;

  StringIdMap vocab_;
  std::vector<std::string> id_to_token_;  // "" with has_token_ false for holes
  std::vector<bool> has_token_;
  MergeMap merges_;
  std::vector<int32_t> single_char_ids_;  // code point < 0x800 -> id or -1, when no prefix/suffix
  std::array<int32_t, 256> byte_fallback_ids_{};
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;

  // Word -> ids for words shorter than kMaxCachedWord bytes. Sharded so that concurrent
  // encodes rarely contend; a full shard is cleared (cheap, and the hot words come back).
  static constexpr size_t kMaxCachedWord = 256;
  static constexpr size_t kShards = 64;
  static constexpr size_t kShardCapacity = 8192;
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return hash_bytes(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, TransparentHash, std::equal_to<>> words;
  };
  mutable std::unique_ptr<Shard[]> cache_ = std::make_unique<Shard[]>(kShards);
};

}  // namespace tachyon::tokenizer
