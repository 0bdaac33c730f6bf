// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, BertNormalizer and Sequence.
//
// A normalizer rewrites one segment of text (the input is first cut at added tokens, so
// each segment between them is normalized on its own, as Hugging Face does). Alignments
// between original and normalized text are not tracked: the engine needs ids, not offsets.
// Unicode normalization uses utf8proc.
//
//   auto n = make_normalizer(json["normalizer"], "normalizer");   // may return nullptr for null
//   std::string s = "Cafe\u0301"; n->normalize(s);                  // "Café" for NFC
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/json.h"

namespace tachyon::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and stays valid UTF-8.
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described at `path`; nullptr for JSON null. Unknown types throw an
// Error naming the type and the path.
std::unique_ptr<Normalizer> make_normalizer(const Json& value, const std::string& path);

}  // namespace tachyon::tokenizer
