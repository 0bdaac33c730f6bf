// Differential test against the official Hugging Face `tokenizers` library (npm package
// 0.23.2, the Rust core): >= 10,000 generated strings per tokenizer per run (see
// string_generator.h) must give identical ids with and without special tokens, identical
// decodes of those ids (skip and keep special tokens), and 1,000 random id sequences must
// decode identically. All strings go through one node process per tokenizer.
//
// Environment: TACHYON_TOKENIZER_DIFF_SEED (default: random, printed on failure),
// TACHYON_TOKENIZER_DIFF_COUNT (default 10000).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/json.h"
#include "string_generator.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = TACHYON_SOURCE_DIR;

struct Subject {
  const char* name;
  const char* tokenizer_json;  // relative to the repository root
};
void PrintTo(const Subject& s, std::ostream* os) { *os << s.name; }

const Subject kSubjects[] = {
    {"qwen3", ".cache/npm-assets/tokenizers/qwen3/tokenizer.json"},
    {"llama3_1", ".cache/npm-assets/tokenizers/llama3_1/tokenizer.json"},
    {"gemma3", ".cache/npm-assets/tokenizers/gemma3/tokenizer.json"},
    {"deepseek_v3", ".cache/npm-assets/tokenizers/deepseek_v3/tokenizer.json"},
    {"gptoss", ".cache/npm-assets/tokenizers/gptoss/tokenizer.json"},
    {"tachyon_demo", "models/tachyon-demo/tokenizer.json"},
    // Small hand-made files for the stages the real ones do not use.
    {"mini_bytelevel", "tests/fixtures/tokenizers/mini_bytelevel.json"},
    {"mini_metaspace", "tests/fixtures/tokenizers/mini_metaspace.json"},
    {"mini_wordsplit", "tests/fixtures/tokenizers/mini_wordsplit.json"},
    {"mini_gpt2", "tests/fixtures/tokenizers/mini_gpt2.json"},
    {"mini_spm", "tests/fixtures/tokenizers/mini_spm.json"},
};

// Special-token spellings of all families, so every tokenizer also sees the others'.
const char* const kForeignSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<bos>", "<eos>",
                                        "<start_of_turn>", "<end_of_turn>", "<｜begin▁of▁sentence｜>",
                                        "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|start|>",
                                        "<|message|>", "<|channel|>", "<think>", "</think>", "<tool_call>"};

std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(kAlphabet[(v >> (6 * k)) & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// Invalid UTF-8 cannot go into a JSON string; show it lossily.
std::string unicode_safe(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out.push_back(static_cast<char>(c));
  return unicode::sanitize_utf8(out);
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

class DiffTest : public ::testing::TestWithParam<Subject> {};

TEST_P(DiffTest, MatchesHuggingFaceOnGeneratedStrings) {
  const Subject subject = GetParam();
  const std::string tokenizer_path = kRoot + "/" + subject.tokenizer_json;
  const std::string node_modules = kRoot + "/.cache/npm-assets/node/node_modules";
  ASSERT_TRUE(fs::exists(tokenizer_path)) << "missing " << tokenizer_path << " (run scripts/fetch_test_assets.sh)";
  ASSERT_TRUE(fs::exists(node_modules + "/tokenizers/package.json"))
      << "missing the HF tokenizers npm package under " << node_modules << " (run scripts/fetch_test_assets.sh)";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed";

  const uint64_t seed = env_or("TACHYON_TOKENIZER_DIFF_SEED", std::random_device{}());
  const size_t count = env_or("TACHYON_TOKENIZER_DIFF_COUNT", 10000);
  SCOPED_TRACE("generator seed " + std::to_string(seed) + " (rerun with TACHYON_TOKENIZER_DIFF_SEED=" +
               std::to_string(seed) + ")");

  const Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  std::vector<std::string> specials(std::begin(kForeignSpecials), std::end(kForeignSpecials));
  std::vector<int32_t> added_ids;
  {
    const Json doc = parse_json(read_file(tokenizer_path), tokenizer_path);
    for (const Json& t : doc["added_tokens"]) {
      specials.push_back(t["content"].get<std::string>());
      added_ids.push_back(t["id"].get<int32_t>());
    }
  }

  // Requests: the generated strings, then random id sequences to decode.
  testing::StringGenerator generator(seed, specials);
  std::vector<std::string> texts(count);
  std::mt19937_64 rng(seed ^ 0x5eed);
  std::vector<std::vector<int32_t>> id_lists(1000);
  const fs::path dir = fs::temp_directory_path() / ("tachyon_tok_diff_" + std::string(subject.name) + "_" +
                                                    std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path requests = dir / "requests.jsonl", answers = dir / "answers.jsonl";
  {
    std::ofstream out(requests, std::ios::binary);
    for (std::string& text : texts) {
      bool invalid = false;
      text = generator.next(&invalid);
      out << (invalid ? Json{{"encode_b64", base64(text)}} : Json{{"encode", text}}).dump() << '\n';
    }
    for (auto& ids : id_lists) {
      const size_t n = 1 + rng() % 40;
      for (size_t k = 0; k < n; ++k)
        ids.push_back(rng() % 8 == 0 && !added_ids.empty() ? added_ids[rng() % added_ids.size()]
                                                           : static_cast<int32_t>(rng() % tok.vocab_size()));
      out << Json{{"decode", ids}}.dump() << '\n';
    }
    out << Json{{"vocab_size", true}}.dump() << '\n';
  }
  const std::string command = "node '" + kRoot + "/tests/diff/tokenizer/hf_reference.js' '" + node_modules + "' '" +
                              tokenizer_path + "' < '" + requests.string() + "' > '" + answers.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << "reference failed: " << command;

  std::ifstream in(answers, std::ios::binary);
  std::string line;
  size_t mismatches = 0, shown = 0;
  std::ofstream failing(dir / "mismatches.jsonl", std::ios::binary);
  auto report = [&](const std::string& what) {
    ++mismatches;
    if (shown++ < 10) ADD_FAILURE() << subject.name << ": " << what;
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE(std::getline(in, line)) << "reference answered only " << i << " of " << texts.size() << " strings";
    const Json want = parse_json(line, "reference answer");
    const auto no_special = tok.encode(texts[i], false);
    const auto with_special = tok.encode(texts[i], true);
    const std::string shown_text = Json(unicode_safe(texts[i])).dump();
    const size_t before = mismatches;
    if (no_special != want["no_special"].get<std::vector<int32_t>>())
      report("encode(add_special_tokens=false) of " + shown_text + "\n  ours " + Json(no_special).dump() +
             "\n  HF   " + want["no_special"].dump());
    if (with_special != want["with_special"].get<std::vector<int32_t>>())
      report("encode(add_special_tokens=true) of " + shown_text + "\n  ours " + Json(with_special).dump() +
             "\n  HF   " + want["with_special"].dump());
    const auto hf_ids = want["with_special"].get<std::vector<int32_t>>();
    const std::string skip = tok.decode(hf_ids, true), keep = tok.decode(hf_ids, false);
    if (skip != want["skip"].get<std::string>())
      report("decode(skip_special) of the ids of " + shown_text + "\n  ours " + Json(skip).dump() + "\n  HF   " +
             want["skip"].dump());
    if (keep != want["keep"].get<std::string>())
      report("decode(keep_special) of the ids of " + shown_text + "\n  ours " + Json(keep).dump() + "\n  HF   " +
             want["keep"].dump());
    if (mismatches != before) failing << Json{{"encode_b64", base64(texts[i])}}.dump() << '\n';
  }
  for (const auto& ids : id_lists) {
    ASSERT_TRUE(std::getline(in, line)) << "reference answer missing for a decode";
    const Json want = parse_json(line, "reference answer");
    const std::string skip = tok.decode(ids, true), keep = tok.decode(ids, false);
    if (skip != want["skip"].get<std::string>() || keep != want["keep"].get<std::string>())
      report("decode of " + Json(ids).dump() + "\n  ours " + Json(skip).dump() + " / " + Json(keep).dump() +
             "\n  HF   " + want["skip"].dump() + " / " + want["keep"].dump());
  }
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(tok.vocab_size(), parse_json(line, "reference answer")["with_added"].get<size_t>());
  EXPECT_EQ(mismatches, 0u) << mismatches << " mismatches over " << texts.size() << " strings and " << id_lists.size()
                            << " id sequences; seed " << seed;
  if (mismatches) {
    ADD_FAILURE() << "inputs that differ: " << (dir / "mismatches.jsonl").string() << " (requests for hf_reference.js)";
  } else {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
}

INSTANTIATE_TEST_SUITE_P(tokenizer, DiffTest, ::testing::ValuesIn(kSubjects),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tachyon::tokenizer
