#include "io/hf_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/json.h"

namespace tachyon::io {

namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string expand_home(const std::string& path) {
  if (path.rfind("~/", 0) == 0 || path == "~") return env_or_empty("HOME") + path.substr(1);
  return path;
}

bool valid_part(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return s.front() != '-' && s.front() != '.';
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool is_hex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

std::string hf_hub_cache_dir() {
  if (auto v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return expand_home(v);
  if (auto v = env_or_empty("HF_HOME"); !v.empty()) return (fs::path(expand_home(v)) / "hub").string();
  if (auto v = env_or_empty("XDG_CACHE_HOME"); !v.empty())
    return (fs::path(expand_home(v)) / "huggingface" / "hub").string();
  return (fs::path(env_or_empty("HOME")) / ".cache" / "huggingface" / "hub").string();
}

std::optional<RepoRef> parse_repo_ref(const std::string& text) {
  RepoRef ref;
  std::string id = text;
  if (const size_t at = text.find('@'); at != std::string::npos) {
    id = text.substr(0, at);
    ref.revision = text.substr(at + 1);
    ref.revision_given = true;
    // Branch and tag names may hold slashes (refs/pr/1) but never spaces or "..".
    if (ref.revision.empty() || ref.revision.find("..") != std::string::npos ||
        ref.revision.find_first_of(" \t\n\\") != std::string::npos || ref.revision.front() == '/')
      return std::nullopt;
  }
  const size_t slash = id.find('/');
  if (slash == std::string::npos) {
    if (!valid_part(id)) return std::nullopt;
  } else if (id.find('/', slash + 1) != std::string::npos || !valid_part(id.substr(0, slash)) ||
             !valid_part(id.substr(slash + 1))) {
    return std::nullopt;
  }
  ref.repo_id = id;
  return ref;
}

bool looks_like_repo_id(const std::string& text) {
  const auto ref = parse_repo_ref(text);
  return ref && ref->repo_id.find('/') != std::string::npos;
}

std::string repo_folder_name(const std::string& repo_id) {
  std::string name = "models";
  size_t start = 0;
  for (;;) {
    const size_t slash = repo_id.find('/', start);
    name += "--" + repo_id.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return name;
}

std::string repo_id_from_folder(const std::string& folder) {
  if (folder.rfind("models--", 0) != 0) return "";
  std::string rest = folder.substr(8), id;
  for (size_t pos; (pos = rest.find("--")) != std::string::npos;) {
    id += rest.substr(0, pos) + "/";
    rest = rest.substr(pos + 2);
  }
  return id + rest;
}

bool is_commit_hash(const std::string& revision) {
  return revision.size() == 40 &&
         std::all_of(revision.begin(), revision.end(), [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

std::optional<CachedSnapshot> find_cached_snapshot(const std::string& cache_dir, const std::string& repo_id,
                                                   const std::string& revision) {
  const fs::path repo = fs::path(cache_dir) / repo_folder_name(repo_id);
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) return std::nullopt;
  const fs::path snapshots = repo / "snapshots";
  const fs::path ref_file = repo / "refs" / revision;
  if (fs::is_regular_file(ref_file, ec)) {
    const std::string commit = trim(read_file(ref_file.string()));
    if (fs::is_directory(snapshots / commit, ec)) return CachedSnapshot{(snapshots / commit).string(), commit};
    return std::nullopt;
  }
  // A commit given by hash, in full or as a unique prefix (as `git` accepts one).
  if (revision.size() < 7 || !is_hex(revision) || !fs::is_directory(snapshots, ec)) return std::nullopt;
  std::optional<CachedSnapshot> found;
  for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
    const std::string commit = entry.path().filename().string();
    if (commit.rfind(revision, 0) != 0 || !entry.is_directory()) continue;
    if (found) throw Error("{}@{}: the commit prefix matches several snapshots in {}", repo_id, revision, snapshots.string());
    found = CachedSnapshot{entry.path().string(), commit};
  }
  return found;
}

std::vector<CachedRepo> list_cached_models(const std::string& cache_dir) {
  std::vector<CachedRepo> repos;
  std::error_code ec;
  if (!fs::is_directory(cache_dir, ec)) return repos;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string id = repo_id_from_folder(entry.path().filename().string());
    if (id.empty() || !entry.is_directory()) continue;
    CachedRepo repo{id, entry.path().string(), 0, {}, {}};
    for (const auto& blob : fs::directory_iterator(entry.path() / "blobs", ec))
      if (blob.is_regular_file()) repo.size_on_disk += static_cast<int64_t>(blob.file_size());
    const fs::path refs = entry.path() / "refs";
    if (fs::is_directory(refs, ec))
      for (auto it = fs::recursive_directory_iterator(refs, ec); it != fs::recursive_directory_iterator(); ++it)
        if (it->is_regular_file())
          repo.refs.emplace_back(fs::relative(it->path(), refs).generic_string(), trim(read_file(it->path().string())));
    std::sort(repo.refs.begin(), repo.refs.end());
    for (const auto& snap : fs::directory_iterator(entry.path() / "snapshots", ec))
      if (snap.is_directory()) repo.snapshots.push_back(snap.path().filename().string());
    std::sort(repo.snapshots.begin(), repo.snapshots.end());
    repos.push_back(std::move(repo));
  }
  std::sort(repos.begin(), repos.end(), [](const CachedRepo& a, const CachedRepo& b) { return a.repo_id < b.repo_id; });
  return repos;
}

int64_t remove_cached_model(const std::string& cache_dir, const std::string& repo_id) {
  const fs::path repo = fs::path(cache_dir) / repo_folder_name(repo_id);
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) throw Error("{} is not in the Hugging Face cache ({} does not exist)", repo_id, repo.string());
  int64_t bytes = 0;
  for (const auto& blob : fs::directory_iterator(repo / "blobs", ec))
    if (blob.is_regular_file()) bytes += static_cast<int64_t>(blob.file_size());
  fs::remove_all(repo, ec);
  if (ec) throw Error("cannot remove {}: {}", repo.string(), ec.message());
  fs::remove_all(fs::path(cache_dir) / ".locks" / repo_folder_name(repo_id), ec);
  return bytes;
}

}  // namespace tachyon::io
