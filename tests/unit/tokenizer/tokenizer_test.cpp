#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <thread>

#include "base/error.h"
#include "test_assets.h"
#include "tokenizer/unicode.h"
#include "tokenizer_json_helpers.h"

namespace tachyon::tokenizer {
namespace {

const std::string kDemoDir = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

std::string load_error(const std::string& json) {
  try {
    Tokenizer::from_json(json, "bad.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(tokenizer_facade, MalformedFilesNameFileAndPath) {
  Json doc = testing::make_bpe_doc({"a"}, {});
  doc["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteLevel"}}, {{"type", "Mystery"}}}}};
  const std::string e = load_error(doc.dump());
  EXPECT_NE(e.find("bad.json"), std::string::npos) << e;
  EXPECT_NE(e.find("decoder.decoders[1].type"), std::string::npos) << e;
  EXPECT_NE(e.find("Mystery"), std::string::npos) << e;
  EXPECT_NE(load_error("{\"model\": 3}").find("model"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("expected an object"), std::string::npos);
  EXPECT_NE(load_error("{not json").find("not valid JSON"), std::string::npos);
  doc = testing::make_bpe_doc({"a"}, {});
  doc["added_tokens"] = {{{"id", 5}, {"special", true}}};
  EXPECT_NE(load_error(doc.dump()).find("added_tokens[0].content"), std::string::npos) << load_error(doc.dump());
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
}

TEST(tokenizer_facade, ModelDirReadsBosEosFromConfig) {
  const Tokenizer tok = Tokenizer::from_model_dir(kDemoDir);
  ASSERT_TRUE(tok.eos_id().has_value());
  EXPECT_EQ(tok.id_to_token(*tok.eos_id()), "<|im_end|>");
  EXPECT_EQ(tok.add_bos_token(), false);
  const Tokenizer from_file = Tokenizer::from_file(kDemoDir + "/tokenizer.json");
  EXPECT_FALSE(from_file.eos_id().has_value());
  const Tokenizer by_path = Tokenizer::from_path(kDemoDir);
  EXPECT_EQ(by_path.eos_id(), tok.eos_id());
}

TEST(tokenizer_facade, VocabularyQueries) {
  const Tokenizer tok = Tokenizer::from_model_dir(kDemoDir);
  EXPECT_EQ(tok.vocab_size(), 8192u);
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 8180);
  EXPECT_TRUE(tok.is_special(8180));
  EXPECT_FALSE(tok.is_special(8182));  // <think> is added but not special
  EXPECT_FALSE(tok.token_to_id("no such token").has_value());
  EXPECT_THROW(tok.id_to_token(1 << 20), Error);
  EXPECT_THROW(tok.id_to_token(-1), Error);
}

// Invalid UTF-8 encodes exactly as its U+FFFD-replaced form (the documented policy).
TEST(tokenizer_facade, InvalidUtf8IsReplacedNotRejected) {
  const Tokenizer tok = Tokenizer::from_model_dir(kDemoDir);
  const std::string bad = "ab\xff\xfe c\xe4\xbd d\xed\xa0\x80 \xf0\x9f\x98";
  const std::string replaced = unicode::sanitize_utf8(bad);
  EXPECT_EQ(replaced, "ab\uFFFD\uFFFD c\uFFFD d\uFFFD\uFFFD\uFFFD \uFFFD");
  EXPECT_EQ(tok.encode(bad), tok.encode(replaced));
  EXPECT_EQ(tok.decode(tok.encode(bad)), replaced);
}

TEST(tokenizer_facade, EncodeIsThreadSafe) {
  const std::string path = testing::require_asset(testing::asset_dir("qwen3") + "/tokenizer.json");
  ASSERT_FALSE(HasFailure());
  const Tokenizer tok = Tokenizer::from_file(path);
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i)
    texts.push_back("word" + std::to_string(i * 7919) + " caf\u00E9 \u4F60\u597D <|im_start|> " + std::string(i % 13, ' '));
  std::vector<std::vector<int32_t>> expected;
  const Tokenizer reference = Tokenizer::from_file(path);  // its own word cache
  for (const auto& t : texts) expected.push_back(reference.encode(t));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round)
        for (size_t i = (w * 37) % texts.size(), n = 0; n < texts.size(); ++n, i = (i + 1) % texts.size())
          if (tok.encode(texts[i]) != expected[i]) ++failures[static_cast<size_t>(w)];
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

TEST(tokenizer_facade, PostProcessorOnlyWithSpecialTokens) {
  const Tokenizer tok = Tokenizer::from_file(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/tokenizers/mini_metaspace.json");
  const auto with = tok.encode("Hello");
  const auto without = tok.encode("Hello", false);
  ASSERT_EQ(with.size(), without.size() + 2);
  EXPECT_EQ(with.front(), 1);
  EXPECT_EQ(with.back(), 2);
  EXPECT_EQ(tok.decode(with, true), "Hello");
}

}  // namespace
}  // namespace tachyon::tokenizer
