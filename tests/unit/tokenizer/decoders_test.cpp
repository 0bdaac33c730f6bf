#include "tokenizer/decoders.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

std::string run(const Json& stage, std::vector<std::string> tokens) {
  make_decoder(stage, "decoder")->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

// Expected values are what Hugging Face's decoders give for the same tokens.
TEST(tokenizer_decoders, ByteFallbackInvalidRunsBecomeOneReplacementPerByte) {
  EXPECT_EQ(run({{"type", "ByteFallback"}}, {"<0xE4>", "<0xBD>", "<0xA0>", "x", "<0xE4>", "<0xBD>", "y", "<0xFF>"}),
            "\u4F60x\uFFFD\uFFFDy\uFFFD");
}

TEST(tokenizer_decoders, ByteLevelIsLossyOverAllBytes) {
  // "\u00E4\u00BD" is the byte-level spelling of bytes E4 BD: an incomplete character.
  EXPECT_EQ(run({{"type", "ByteLevel"}}, {"\u0120Hello", "\u00E4\u00BD", "\u0120x"}), " Hello\uFFFD x");
  EXPECT_EQ(run({{"type", "ByteLevel"}}, {"\u00E4\u00BD", "\u0142"}), "\u4F60");  // split across tokens: whole
}

TEST(tokenizer_decoders, MetaspaceDropsReplacementsOfTheFirstToken) {
  EXPECT_EQ(run({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}},
                {"\u2581\u2581Hello", "\u2581wor", "ld\u2581"}),
            "Hello world ");
}

// Token texts may hold raw bytes (GGUF vocabularies): a token that ends inside a UTF-8 sequence
// is stripped without reading past its end and keeps its bytes (found by fuzzing, under ASan).
TEST(tokenizer_decoders, StripOverTokensEndingInACutOffSequenceKeepsTheirBytes) {
  const Json strip = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}};
  EXPECT_EQ(run(strip, {" ab\xF0\x9F", "\xE4", " \xC3"}), "ab\xF0\x9F\xE4\xC3");
  size_t len = 0;
  EXPECT_EQ(unicode::decode_at("a\xF0\x9F\x98", 1, &len), U'\uFFFD');
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(unicode::decode_at("a\xF0\x9F\x98\x80", 1, &len), U'\U0001F600');
  EXPECT_EQ(len, 4u);
}

TEST(tokenizer_decoders, StripReplaceFuseSequence) {
  EXPECT_EQ(run({{"type", "Strip"}, {"content", "\u2581"}, {"start", 1}, {"stop", 1}},
                {"\u2581\u2581ab\u2581", "x\u2581\u2581", "y"}),
            "\u2581abx\u2581y");
  const Json gemma = {{"type", "Sequence"},
                      {"decoders",
                       {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}}}}};
  EXPECT_EQ(run(gemma, {"\u2581a", "<0x41>", "\u2581\u2581b"}), " aA  b");
}

TEST(tokenizer_decoders, UnknownTypeNamesPath) {
  try {
    make_decoder({{"type", "Sequence"}, {"decoders", {{{"type", "CTC2"}}}}}, "decoder");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.decoders[0].type"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tachyon::tokenizer
