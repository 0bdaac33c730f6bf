// Test helpers: a scratch folder, environment variables set for one test, and a Hugging Face
// cache built the way huggingface_hub writes one (blobs, relative snapshot symlinks, refs).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

namespace tachyon::testing {

namespace fs = std::filesystem;

inline void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = (fs::temp_directory_path() / "tachyon-test-XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Sets or unsets variables for the test's lifetime; restores them after.
class EnvGuard {
 public:
  void set(const std::string& name, const std::optional<std::string>& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// One repository in a cache: add_file puts contents in blobs/<etag> and links the snapshot.
class FakeCachedRepo {
 public:
  FakeCachedRepo(const fs::path& cache, const std::string& repo_id) {
    std::string folder = "models";
    for (size_t start = 0;;) {
      const size_t slash = repo_id.find('/', start);
      folder += "--" + repo_id.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    root_ = cache / folder;
  }
  void add_file(const std::string& commit, const std::string& file, const std::string& etag, const std::string& text) {
    write_text(root_ / "blobs" / etag, text);
    const fs::path link = root_ / "snapshots" / commit / file;
    fs::create_directories(link.parent_path());
    fs::create_symlink(fs::relative(root_ / "blobs" / etag, link.parent_path()), link);
  }
  void add_ref(const std::string& name, const std::string& commit) { write_text(root_ / "refs" / name, commit); }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

inline const std::string kCommitA = "aaaaaaaa11111111111111111111111111111111";
inline const std::string kCommitB = "bbbbbbbb22222222222222222222222222222222";
inline const std::string kConfig = R"({"model_type": "qwen3"})";

}  // namespace tachyon::testing
