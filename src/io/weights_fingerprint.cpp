#include "io/weights_fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/hash64.h"

namespace tachyon::io {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kEdge = int64_t{1} << 20;    // first and last bytes hashed
constexpr int64_t kStride = int64_t{64} << 20; // one sample per stride between them
constexpr int64_t kSample = 4096;

bool fingerprinted(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "config.json" || name == "model.safetensors.index.json" || p.extension() == ".safetensors" ||
         p.extension() == ".gguf";
}

uint64_t hash_range(std::FILE* f, int64_t offset, int64_t bytes, uint64_t seed, std::vector<char>& buffer) {
  buffer.resize(static_cast<size_t>(bytes));
  if (std::fseek(f, offset, SEEK_SET) != 0 || std::fread(buffer.data(), 1, buffer.size(), f) != buffer.size())
    throw Error("cannot read {} bytes at {} while fingerprinting the weights", bytes, offset);
  return hash64(buffer.data(), buffer.size(), seed);
}

}  // namespace

uint64_t weights_fingerprint(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) files.push_back(dir);  // a single GGUF file
  else
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && fingerprinted(e.path())) files.push_back(e.path());
  if (files.empty()) throw Error("{}: no config.json or weight files to fingerprint", dir);
  std::sort(files.begin(), files.end());
  uint64_t h = hash64("tachyon weights fingerprint v1");
  std::vector<char> buffer;
  for (const fs::path& path : files) {
    const auto size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) throw Error("{}: {}", path.string(), ec.message());
    h = hash64_combine(hash64(path.filename().string(), h), static_cast<uint64_t>(size));
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error("{}: cannot open to fingerprint", path.string());
    try {
      if (size <= 2 * kEdge) {
        h = hash_range(f, 0, size, h, buffer);
      } else {
        h = hash_range(f, 0, kEdge, h, buffer);
        for (int64_t at = kEdge + kStride; at + kSample <= size - kEdge; at += kStride) h = hash_range(f, at, kSample, h, buffer);
        h = hash_range(f, size - kEdge, kEdge, h, buffer);
      }
    } catch (...) {
      std::fclose(f);
      throw;
    }
    std::fclose(f);
  }
  return h == 0 ? 1 : h;  // 0 means "none" to the engine
}

}  // namespace tachyon::io
