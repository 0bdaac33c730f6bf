// Paths of the real tokenizer files fetched by scripts/fetch_test_assets.sh. Tests that
// need them fail (never skip) when they are missing: run `make test` or the script.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace tachyon::tokenizer::testing {

inline const char* const kRealTokenizers[] = {"qwen3", "llama3_1", "gemma3", "deepseek_v3", "gptoss"};

inline std::string asset_dir(const std::string& name) {
  return std::string(TACHYON_SOURCE_DIR) + "/.cache/npm-assets/tokenizers/" + name;
}

// Fails the calling test (fatally) when the file is missing.
inline std::string require_asset(const std::string& path) {
  if (!std::filesystem::exists(path))
    ADD_FAILURE() << "missing test asset " << path << " (run scripts/fetch_test_assets.sh)";
  return path;
}

}  // namespace tachyon::tokenizer::testing
