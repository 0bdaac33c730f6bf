#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tokenizer_json_helpers.h"

namespace tachyon::tokenizer {
namespace {

using testing::load;
using testing::make_bpe_doc;
using V = std::vector<int32_t>;

TEST(tokenizer_bpe, LowestRankMergesFirst) {
  // a=0 b=1 c=2 ; "b c" (rank 0) -> bc=3 ; "a b" (rank 1) -> ab=4 ; "a bc" (rank 2) -> abc=5
  const Tokenizer tok = load(make_bpe_doc({"a", "b", "c"}, {"b c", "a b", "a bc"}));
  EXPECT_EQ(tok.encode("abc"), (V{5}));  // b+c first, then a+bc
  EXPECT_EQ(tok.encode("ab"), (V{4}));
  EXPECT_EQ(tok.encode("cab"), (V{2, 4}));
  EXPECT_EQ(tok.id_to_token(5), "abc");
  EXPECT_EQ(tok.vocab_size(), 6u);
}

TEST(tokenizer_bpe, TiesGoLeftmost) {
  const Tokenizer tok = load(make_bpe_doc({"a"}, {"a a"}));  // aa=1
  EXPECT_EQ(tok.encode("aaa"), (V{1, 0}));
}

TEST(tokenizer_bpe, MergesAsPairsAndIgnoreMerges) {
  Json doc = make_bpe_doc({"a", "b"}, {});
  doc["model"]["vocab"]["ab"] = 2;
  doc["model"]["merges"] = Json::array({Json::array({"a", "b"})});
  EXPECT_EQ(load(doc).encode("abab"), (V{2, 2}));
  doc["model"]["vocab"]["abab"] = 3;  // in the vocab but not reachable by merges
  EXPECT_EQ(load(doc).encode("abab"), (V{2, 2}));
  doc["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(doc).encode("abab"), (V{3}));
}

TEST(tokenizer_bpe, ByteFallbackAndUnk) {
  Json doc = make_bpe_doc({"<unk>", "a"}, {});
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    doc["model"]["vocab"][name] = 2 + b;
  }
  doc["model"]["unk_token"] = "<unk>";
  doc["model"]["byte_fallback"] = true;
  EXPECT_EQ(load(doc).encode("a\u00E9"), (V{1, 2 + 0xC3, 2 + 0xA9}));
  doc["model"]["byte_fallback"] = false;
  EXPECT_EQ(load(doc).encode("a\u00E9\u00E9a"), (V{1, 0, 0, 1}));
  doc["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(doc).encode("a\u00E9\u00E9a"), (V{1, 0, 1}));
}

TEST(tokenizer_bpe, MalformedModelsNameTheField) {
  auto message = [](const Json& doc) {
    try {
      load(doc);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Json doc = make_bpe_doc({"a"}, {"a z"});
  EXPECT_NE(message(doc).find("model.merges[0]"), std::string::npos) << message(doc);
  doc = make_bpe_doc({"a"}, {});
  doc["model"]["vocab"]["b"] = "seven";
  EXPECT_NE(message(doc).find("model.vocab.b"), std::string::npos) << message(doc);
  doc = make_bpe_doc({"a"}, {});
  doc["model"]["unk_token"] = "<unk>";
  EXPECT_NE(message(doc).find("model.unk_token"), std::string::npos) << message(doc);
  doc = make_bpe_doc({"a"}, {});
  doc["model"]["type"] = "Unigram";
  EXPECT_NE(message(doc).find("unsupported model type 'Unigram'"), std::string::npos) << message(doc);
}

}  // namespace
}  // namespace tachyon::tokenizer
