#include "tokenizer/added_vocabulary.h"

#include <gtest/gtest.h>

#include "tokenizer_json_helpers.h"

namespace tachyon::tokenizer {
namespace {

using testing::load;
using V = std::vector<int32_t>;

Json added(int id, const char* content, bool special, Json extra = Json::object()) {
  Json t = {{"id", id},          {"content", content}, {"special", special}, {"normalized", false},
            {"lstrip", false},   {"rstrip", false},    {"single_word", false}};
  t.update(extra);
  return t;
}

// Characters a, b, space, x; added tokens from id 10.
Tokenizer make(const Json& tokens, const Json& normalizer = Json()) {
  Json doc = testing::make_bpe_doc({"a", "b", " ", "x", "<", ">"}, {});
  doc["added_tokens"] = tokens;
  doc["normalizer"] = normalizer;
  return load(doc);
}

TEST(tokenizer_added_vocabulary, LeftmostLongestAndAlwaysMatched) {
  const Tokenizer tok = make(Json::array({added(10, "<a>", true), added(11, "<a><a>", false)}));
  EXPECT_EQ(tok.encode("x<a><a><a>b", false), (V{3, 11, 10, 1}));
  EXPECT_EQ(tok.encode("x<a><a><a>b", true), (V{3, 11, 10, 1}));
  EXPECT_TRUE(tok.is_special(10));
  EXPECT_FALSE(tok.is_special(11));
  EXPECT_EQ(tok.token_to_id("<a><a>"), 11);
}

TEST(tokenizer_added_vocabulary, LstripRstripAbsorbWhitespace) {
  const Tokenizer tok = make(Json::array({added(10, "<x>", false, {{"lstrip", true}, {"rstrip", true}})}));
  EXPECT_EQ(tok.encode("a  <x>  b"), (V{0, 10, 1}));
  const Tokenizer plain = make(Json::array({added(10, "<x>", false)}));
  EXPECT_EQ(plain.encode("a <x> b"), (V{0, 2, 10, 2, 1}));
}

TEST(tokenizer_added_vocabulary, SingleWordNeedsWordBoundaries) {
  const Tokenizer tok = make(Json::array({added(10, "ab", false, {{"single_word", true}})}));
  EXPECT_EQ(tok.encode("ab"), (V{10}));
  EXPECT_EQ(tok.encode("x ab x"), (V{3, 2, 10, 2, 3}));
  EXPECT_EQ(tok.encode("xab"), (V{3, 0, 1}));
  EXPECT_EQ(tok.encode("abx"), (V{0, 1, 3}));
}

TEST(tokenizer_added_vocabulary, NormalizedTokensMatchAfterNormalization) {
  const Tokenizer tok = make(Json::array({added(10, "AB", false, {{"normalized", true}})}), {{"type", "Lowercase"}});
  EXPECT_EQ(tok.encode("xAbx"), (V{3, 10, 3}));  // "AB" is normalized to "ab" before matching
  const Tokenizer raw = make(Json::array({added(10, "AB", false)}), {{"type", "Lowercase"}});
  EXPECT_EQ(raw.encode("AB"), (V{10}));
  EXPECT_EQ(raw.encode("Ab"), (V{0, 1}));
}

TEST(tokenizer_added_vocabulary, SkipSpecialOnDecode) {
  const Tokenizer tok = make(Json::array({added(10, "<s>", true), added(11, "<t>", false)}));
  const std::vector<int32_t> ids = {10, 0, 11, 1};
  EXPECT_EQ(tok.decode(ids, false), "<s> a <t> b");  // no decoder: tokens joined by spaces
  EXPECT_EQ(tok.decode(ids, true), "a <t> b");
}

}  // namespace
}  // namespace tachyon::tokenizer
