// io/hub_download: which files a pull takes by default and through --include/--exclude. The
// HTTP side runs against a fake hub in tests/unit/cli/pull_test.sh.
#include "io/hub_download.h"

#include <gtest/gtest.h>

namespace tachyon::io {
namespace {

std::vector<std::string> names(const std::vector<HubFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

std::vector<HubFile> listing(std::initializer_list<const char*> paths) {
  std::vector<HubFile> out;
  for (const char* p : paths) out.push_back({p, 1, "", ""});
  return out;
}

TEST(HubDownload, GlobsMatchLikeFnmatch) {
  EXPECT_TRUE(glob_match("*.gguf", "model-Q4_K_M.gguf"));
  EXPECT_TRUE(glob_match("*.gguf", "sub/model.gguf"));  // '*' crosses '/', as huggingface_hub's patterns do
  EXPECT_TRUE(glob_match("model-0000?-of-*.safetensors", "model-00001-of-00004.safetensors"));
  EXPECT_TRUE(glob_match("*Q[45]_K_M*", "x-Q5_K_M.gguf"));
  EXPECT_FALSE(glob_match("*Q[45]_K_M*", "x-Q8_K_M.gguf"));
  EXPECT_TRUE(glob_match("*Q[!45]_0*", "x-Q8_0.gguf"));
  EXPECT_FALSE(glob_match("config.json", "drafter/config.json"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("a*b", "acbd"));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
}

TEST(HubDownload, DefaultSelectionIsWhatAModelNeeds) {
  const auto files = listing({".gitattributes", "README.md", "config.json", "generation_config.json", "tokenizer.json",
                              "tokenizer_config.json", "merges.txt", "vocab.json", "chat_template.jinja",
                              "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                              "model.safetensors.index.json", "consolidated.safetensors", "original/consolidated.00.pth",
                              "model-Q4_K_M.gguf", "drafter/config.json", "drafter/model.safetensors", "onnx/model.onnx",
                              "figures/plot.png"});
  EXPECT_EQ(names(select_files(files, {}, {})),
            (std::vector<std::string>{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                      "merges.txt", "vocab.json", "chat_template.jinja",
                                      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                      "model.safetensors.index.json", "drafter/config.json",
                                      "drafter/model.safetensors"}));
  // Without an index, a single consolidated file is the weights.
  EXPECT_EQ(names(select_files(listing({"config.json", "consolidated.safetensors"}), {}, {})),
            (std::vector<std::string>{"config.json", "consolidated.safetensors"}));
}

TEST(HubDownload, IncludeAddsAndExcludeRemoves) {
  const auto files = listing({"config.json", "model.safetensors", "model-Q4_K_M.gguf", "model-Q8_0.gguf"});
  EXPECT_EQ(names(select_files(files, {"*Q4_K_M.gguf"}, {"*.safetensors"})),
            (std::vector<std::string>{"config.json", "model-Q4_K_M.gguf"}));
}

}  // namespace
}  // namespace tachyon::io
