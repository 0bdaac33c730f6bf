#include "tokenizer/streaming_decoder.h"

#include <gtest/gtest.h>

#include "base/json.h"
#include "test_assets.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

class StreamingTest : public ::testing::TestWithParam<const char*> {};

// Over every golden string of a real tokenizer: the pieces streamed out are valid UTF-8,
// and together they are exactly the one-shot decode.
TEST_P(StreamingTest, ConcatenationEqualsDecode) {
  const std::string name = GetParam();
  const std::string path = testing::require_asset(testing::asset_dir(name) + "/tokenizer.json");
  ASSERT_FALSE(HasFailure());
  const Tokenizer tok = Tokenizer::from_file(path);
  const Json golden =
      parse_json(read_file(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name + ".golden.json"), name);
  for (const Json& c : golden["cases"]) {
    const auto ids = c["ids_with_special"].get<std::vector<int32_t>>();
    for (bool skip : {true, false}) {
      StreamingDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = stream.push(id);
        EXPECT_TRUE(unicode::is_valid_utf8(piece));
        streamed += piece;
      }
      streamed += stream.flush();
      EXPECT_EQ(streamed, tok.decode(ids, skip)) << name << ": " << c["text"].dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(tokenizer, StreamingTest, ::testing::ValuesIn(testing::kRealTokenizers),
                         [](const auto& info) { return std::string(info.param); });

TEST(tokenizer_streaming, HoldsBackIncompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_file(testing::require_asset(testing::asset_dir("gemma3") + "/tokenizer.json"));
  ASSERT_FALSE(HasFailure());
  // U+1F916 as four byte-fallback tokens <0xF0> <0x9F> <0xA4> <0x96>.
  std::vector<int32_t> bytes;
  for (const char* b : {"<0xF0>", "<0x9F>", "<0xA4>", "<0x96>"}) bytes.push_back(*tok.token_to_id(b));
  StreamingDecoder stream(tok);
  EXPECT_EQ(stream.push(*tok.token_to_id("Hi")), "Hi");
  EXPECT_EQ(stream.push(bytes[0]), "");
  EXPECT_EQ(stream.push(bytes[1]), "");
  EXPECT_EQ(stream.push(bytes[2]), "");
  EXPECT_EQ(stream.push(bytes[3]), "\U0001F916");
  EXPECT_EQ(stream.push(bytes[0]), "");
  EXPECT_EQ(stream.flush(), "\uFFFD");  // an unfinished character at the end
}

TEST(tokenizer_streaming, SkipsSpecialTokens) {
  const Tokenizer tok = Tokenizer::from_file(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/tokenizer.json");
  const auto ids = tok.encode("<|im_start|>hello<|im_end|>");
  StreamingDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  out += stream.flush();
  EXPECT_EQ(out, "hello");
}

}  // namespace
}  // namespace tachyon::tokenizer
