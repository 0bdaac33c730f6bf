// Every case of tests/fixtures/tokenizers/*.golden.json (ids made by Hugging Face
// `tokenizers` 0.23.2 from the real tokenizer.json files) must come out identical.
#include <gtest/gtest.h>

#include "base/json.h"
#include "test_assets.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {
namespace {

class GoldenTest : public ::testing::TestWithParam<const char*> {};

std::string show(const std::string& s) { return Json(s).dump(); }

TEST_P(GoldenTest, MatchesHuggingFace) {
  const std::string name = GetParam();
  const std::string tokenizer_path = testing::require_asset(testing::asset_dir(name) + "/tokenizer.json");
  ASSERT_FALSE(HasFailure());
  const Json golden = parse_json(read_file(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name +
                                           ".golden.json"),
                                 name);
  const Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  EXPECT_EQ(tok.vocab_size(), golden["vocab_size_with_added"].get<size_t>());

  size_t encode_failures = 0;
  const Json& cases = golden["cases"];
  ASSERT_GT(cases.size(), 100u);
  for (const Json& c : cases) {
    const std::string text = c["text"].get<std::string>();
    const auto no_special = tok.encode(text, false);
    const auto with_special = tok.encode(text, true);
    const auto want_no = c["ids_no_special"].get<std::vector<int32_t>>();
    const auto want_with = c["ids_with_special"].get<std::vector<int32_t>>();
    if (no_special != want_no || with_special != want_with) {
      ++encode_failures;
      ADD_FAILURE() << name << " text " << show(text) << "\n  got  " << Json(no_special).dump() << "\n  want "
                    << Json(want_no).dump() << "\n  with special got " << Json(with_special).dump() << " want "
                    << Json(want_with).dump();
    }
  }
  EXPECT_EQ(encode_failures, 0u);

  const Json& decodes = golden["decode_cases"];
  ASSERT_FALSE(decodes.empty());
  for (const Json& d : decodes) {
    const auto ids = d["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids, true), d["skip_special"].get<std::string>()) << name << " ids " << d["ids"].dump();
    EXPECT_EQ(tok.decode(ids, false), d["keep_special"].get<std::string>()) << name << " ids " << d["ids"].dump();
  }
}

INSTANTIATE_TEST_SUITE_P(tokenizer, GoldenTest, ::testing::ValuesIn(testing::kRealTokenizers),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tachyon::tokenizer
