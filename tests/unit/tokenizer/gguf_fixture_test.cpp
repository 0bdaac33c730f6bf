// The GGUF files of tests/fixtures/gguf/ (written by llama.cpp's tools) tokenize exactly as
// `llama-tokenize --ids` did on them (X.tokenize.json: specials parsed, no BOS since the
// files say add_bos_token false), decode back to the text, agree with the Hugging Face
// tokenizer.json of the model they were converted from (models/tachyon-demo), and their
// chat template renders what the HF directory's template renders.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "base/json.h"
#include "chat/chat_template.h"
#include "cli/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "../io/gguf_builder.h"

namespace tachyon {
namespace {

const std::string kRoot = TACHYON_SOURCE_DIR;
using io::testing::GgufBuilder;
const char* const kFixtures[] = {"demo-q4_k_m", "tiny256-q4_0", "tiny256-q6_k"};

class GgufFixtureTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string gguf_path() const { return kRoot + "/tests/fixtures/gguf/" + GetParam() + ".gguf"; }
  Json cases() const {
    const std::string path = kRoot + "/tests/fixtures/gguf/" + GetParam() + ".tokenize.json";
    return parse_json(read_file(path), path)["cases"];
  }
};

TEST_P(GgufFixtureTest, IdsMatchLlamaCppAndDecodeRoundTrips) {
  const cli::GgufTokenizer loaded = cli::load_gguf_tokenizer(gguf_path());
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;
  const Json all = cases();
  ASSERT_GE(all.size(), 10u);
  for (const Json& c : all) {
    const std::string text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, false), want) << Json(text).dump();
    // The file says add_bos_token false: nothing is added either way.
    EXPECT_EQ(tok.encode(text, true), want) << Json(text).dump();
    EXPECT_EQ(tok.decode(want), text) << Json(text).dump();
  }
}

TEST_P(GgufFixtureTest, AgreesWithTheHuggingFaceTokenizerOfTheSameModel) {
  const cli::GgufTokenizer loaded = cli::load_gguf_tokenizer(gguf_path());
  const auto hf = tokenizer::Tokenizer::from_model_dir(kRoot + "/models/tachyon-demo");
  EXPECT_EQ(loaded.tokenizer->vocab_size(), hf.vocab_size());
  for (const Json& c : cases()) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(loaded.tokenizer->encode(text, false), hf.encode(text, false)) << Json(text).dump();
  }
  // Text the fixture does not cover: long whitespace runs, CR/LF, digits, mixed scripts.
  for (const std::string text : {"a\r\n\r\nb  \n  c", "1234567890 x=-0.5e+10", "Привет, мир! مرحبا 你好。",
                                 "<|im_start|><|im_start|>user\n<|im_end|>\n\n", "tabs\t\t\tand   spaces   "}) {
    EXPECT_EQ(loaded.tokenizer->encode(text, false), hf.encode(text, false)) << Json(text).dump();
  }
  // Special tokens are hidden by skip_special_tokens as in the HF tokenizer.
  const auto ids = loaded.tokenizer->encode("<|im_start|>user\nhi<|im_end|>", false);
  const auto hf_ids = hf.encode("<|im_start|>user\nhi<|im_end|>", false);
  EXPECT_EQ(ids, hf_ids);
  EXPECT_EQ(loaded.tokenizer->decode(ids, true), hf.decode(hf_ids, true));
}

TEST_P(GgufFixtureTest, SpecialTokensAndEndOfGeneration) {
  const cli::GgufTokenizer loaded = cli::load_gguf_tokenizer(gguf_path());
  const tokenizer::Tokenizer& tok = *loaded.tokenizer;
  const int32_t im_end = *tok.token_to_id("<|im_end|>");
  const int32_t endoftext = *tok.token_to_id("<|endoftext|>");
  EXPECT_TRUE(std::count(loaded.end_of_generation_ids.begin(), loaded.end_of_generation_ids.end(), im_end));
  EXPECT_TRUE(std::count(loaded.end_of_generation_ids.begin(), loaded.end_of_generation_ids.end(), endoftext));
  EXPECT_TRUE(tok.is_special(im_end));
  EXPECT_EQ(tok.add_bos_token(), std::optional<bool>(false));
}

TEST_P(GgufFixtureTest, ChatTemplateRendersLikeTheHuggingFaceDirectory) {
  const cli::GgufTokenizer loaded = cli::load_gguf_tokenizer(gguf_path());
  ASSERT_TRUE(loaded.chat_template);
  const auto hf = chat::ChatTemplate::from_model_dir(kRoot + "/models/tachyon-demo");
  EXPECT_EQ(loaded.chat_template->source(), hf.source());
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"},
    {"role": "user", "content": "And 3+3?"}])");
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "add", "description": "Add",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
  for (bool generation_prompt : {false, true}) {
    EXPECT_EQ(loaded.chat_template->render(messages, Json(), generation_prompt),
              hf.render(messages, Json(), generation_prompt));
    EXPECT_EQ(loaded.chat_template->render(messages, tools, generation_prompt),
              hf.render(messages, tools, generation_prompt));
  }
  EXPECT_EQ(loaded.chat_template->render(messages, Json(), true, {{"enable_thinking", false}}),
            hf.render(messages, Json(), true, {{"enable_thinking", false}}));
}

// A small file written here: the loader's handling of keys the fixtures do not have.
GgufBuilder tiny_gguf() {
  GgufBuilder b;
  b.str("general.architecture", "qwen3")
      .str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "qwen2")
      .strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|im_end|>"})
      .array("tokenizer.ggml.token_type", io::GgufValueType::I32, std::vector<int32_t>{1, 1, 1, 3})
      .strings("tokenizer.ggml.merges", {"a b"});
  return b;
}

std::string load_error(const GgufBuilder& b) {
  const std::vector<uint8_t> bytes = b.bytes();
  try {
    cli::load_gguf_tokenizer(*io::GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(gguf_loader, NamedToolUseTemplateAndSpecialTokenVariables) {
  GgufBuilder b = tiny_gguf();
  b.u32("tokenizer.ggml.eos_token_id", 3)
      .str("tokenizer.chat_template", "plain {{ eos_token }}")
      .str("tokenizer.chat_template.tool_use", "tools {{ tools | length }} {{ eos_token }}");
  const std::vector<uint8_t> bytes = b.bytes();
  const auto loaded = cli::load_gguf_tokenizer(*io::GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf"));
  EXPECT_EQ(loaded.tokenizer->encode("abab<|im_end|>", false), (std::vector<int32_t>{2, 2, 3}));
  ASSERT_TRUE(loaded.chat_template);
  EXPECT_EQ(loaded.chat_template->render(Json::array(), Json(), false), "plain <|im_end|>");
  EXPECT_EQ(loaded.chat_template->render(Json::array(), Json::array({1, 2}), false), "tools 2 <|im_end|>");
  EXPECT_EQ(loaded.end_of_generation_ids, (std::vector<int32_t>{3}));
}

TEST(gguf_loader, MalformedKeysNameTheFileAndKey) {
  auto expect = [](const GgufBuilder& b, const std::string& needle) {
    const std::string e = load_error(b);
    EXPECT_NE(e.find(needle), std::string::npos) << e;
    EXPECT_NE(e.find("mem.gguf"), std::string::npos) << e;
  };
  GgufBuilder no_model;
  no_model.strings("tokenizer.ggml.tokens", {"a"});
  expect(no_model, "tokenizer.ggml.model");
  expect(GgufBuilder(tiny_gguf()).u64("tokenizer.ggml.bos_token_id", uint64_t{1} << 40),
         "tokenizer.ggml.bos_token_id = 1099511627776");
  GgufBuilder wrong_type;
  wrong_type.str("tokenizer.ggml.model", "gpt2").u32("tokenizer.ggml.tokens", 7);
  expect(wrong_type, "tokenizer.ggml.tokens");
  expect(GgufBuilder(tiny_gguf()).str("tokenizer.chat_template", "{% if %}"), "tokenizer.chat_template");
  expect(GgufBuilder(tiny_gguf()).strings("tokenizer.ggml.scores", {"x"}), "tokenizer.ggml.scores");
}

INSTANTIATE_TEST_SUITE_P(gguf, GgufFixtureTest, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace tachyon
