// Special tokens of a GGUF vocabulary found in the input text the way llama.cpp's
// tokenizer_st_partition does (with parse_special on, as llama-tokenize and the chat
// server run it): the tokens whose type is control, user-defined or unknown are tried
// longest first (equal lengths: lower id first); each one cuts every occurrence out of the
// text left over by the longer ones, leftmost first. This differs from Hugging Face's
// leftmost-longest added-token matching when tokens overlap ("ab" then "b c" in "ab c").
//
// Only tokens that occur somewhere in the text are tried (found with a byte trie first),
// so a vocabulary with thousands of special tokens costs one trie walk per input byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_impl.h"

namespace tachyon::tokenizer {

class GgufSpecialSplitter : public SpecialSplitter {
 public:
  struct Special {
    std::string content;
    int32_t id = -1;
  };
  explicit GgufSpecialSplitter(std::vector<Special> specials);

  void split(std::string_view text, Pieces& out) const override;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t special = -1;                                     // index into specials_ (priority order)
  };
  int32_t child(int32_t node, unsigned char b) const;

  std::vector<Special> specials_;  // longest first, then by id
  std::vector<Node> nodes_ = std::vector<Node>(1);
};

}  // namespace tachyon::tokenizer
