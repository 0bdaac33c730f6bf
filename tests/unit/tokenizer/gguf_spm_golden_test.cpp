// The SentencePiece (`llama`) path against Hugging Face on a real vocabulary: Gemma 3, whose
// GGUF files use tokenizer.ggml.model "llama" (add_space_prefix false). No llama.cpp output
// or .gguf for it is at hand, so the GgufVocab is built from its tokenizer.json the way
// convert_hf_to_gguf.py builds it from the SentencePiece model: pieces by id, added tokens
// control (special) or user-defined (appended when past the pieces), <0xXX> pieces
// byte-typed, BOS 2 / EOS 1 / UNK 3 /
// PAD 0, add_bos true. SentencePiece's scores are not in tokenizer.json; the merge order
// is: a piece scores minus the rank of the first merge that builds it, which orders pieces
// as the merges list does. Every golden case (Hugging Face `tokenizers` ids) must come out
// identical with and without BOS.
#include <gtest/gtest.h>

#include <unordered_map>

#include "base/json.h"
#include "test_assets.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {
namespace {

GgufVocab gemma3_vocab(const std::string& tokenizer_json) {
  const std::string text = read_file(tokenizer_json);
  ModelTables tables;
  EXPECT_TRUE(scan_model_tables(text, &tables));
  const Json rest = parse_json(tables.rest, tokenizer_json);

  GgufVocab v;
  v.model = "llama";
  v.tokens.resize(tables.vocab.size());
  for (const auto& [token, id] : tables.vocab) v.tokens.at(static_cast<size_t>(id)) = token;
  std::unordered_map<std::string, size_t> first_merge;
  for (size_t i = 0; i < tables.merges.size(); ++i)
    first_merge.emplace(tables.merges[i].first + tables.merges[i].second, i);
  v.scores.resize(v.tokens.size());
  v.token_types.assign(v.tokens.size(), 1);
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    auto it = first_merge.find(v.tokens[id]);
    v.scores[id] = it == first_merge.end() ? -1e9f : -static_cast<float>(it->second);
    const std::string& t = v.tokens[id];
    if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') v.token_types[id] = 6;
  }
  for (const Json& added : rest["added_tokens"]) {
    // Added tokens past the pieces (Gemma 3's <image_soft_token>) extend the list, as the
    // converter pads the GGUF vocabulary with them.
    const size_t id = added["id"].get<size_t>();
    if (id >= v.tokens.size()) {
      v.tokens.resize(id + 1);
      v.scores.resize(id + 1, 0.0f);
      v.token_types.resize(id + 1, 1);
    }
    v.tokens[id] = added["content"].get<std::string>();
    v.token_types[id] = added["special"].get<bool>() ? 3 : 4;
  }
  v.bos_id = 2;
  v.eos_id = 1;
  v.unk_id = 3;
  v.pad_id = 0;
  v.add_bos = true;
  v.add_space_prefix = false;
  return v;
}

TEST(gguf_spm_golden, Gemma3MatchesHuggingFace) {
  const std::string path = testing::require_asset(testing::asset_dir("gemma3") + "/tokenizer.json");
  ASSERT_FALSE(HasFailure());
  const std::string golden_path = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/tokenizers/gemma3.golden.json";
  const Json golden = parse_json(read_file(golden_path), golden_path);
  const Tokenizer tok = Tokenizer::from_gguf(gemma3_vocab(path), "gemma3 (from tokenizer.json)");
  EXPECT_EQ(tok.vocab_size(), golden["vocab_size_with_added"].get<size_t>());
  size_t failures = 0;
  for (const Json& c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto no_special = tok.encode(text, false);
    const auto with_special = tok.encode(text, true);
    const auto want = c["ids_no_special"].get<std::vector<int32_t>>();
    if (no_special != want || with_special != c["ids_with_special"].get<std::vector<int32_t>>()) {
      ++failures;
      ADD_FAILURE() << "text " << Json(text).dump() << "\n  got  " << Json(no_special).dump() << "\n  want "
                    << Json(want).dump();
    }
  }
  EXPECT_EQ(failures, 0u);
  for (const Json& d : golden["decode_cases"]) {
    const auto ids = d["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids, false), d["keep_special"].get<std::string>()) << d["ids"].dump();
  }
}

}  // namespace
}  // namespace tachyon::tokenizer
