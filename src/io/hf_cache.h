// The Hugging Face hub cache on disk, read and written in the layout huggingface_hub uses, so
// that Python tools and tachyon share one copy of every checkpoint
// (https://huggingface.co/docs/hub/local-cache):
//
//   <cache>/models--<org>--<name>/
//     refs/<revision>                  the commit hash a branch or tag pointed at when fetched
//     blobs/<etag>                     file contents, named by sha256 (LFS files) or git sha1 (others)
//     blobs/<etag>.incomplete          a download in progress (resumed from its length)
//     snapshots/<commit>/<file>        relative symlinks to ../../blobs/<etag>
//
//   const std::string cache = io::hf_hub_cache_dir();
//   if (auto snap = io::find_cached_snapshot(cache, "Qwen/Qwen3-8B", "main")) load(snap->path);
//
// Functions here only look at the file system; downloading is io/hub_download.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tachyon::io {

// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub: the precedence huggingface_hub applies.
std::string hf_hub_cache_dir();

// "org/name" or "org/name@revision" (also a bare "name", which the hub accepts for old
// top-level repositories). Revision defaults to "main".
struct RepoRef {
  std::string repo_id;
  std::string revision = "main";
  bool revision_given = false;
};
// nullopt when `text` is not shaped like a repository id (spaces, empty parts, "..", a
// leading "/" or "."), so that paths and prompts are never mistaken for ids.
std::optional<RepoRef> parse_repo_ref(const std::string& text);
// Only "org/name" shapes (a slash and no spaces): what a user means as a hub id.
bool looks_like_repo_id(const std::string& text);

std::string repo_folder_name(const std::string& repo_id);  // "Qwen/Qwen3-8B" -> "models--Qwen--Qwen3-8B"
std::string repo_id_from_folder(const std::string& folder);  // the inverse; "" when not a model folder
bool is_commit_hash(const std::string& revision);           // 40 lowercase hex digits

struct CachedSnapshot {
  std::string path;    // <cache>/models--org--name/snapshots/<commit>
  std::string commit;
};
// The snapshot `revision` names: refs/<revision> when present, else a snapshot folder whose
// commit is `revision` or starts with it (7+ hex digits, unique). nullopt when absent.
std::optional<CachedSnapshot> find_cached_snapshot(const std::string& cache_dir, const std::string& repo_id,
                                                   const std::string& revision);

struct CachedRepo {
  std::string repo_id;
  std::string path;                                      // the models--org--name folder
  int64_t size_on_disk = 0;                              // bytes under blobs/ (each blob once)
  std::vector<std::pair<std::string, std::string>> refs;  // (ref name, commit), sorted by name
  std::vector<std::string> snapshots;                    // commits with a snapshot folder, sorted
};
// Every models--*--* folder of the cache, sorted by repo id. An absent cache is empty.
std::vector<CachedRepo> list_cached_models(const std::string& cache_dir);

// Removes the repository's folder (and its lock folder). Returns the bytes its blobs held;
// throws when the repository is not in the cache.
int64_t remove_cached_model(const std::string& cache_dir, const std::string& repo_id);

}  // namespace tachyon::io
