#include "tokenizer/json_scan.h"

#include <gtest/gtest.h>

#include "base/json.h"

namespace tachyon::tokenizer {
namespace {

// The fast scanner must decode exactly what a JSON parser reads, escapes included.
TEST(tokenizer_json_scan, AgreesWithTheJsonParser) {
  const std::string text = read_file(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/tokenizer.json");
  ModelTables tables;
  ASSERT_TRUE(scan_model_tables(text, &tables));
  const Json doc = parse_json(text, "demo");
  const Json& vocab = doc["model"]["vocab"];
  ASSERT_EQ(tables.vocab.size(), vocab.size());
  for (const auto& [token, id] : tables.vocab) EXPECT_EQ(vocab.at(token).get<int32_t>(), id) << token;
  const Json& merges = doc["model"]["merges"];
  ASSERT_EQ(tables.merges.size(), merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    EXPECT_EQ(tables.merges[i].first, merges[i][0].get<std::string>());
    EXPECT_EQ(tables.merges[i].second, merges[i][1].get<std::string>());
  }
  const Json rest = parse_json(tables.rest, "rest");
  EXPECT_TRUE(rest["model"]["vocab"].empty());
  EXPECT_EQ(rest["added_tokens"], doc["added_tokens"]);
  EXPECT_EQ(rest["pre_tokenizer"], doc["pre_tokenizer"]);
}

TEST(tokenizer_json_scan, EscapesAndStringMerges) {
  const std::string text =
      R"({"model": {"type": "BPE", "merges": ["a \u00e9", "\ud83d\ude00 \"q\""], "vocab": {"a": 0, "\u00e9": 1,)"
      R"( "\ud83d\ude00": 2, "\"q\"": 3, "\\\/\n": 4}}, "x": [1, {"y": "}"}]})";
  ModelTables t;
  ASSERT_TRUE(scan_model_tables(text, &t));
  ASSERT_EQ(t.vocab.size(), 5u);
  EXPECT_EQ(t.vocab[1].first, "\u00E9");
  EXPECT_EQ(t.vocab[2].first, "\U0001F600");
  EXPECT_EQ(t.vocab[4].first, "\\/\n");
  ASSERT_EQ(t.merges.size(), 2u);
  EXPECT_EQ(t.merges[1], (std::pair<std::string, std::string>{"\U0001F600", "\"q\""}));
  EXPECT_EQ(parse_json(t.rest, "rest")["x"][1]["y"], "}");
}

TEST(tokenizer_json_scan, RefusesWhatItDoesNotUnderstand) {
  ModelTables t;
  EXPECT_FALSE(scan_model_tables(R"({"model": {"vocab": {"a": 1.5}}})", &t));
  EXPECT_FALSE(scan_model_tables(R"({"model": {"vocab": {"a": 1}, "merges": ["nospace"]}})", &t));
  EXPECT_FALSE(scan_model_tables(R"({"model": {"vocab": {"\ud800": 1}}})", &t));
  EXPECT_FALSE(scan_model_tables(R"({"model": {"merges": []}})", &t));
  EXPECT_FALSE(scan_model_tables(R"([1, 2])", &t));
}

}  // namespace
}  // namespace tachyon::tokenizer
