// Downloads a model repository from the Hugging Face hub into the cache layout of
// io/hf_cache.h, as huggingface_hub writes it, so Python tools and tachyon share the files.
//
//   io::PullOptions opt;                       // endpoint, token, cache: from the environment
//   opt.on_progress = [](const io::PullProgress& p) { ... };
//   io::PullResult r = io::pull_model({"Qwen/Qwen3-8B", "main"}, opt);   // throws io::Error
//
// The hub's HTTP interface, as used here:
//   GET  {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
//        -> {"sha": commit, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}
//   HEAD {endpoint}/{repo}/resolve/{commit}/{file}   (redirects not followed)
//        -> ETag / X-Linked-Etag (the blob name), X-Repo-Commit, X-Linked-Size; LFS files answer 302
//   GET  {endpoint}/{repo}/resolve/{commit}/{file}   (redirects followed, to a CDN for LFS files)
//        with Range: bytes=N- to resume blobs/<etag>.incomplete
// Every file is checked against the listing before it enters the cache: its size always, its
// sha256 for LFS files, its git blob sha1 for the others. A file that fails is deleted and named
// in the Error; only verified blobs get a snapshot link, and refs/<rev> is written last, so a
// failed pull never leaves a snapshot that resolution would pick.
// The token ($HF_TOKEN, else the file huggingface_hub's login writes: $HF_TOKEN_PATH, else
// $HF_HOME/token, else ~/.cache/huggingface/token) goes as "Authorization: Bearer", to the hub only (curl drops it on redirects to
// another host). Proxies come from the usual http_proxy / https_proxy / no_proxy variables.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/hf_cache.h"

namespace tachyon::io {

struct HubFile {
  std::string path;    // rfilename: "model-00001-of-00004.safetensors", "drafter/config.json"
  int64_t size = -1;   // bytes; -1 when the listing gave none
  std::string sha256;  // LFS files only
  std::string blob_id; // git blob sha1
};

struct PullProgress {
  std::string file;
  int64_t file_done = 0, file_total = 0;  // bytes of this file
  int64_t done = 0, total = 0;            // bytes of the whole pull (files already cached count as done)
  int file_index = 0, num_files = 0;      // 1-based
  enum class Event { Start, Bytes, Cached, Done, Retry } event = Event::Bytes;
  std::string note;                       // Retry: why
};

struct PullOptions {
  std::string endpoint;   // empty: $HF_ENDPOINT, else https://huggingface.co
  std::string token;      // empty: $HF_TOKEN, else the token file of `huggingface-cli login`
  std::string cache_dir;  // empty: hf_hub_cache_dir()
  std::vector<std::string> include, exclude;  // globs over repository paths ('*' crosses '/')
  int max_retries = 5;                        // per file, each resuming where the last stopped
  std::function<void(const PullProgress&)> on_progress;
};

struct PullResult {
  std::string repo_id, revision, commit, snapshot_dir;
  int num_files = 0, num_downloaded = 0;
  int64_t bytes_downloaded = 0, bytes_total = 0;
};

PullResult pull_model(const RepoRef& ref, const PullOptions& options);

// The files a model needs by default: top-level config, generation config, tokenizer and
// chat-template files and safetensors weights (not `consolidated*` duplicates when an index
// exists), and the same inside drafter/. Then `include` adds matches, `exclude` removes them.
// *.gguf files come only through `include`.
std::vector<HubFile> select_files(const std::vector<HubFile>& listing, const std::vector<std::string>& include,
                                  const std::vector<std::string>& exclude);
bool glob_match(const std::string& pattern, const std::string& path);  // fnmatch: * ? [...]

}  // namespace tachyon::io
