#include "tokenizer/pre_tokenizers.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/json.h"

namespace tachyon::tokenizer {
namespace {

std::vector<std::string> run(const Json& stage, const std::string& text) {
  Pieces pieces{{text, -1, true}};
  make_pre_tokenizer(stage, "pre_tokenizer")->pre_tokenize(pieces);
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.push_back(p.text);
  return out;
}

Json split(const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
}

using V = std::vector<std::string>;

// Expected values are what Hugging Face's splitPreTokenizer gives for "a-b--c".
TEST(tokenizer_pre_tokenizers, SplitBehaviors) {
  EXPECT_EQ(run(split("Removed"), "a-b--c"), (V{"a", "b", "c"}));
  EXPECT_EQ(run(split("Isolated"), "a-b--c"), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(run(split("MergedWithPrevious"), "a-b--c"), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(run(split("MergedWithNext"), "a-b--c"), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(run(split("Contiguous"), "a-b--c"), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(run(split("Removed", true), "a-b--c"), (V{"-", "-", "-"}));
}

TEST(tokenizer_pre_tokenizers, RegexUsesOnigurumaWhitespaceAndUnicode16Letters) {
  const Json s = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+|\\p{L}+"}}}, {"behavior", "Removed"}, {"invert", true}};
  // U+180E is not White_Space (PCRE2's \s would match it); U+31350 is a letter since Unicode 15.
  EXPECT_EQ(run(s, "ab\u180E \U00031350x"), (V{"ab", " ", "\U00031350x"}));
}

TEST(tokenizer_pre_tokenizers, MetaspaceFirstAndSplit) {
  const Json m = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(run(m, "Hello  big world"), (V{"\u2581Hello", "\u2581", "\u2581big", "\u2581world"}));
  Pieces later{{"x y", -1, false}};  // not at the start of the input: no prefix
  make_pre_tokenizer(m, "p")->pre_tokenize(later);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].text, "x");
}

TEST(tokenizer_pre_tokenizers, ByteLevelMapsBytesAndSplitsWithGpt2Regex) {
  const Json b = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(run(b, "Hi  there\n"), (V{"\u0120Hi", "\u0120", "\u0120there", "\u010A"}));
}

TEST(tokenizer_pre_tokenizers, DigitsWhitespacePunctuation) {
  EXPECT_EQ(run({{"type", "Digits"}, {"individual_digits", false}}, "ab123c4"), (V{"ab", "123", "c", "4"}));
  EXPECT_EQ(run({{"type", "Digits"}, {"individual_digits", true}}, "12"), (V{"1", "2"}));
  EXPECT_EQ(run({{"type", "WhitespaceSplit"}}, " a\u3000b\t"), (V{"a", "b"}));
  EXPECT_EQ(run({{"type", "Whitespace"}}, "hi, you!"), (V{"hi", ",", "you", "!"}));
  EXPECT_EQ(run({{"type", "Punctuation"}}, "a,b"), (V{"a", ",", "b"}));
}

TEST(tokenizer_pre_tokenizers, AddedTokenPiecesPassThrough) {
  Pieces pieces{{"a-b", -1, true}, {"<x-y>", 7, false}, {"c", -1, false}};
  make_pre_tokenizer(split("Isolated"), "p")->pre_tokenize(pieces);
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(pieces[3].text, "<x-y>");
  EXPECT_EQ(pieces[3].token_id, 7);
}

TEST(tokenizer_pre_tokenizers, UnknownTypeAndBadFieldsNameThePath) {
  try {
    make_pre_tokenizer({{"type", "Sequence"}, {"pretokenizers", {{{"type", "Bogus"}}}}}, "pre_tokenizer");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pretokenizers[0].type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Bogus"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_pre_tokenizer(split("Sideways"), "p"), Error);
  EXPECT_THROW(make_pre_tokenizer({{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Removed"}}, "p"),
               Error);
}

}  // namespace
}  // namespace tachyon::tokenizer
