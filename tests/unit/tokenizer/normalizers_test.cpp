#include "tokenizer/normalizers.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace tachyon::tokenizer {
namespace {

std::string run(const Json& stage, std::string text) {
  make_normalizer(stage, "normalizer")->normalize(text);
  return text;
}

TEST(tokenizer_normalizers, UnicodeForms) {
  EXPECT_EQ(run({{"type", "NFC"}}, "Cafe\u0301"), "Caf\u00E9");
  EXPECT_EQ(run({{"type", "NFD"}}, "Caf\u00E9"), "Cafe\u0301");
  EXPECT_EQ(run({{"type", "NFKC"}}, "\uFB01 \u2460 \uFF21"), "fi 1 A");
  EXPECT_EQ(run({{"type", "NFKD"}}, "\u00C5"), "A\u030A");
}

// Hugging Face's normalization tables are Unicode 9.0 (values checked against the library).
TEST(tokenizer_normalizers, CharactersNewerThanUnicode9AreLeftAlone) {
  EXPECT_EQ(run({{"type", "NFKC"}}, "\uAB69"), "\uAB69");  // compatibility mapping added in Unicode 13
  // U+1AC3 (Unicode 14, ccc 220) after U+0E4B (ccc 107) is not reordered.
  EXPECT_EQ(run({{"type", "NFC"}}, "\u1AC3\u0E4B"), "\u1AC3\u0E4B");
  EXPECT_EQ(run({{"type", "NFC"}}, "e\u0301\u1AC3e\u0301"), "\u00E9\u1AC3\u00E9");
}

TEST(tokenizer_normalizers, LowercaseStripReplacePrepend) {
  EXPECT_EQ(run({{"type", "Lowercase"}}, "\u0130STANBUL \u03A3\u0391\u03A3"), "i\u0307stanbul \u03C3\u03B1\u03C3");
  EXPECT_EQ(run({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, " \u3000a b "), "a b ");
  EXPECT_EQ(run({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}, "a b  c"),
            "a\u2581b\u2581\u2581c");
  EXPECT_EQ(run({{"type", "Replace"}, {"pattern", {{"Regex", "\\s{2,}"}}}, {"content", " "}}, "a  \t b"), "a b");
  EXPECT_EQ(run({{"type", "Prepend"}, {"prepend", "\u2581"}}, "x"), "\u2581x");
  EXPECT_EQ(run({{"type", "Prepend"}, {"prepend", "\u2581"}}, ""), "");
}

TEST(tokenizer_normalizers, StripAccentsUsesHuggingFacesMarks) {
  const Json seq = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}};
  EXPECT_EQ(run(seq, "r\u00E9sum\u00E9 1\u20E3"), "resume 1");  // enclosing marks go too
  EXPECT_EQ(run(seq, "\U00011074"), "\U00011074");               // a mark only since Unicode 14 stays
  EXPECT_EQ(run(seq, "\u1CF3"), "");                             // Mc in Unicode 9, Lo today: removed
}

TEST(tokenizer_normalizers, UnknownTypeNamesPath) {
  try {
    make_normalizer({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled2"}}}}},
                    "normalizer");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("normalizer.normalizers[1].type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Precompiled2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(make_normalizer(Json(), "normalizer"), nullptr);
}

}  // namespace
}  // namespace tachyon::tokenizer
