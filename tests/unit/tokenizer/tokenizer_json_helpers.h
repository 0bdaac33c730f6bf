// Builds small tokenizer.json documents for unit tests.
#pragma once

#include <string>

#include "base/json.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer::testing {

// A character-level BPE over `chars` (each its own token, ids in order) plus `merges`
// ("a b"), with the given stages (JSON null when omitted).
inline Json make_bpe_doc(const std::vector<std::string>& chars, const std::vector<std::string>& merges) {
  Json vocab = Json::object();
  for (const auto& c : chars) vocab[c] = static_cast<int>(vocab.size());
  for (const auto& m : merges) {
    const auto space = m.find(' ');
    const std::string merged = m.substr(0, space) + m.substr(space + 1);
    if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
  }
  return Json{{"version", "1.0"},        {"added_tokens", Json::array()}, {"normalizer", nullptr},
              {"pre_tokenizer", nullptr}, {"post_processor", nullptr},     {"decoder", nullptr},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

inline Tokenizer load(const Json& doc) { return Tokenizer::from_json(doc.dump(), "test.json"); }

}  // namespace tachyon::tokenizer::testing
