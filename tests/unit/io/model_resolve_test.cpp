// io/model_resolve: paths, aliases (built-in and the user's file) and hub ids in the cache, in
// that order, and an unknown name's error listing every place searched.
#include "io/model_resolve.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "hf_cache_fixture.h"

namespace tachyon::io {
namespace {

using namespace tachyon::testing;

class Resolve : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = dir_.path() / "cache";
    demo_ = dir_.path() / "demo";
    write_text(demo_ / "config.json", kConfig);
    fs::create_directories(cache_);
    env_.set("HF_HUB_CACHE", cache_.string());
    env_.set("HF_HOME", std::nullopt);
    env_.set("TACHYON_ALIASES", (dir_.path() / "aliases.json").string());
  }
  ResolvedModel resolve(const std::string& name) { return resolve_model(name, {demo_.string(), "", ""}); }
  std::string error_of(const std::string& name) {
    try {
      resolve(name);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << name << " resolved";
    return "";
  }

  ScratchDir dir_;
  EnvGuard env_;
  fs::path cache_, demo_;
};

TEST_F(Resolve, ModelFolderPath) {
  const auto m = resolve(demo_.string());
  EXPECT_EQ(m.path, demo_.string());
  EXPECT_EQ(m.kind, ModelKind::Dir);
  EXPECT_EQ(m.source, ModelSource::Path);
  EXPECT_EQ(m.display_name, "demo");
}

TEST_F(Resolve, GgufFileAndFolderAreReturnedAsGguf) {
  write_text(dir_.path() / "g" / "model-Q4_K_M.gguf", "GGUF");
  auto m = resolve((dir_.path() / "g" / "model-Q4_K_M.gguf").string());
  EXPECT_EQ(m.kind, ModelKind::Gguf);
  m = resolve((dir_.path() / "g").string());  // a folder with one .gguf and no config.json
  EXPECT_EQ(m.kind, ModelKind::Gguf);
  EXPECT_EQ(m.path, (dir_.path() / "g" / "model-Q4_K_M.gguf").string());
  write_text(dir_.path() / "g" / "config.json", kConfig);  // config.json beside the GGUF: still GGUF
  EXPECT_EQ(resolve((dir_.path() / "g").string()).kind, ModelKind::Gguf);
  write_text(dir_.path() / "g" / "model.safetensors", "");  // a checkpoint that also ships a GGUF
  EXPECT_EQ(resolve((dir_.path() / "g").string()).kind, ModelKind::Dir);
  write_text(dir_.path() / "tokenizer.json", "{}");
  EXPECT_EQ(resolve((dir_.path() / "tokenizer.json").string()).kind, ModelKind::File);
}

TEST_F(Resolve, HubIdFromTheCacheByRefAndByCommit) {
  FakeCachedRepo repo(cache_, "Qwen/Qwen3-8B");
  repo.add_file(kCommitA, "config.json", "c1", kConfig);
  repo.add_file(kCommitB, "config.json", "c2", kConfig);
  repo.add_ref("main", kCommitB);
  repo.add_ref("v1", kCommitA);
  auto m = resolve("Qwen/Qwen3-8B");
  EXPECT_EQ(m.source, ModelSource::HfCache);
  EXPECT_EQ(m.path, (repo.root() / "snapshots" / kCommitB).string());
  EXPECT_EQ(m.commit, kCommitB);
  EXPECT_EQ(m.revision, "main");
  EXPECT_EQ(m.display_name, "Qwen/Qwen3-8B");
  EXPECT_EQ(resolve("Qwen/Qwen3-8B@v1").commit, kCommitA);
  EXPECT_EQ(resolve("Qwen/Qwen3-8B@" + kCommitA).commit, kCommitA);
  EXPECT_EQ(resolve("Qwen/Qwen3-8B@aaaaaaaa").commit, kCommitA);
  const std::string e = error_of("Qwen/Qwen3-8B@dev");
  EXPECT_NE(e.find("no ref or snapshot 'dev'"), std::string::npos) << e;
  EXPECT_NE(e.find("main -> bbbbbbbb"), std::string::npos) << e;
}

TEST_F(Resolve, CacheLocationFollowsTheEnvironment) {
  const fs::path home_cache = dir_.path() / "hf-home" / "hub";
  FakeCachedRepo in_home(home_cache, "o/m");
  in_home.add_file(kCommitA, "config.json", "x", kConfig);
  in_home.add_ref("main", kCommitA);
  EXPECT_THROW(resolve("o/m"), Error);  // HF_HUB_CACHE points elsewhere
  env_.set("HF_HOME", (dir_.path() / "hf-home").string());
  EXPECT_THROW(resolve("o/m"), Error);  // HF_HUB_CACHE still wins over HF_HOME
  env_.set("HF_HUB_CACHE", std::nullopt);
  EXPECT_EQ(resolve("o/m").commit, kCommitA);
}

TEST_F(Resolve, BuiltinAliases) {
  auto m = resolve("tachyon-demo");
  EXPECT_EQ(m.source, ModelSource::Alias);
  EXPECT_EQ(m.path, demo_.string());
  ASSERT_TRUE(m.alias);
  EXPECT_EQ(m.alias->defaults.drafter, "ngram");
  // A hub alias resolves through the cache, and says how to get it when absent.
  std::string e = error_of("qwen3-8b");
  EXPECT_NE(e.find("Qwen/Qwen3-8B"), std::string::npos) << e;
  EXPECT_NE(e.find("tachyon pull qwen3-8b"), std::string::npos) << e;
  FakeCachedRepo repo(cache_, "Qwen/Qwen3-8B");
  repo.add_file(kCommitA, "config.json", "c", kConfig);
  repo.add_ref("main", kCommitA);
  m = resolve("qwen3-8b");
  EXPECT_EQ(m.display_name, "qwen3-8b");
  EXPECT_EQ(m.repo_id, "Qwen/Qwen3-8B");
  EXPECT_EQ(m.commit, kCommitA);
  EXPECT_EQ(resolve("qwen3-8b@" + kCommitA).commit, kCommitA);
  for (const char* name : {"qwen3-8b-fp8", "qwen3-0.6b", "qwen3-30b-a3b", "llama3.1-8b", "gemma3-4b", "gpt-oss-20b"})
    EXPECT_TRUE(find_alias(builtin_aliases(), name)) << name;
  EXPECT_EQ(find_alias(builtin_aliases(), "qwen3-8b-fp8")->target, "Qwen/Qwen3-8B-FP8");
  EXPECT_EQ(find_alias(builtin_aliases(), "qwen3-next-80b-a3b")->defaults.drafter, "mtp");
}

TEST_F(Resolve, UserAliasFileAddsAndOverrides) {
  write_text(dir_.path() / "ckpt" / "config.json", kConfig);
  write_text(dir_.path() / "aliases.json", R"({
    "mine": "./ckpt",
    "qwen3-8b": {"model": "demo", "drafter": "mtp", "kv_format": "int8", "description": "shadowed"},
    "hub": "o/m"
  })");
  auto m = resolve("mine");
  EXPECT_EQ(m.path, (dir_.path() / "ckpt").string());  // relative to the file
  EXPECT_EQ(m.alias->origin, (dir_.path() / "aliases.json").string());
  m = resolve("qwen3-8b");
  EXPECT_EQ(m.path, demo_.string());
  EXPECT_EQ(m.alias->defaults.drafter, "mtp");
  EXPECT_EQ(m.alias->defaults.kv_format, "int8");
  const std::string e = error_of("hub");
  EXPECT_NE(e.find("names o/m@main, which is not in the Hugging Face cache"), std::string::npos) << e;
}

TEST_F(Resolve, MalformedUserAliasFileIsAnErrorNamingIt) {
  const std::string file = (dir_.path() / "aliases.json").string();
  write_text(file, R"({"x": {"model": "a/b", "drafer": "mtp"}})");
  std::string e = error_of("x");
  EXPECT_NE(e.find(file), std::string::npos) << e;
  EXPECT_NE(e.find("unknown field 'drafer'"), std::string::npos) << e;
  write_text(file, R"({"x": {"model": "a/b", "drafter": "fast"}})");
  EXPECT_NE(error_of("x").find("drafter 'fast'"), std::string::npos);
  write_text(file, "[1, 2]");
  EXPECT_NE(error_of("x").find("expected a JSON object"), std::string::npos);
}

TEST_F(Resolve, UnknownNameListsEverythingSearched) {
  const std::string e = error_of("acme/nothing-here");
  EXPECT_NE(e.find("model 'acme/nothing-here' not found"), std::string::npos) << e;
  EXPECT_NE(e.find("no such file or folder"), std::string::npos) << e;
  EXPECT_NE(e.find("built-in table"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_.path() / "aliases.json").string()), std::string::npos) << e;
  EXPECT_NE(e.find((cache_ / "models--acme--nothing-here").string()), std::string::npos) << e;
  EXPECT_NE(e.find("tachyon pull acme/nothing-here"), std::string::npos) << e;
  EXPECT_NE(error_of("qwen3-8c").find("Did you mean the alias 'qwen3-8b'?"), std::string::npos);
  EXPECT_NE(error_of("two words").find("not a hub id"), std::string::npos);
}

TEST_F(Resolve, AnExistingPathWinsOverAnAliasOfTheSameName) {
  write_text(dir_.path() / "tachyon-demo" / "config.json", kConfig);
  const auto m = resolve((dir_.path() / "tachyon-demo").string());
  EXPECT_EQ(m.source, ModelSource::Path);
}

}  // namespace
}  // namespace tachyon::io
