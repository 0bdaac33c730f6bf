// Added tokens ("added_tokens" of tokenizer.json): strings matched in the input before the
// model sees it, with Hugging Face's rules.
//
// - Tokens with normalized=false are matched on the raw input; the text between them is
//   then normalized and tokens with normalized=true are matched on that (their content is
//   normalized the same way first).
// - Matching is leftmost-longest, left to right, non-overlapping (aho-corasick
//   LeftmostLongest). single_word rejects a match touching a word character; lstrip/rstrip
//   absorb the whitespace to the left/right into the token.
// - Special and non-special tokens are matched alike, whatever add_special_tokens says;
//   `special` only matters for skip_special_tokens when decoding.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "tokenizer/hash_maps.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace tachyon::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A byte trie over token contents with leftmost-longest search.
class TokenMatcher {
 public:
  void add(std::string_view content, int32_t token_index);
  bool empty() const { return nodes_.size() <= 1; }
  // First match at or after `from`: the longest among those starting leftmost.
  bool find(std::string_view text, size_t from, size_t* start, size_t* end, int32_t* token_index) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token_index = -1;
  };
  int32_t child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::array<bool, 256> first_byte_{};
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) normalizes the content of normalized=true tokens.
  static AddedVocabulary from_json(const Json& added_tokens, const std::string& path, const Normalizer* normalizer);

  // Cuts `text` at added tokens, normalizing the text in between (see the file comment).
  // Appends non-empty pieces to `out`.
  void split_and_normalize(std::string_view text, const Normalizer* normalizer, Pieces& out) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* find_by_id(int32_t id) const;
  bool is_special_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  void split_with(std::string_view text, bool at_start, const TokenMatcher& matcher, Pieces& out,
                  const std::function<void(Piece&&, Pieces&)>& emit_text) const;

  std::vector<AddedToken> tokens_;
  StringIdMap content_to_id_;
  std::unordered_map<int32_t, size_t> id_to_index_;
  StringIdMap special_contents_;
  TokenMatcher raw_matcher_;         // normalized == false
  TokenMatcher normalized_matcher_;  // normalized == true, content normalized
};

}  // namespace tachyon::tokenizer
