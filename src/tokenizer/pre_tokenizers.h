// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (String or Regex pattern,
// every SplitDelimiterBehavior, invert), ByteLevel (add_prefix_space, use_regex), Metaspace
// (replacement, prepend_scheme, split), Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit and Sequence.
//
// A pre-tokenizer cuts pieces of text into smaller pieces (and may rewrite them, as
// ByteLevel and Metaspace do). Pieces that already are added tokens pass through untouched,
// and empty pieces are dropped after every stage, as in Hugging Face's PreTokenizedString.
//
//   Pieces pieces = {{"Hello world", -1, true}};
//   make_pre_tokenizer(json["pre_tokenizer"], "pre_tokenizer")->pre_tokenize(pieces);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace tachyon::tokenizer {

struct Piece {
  std::string text;
  int32_t token_id = -1;  // >= 0: an added token matched in the input; final, no further processing
  bool at_start = false;  // begins at byte 0 of the original input (Metaspace prepend_scheme "first")
};
using Pieces = std::vector<Piece>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

// nullptr for JSON null; unknown types throw an Error naming the type and the path.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& value, const std::string& path);

}  // namespace tachyon::tokenizer
