// Needle-in-a-haystack prompts at the token level for the PFlash tests: filler sentences
// (tests/fixtures/pflash/haystack.txt) with one needle sentence inserted at a depth, then a
// question. Each piece is encoded on its own, so the needle's token span is exact.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "base/json.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine::pflash_test {

struct NeedlePrompt {
  std::vector<int32_t> tokens;
  int32_t needle_begin = -1, needle_end = -1;  // the needle's token span; -1: none
};

inline std::vector<std::string> haystack_sentences() {
  const std::string text = read_file(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/pflash/haystack.txt");
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '.') {
      out.push_back(text.substr(begin, i + 1 - begin));
      begin = i + 1;
    }
  return out;
}

// About `filler_tokens` tokens of filler with `needle` (empty: none) after the sentence at
// `depth` of them, then `question`.
inline NeedlePrompt needle_prompt(const tokenizer::Tokenizer& tok, int32_t filler_tokens, const std::string& needle,
                                  double depth, const std::string& question) {
  std::vector<std::vector<int32_t>> sentences;
  int32_t total = 0;
  for (const std::string& s : haystack_sentences()) {
    if (total >= filler_tokens) break;
    sentences.push_back(tok.encode(s, false));
    total += static_cast<int32_t>(sentences.back().size());
  }
  NeedlePrompt p;
  const int32_t at = static_cast<int32_t>(std::lround(depth * total));
  bool placed = needle.empty();
  for (const auto& s : sentences) {
    if (!placed && static_cast<int32_t>(p.tokens.size()) >= at) {
      const std::vector<int32_t> n = tok.encode(" " + needle, false);
      p.needle_begin = static_cast<int32_t>(p.tokens.size());
      p.tokens.insert(p.tokens.end(), n.begin(), n.end());
      p.needle_end = static_cast<int32_t>(p.tokens.size());
      placed = true;
    }
    p.tokens.insert(p.tokens.end(), s.begin(), s.end());
  }
  const std::vector<int32_t> q = tok.encode("\n\nQuestion: " + question + "\nAnswer:", false);
  p.tokens.insert(p.tokens.end(), q.begin(), q.end());
  return p;
}

}  // namespace tachyon::engine::pflash_test
