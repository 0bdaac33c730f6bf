// io/hf_cache: where the cache is, how ids map to folders, and how revisions find snapshots.
#include "io/hf_cache.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/json.h"
#include "hf_cache_fixture.h"

namespace tachyon::io {
namespace {

using namespace tachyon::testing;

TEST(HfCache, CacheDirPrecedenceFollowsHuggingfaceHub) {
  EnvGuard env;
  env.set("HOME", "/home/u");
  env.set("HF_HUB_CACHE", std::nullopt);
  env.set("HF_HOME", std::nullopt);
  env.set("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(hf_hub_cache_dir(), "/home/u/.cache/huggingface/hub");
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hf_hub_cache_dir(), "/xdg/huggingface/hub");
  env.set("HF_HOME", "/hf");
  EXPECT_EQ(hf_hub_cache_dir(), "/hf/hub");
  env.set("HF_HUB_CACHE", "/direct");
  EXPECT_EQ(hf_hub_cache_dir(), "/direct");
  env.set("HF_HUB_CACHE", "~/c");
  EXPECT_EQ(hf_hub_cache_dir(), "/home/u/c");
}

TEST(HfCache, ParsesRepoIdsAndRejectsPathsAndPrompts) {
  auto r = parse_repo_ref("Qwen/Qwen3-8B");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo_id, "Qwen/Qwen3-8B");
  EXPECT_EQ(r->revision, "main");
  EXPECT_FALSE(r->revision_given);
  r = parse_repo_ref("Qwen/Qwen3-8B@refs/pr/1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->revision, "refs/pr/1");
  EXPECT_TRUE(r->revision_given);
  EXPECT_TRUE(parse_repo_ref("gpt2"));  // old top-level repositories have no org
  for (const char* bad : {"", "/abs/dir", "./x/y", "../x/y", "a/b/c", "def fibonacci(n):", "a/", "/b", "a/b@", "a/b@../x",
                          "x/y@with space"})
    EXPECT_FALSE(parse_repo_ref(bad)) << bad;
  EXPECT_TRUE(looks_like_repo_id("meta-llama/Llama-3.1-8B-Instruct"));
  EXPECT_FALSE(looks_like_repo_id("gpt2"));
  EXPECT_FALSE(looks_like_repo_id("hello world/x"));
}

TEST(HfCache, FolderNamesRoundTrip) {
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-8B"), "models--Qwen--Qwen3-8B");
  EXPECT_EQ(repo_folder_name("gpt2"), "models--gpt2");
  EXPECT_EQ(repo_id_from_folder("models--Qwen--Qwen3-8B"), "Qwen/Qwen3-8B");
  EXPECT_EQ(repo_id_from_folder("datasets--a--b"), "");
  EXPECT_TRUE(is_commit_hash(kCommitA));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST(HfCache, RevisionsFindSnapshotsByRefByCommitAndByPrefix) {
  ScratchDir dir;
  FakeCachedRepo repo(dir.path(), "Qwen/Qwen3-8B");
  repo.add_file(kCommitA, "config.json", "etag-a", kConfig);
  repo.add_file(kCommitB, "config.json", "etag-b", kConfig);
  repo.add_ref("main", kCommitB + "\n");  // a trailing newline is tolerated
  repo.add_ref("v1", kCommitA);
  repo.add_ref("refs/pr/3", kCommitA);
  const std::string cache = dir.path().string();

  auto s = find_cached_snapshot(cache, "Qwen/Qwen3-8B", "main");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->commit, kCommitB);
  EXPECT_EQ(s->path, (repo.root() / "snapshots" / kCommitB).string());
  EXPECT_EQ(read_file(s->path + "/config.json"), kConfig);  // through the relative symlink
  EXPECT_EQ(find_cached_snapshot(cache, "Qwen/Qwen3-8B", "v1")->commit, kCommitA);
  EXPECT_EQ(find_cached_snapshot(cache, "Qwen/Qwen3-8B", "refs/pr/3")->commit, kCommitA);
  EXPECT_EQ(find_cached_snapshot(cache, "Qwen/Qwen3-8B", kCommitA)->commit, kCommitA);
  EXPECT_EQ(find_cached_snapshot(cache, "Qwen/Qwen3-8B", "bbbbbbb")->commit, kCommitB);
  EXPECT_FALSE(find_cached_snapshot(cache, "Qwen/Qwen3-8B", "dev"));
  EXPECT_FALSE(find_cached_snapshot(cache, "Qwen/Qwen3-8B", "abc"));  // too short to be a commit prefix
  EXPECT_FALSE(find_cached_snapshot(cache, "Qwen/Other", "main"));
}

TEST(HfCache, AmbiguousCommitPrefixIsAnError) {
  ScratchDir dir;
  FakeCachedRepo repo(dir.path(), "a/b");
  repo.add_file("abcdef1" + std::string(33, '0'), "config.json", "e1", kConfig);
  repo.add_file("abcdef1" + std::string(33, '1'), "config.json", "e2", kConfig);
  EXPECT_THROW(find_cached_snapshot(dir.path().string(), "a/b", "abcdef1"), Error);
}

TEST(HfCache, ListsModelsWithRefsAndBlobSizesCountedOnce) {
  ScratchDir dir;
  FakeCachedRepo repo(dir.path(), "Qwen/Qwen3-8B");
  repo.add_file(kCommitA, "config.json", "same", "12345");
  repo.add_file(kCommitB, "config.json", "same2", "123");
  repo.add_file(kCommitB, "sub/x.json", "same", "12345");  // shares the blob with commit A
  repo.add_ref("main", kCommitB);
  FakeCachedRepo other(dir.path(), "gpt2");
  other.add_file(kCommitA, "config.json", "g", "1");
  write_text(dir.path() / "datasets--x--y" / "blobs" / "z", "ignored");
  const auto repos = list_cached_models(dir.path().string());
  ASSERT_EQ(repos.size(), 2u);
  EXPECT_EQ(repos[0].repo_id, "Qwen/Qwen3-8B");
  EXPECT_EQ(repos[0].size_on_disk, 8);
  ASSERT_EQ(repos[0].refs.size(), 1u);
  EXPECT_EQ(repos[0].refs[0], std::make_pair(std::string("main"), kCommitB));
  EXPECT_EQ(repos[0].snapshots, (std::vector<std::string>{kCommitA, kCommitB}));
  EXPECT_EQ(repos[1].repo_id, "gpt2");
  EXPECT_TRUE(list_cached_models((dir.path() / "absent").string()).empty());
}

TEST(HfCache, RemoveDeletesTheRepositoryFolderOnly) {
  ScratchDir dir;
  FakeCachedRepo a(dir.path(), "o/a"), b(dir.path(), "o/b");
  a.add_file(kCommitA, "config.json", "x", "1234");
  b.add_file(kCommitA, "config.json", "y", "1");
  EXPECT_EQ(remove_cached_model(dir.path().string(), "o/a"), 4);
  EXPECT_FALSE(fs::exists(a.root()));
  EXPECT_TRUE(fs::exists(b.root()));
  EXPECT_THROW(remove_cached_model(dir.path().string(), "o/a"), Error);
}

}  // namespace
}  // namespace tachyon::io
