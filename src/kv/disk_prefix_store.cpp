#include "kv/disk_prefix_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/hash64.h"
#include "base/logging.h"

namespace tachyon::kv {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'K', 'V', 'B', 'L', 'K', '1', '\0'};
constexpr uint32_t kVersion = 1;
constexpr const char* kExtension = ".kvblock";

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t fingerprint;
  uint64_t block_hash;
  uint64_t payload_bytes;
  uint64_t checksum;
};
static_assert(sizeof(FileHeader) == 48);

std::optional<BlockHash> hash_of_name(const fs::path& path) {
  if (path.extension() != kExtension) return std::nullopt;
  const std::string stem = path.stem().string();
  if (stem.size() != 16 || stem.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  return std::stoull(stem, nullptr, 16);
}

// The header of `path` when it names this fingerprint and hash and the file is exactly header +
// payload long; nullopt otherwise.
std::optional<FileHeader> read_header(const fs::path& path, uint64_t fingerprint, BlockHash hash, std::FILE* f) {
  FileHeader h;
  if (std::fread(&h, sizeof h, 1, f) != 1) return std::nullopt;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion || h.fingerprint != fingerprint ||
      h.block_hash != hash)
    return std::nullopt;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size != sizeof(FileHeader) + h.payload_bytes) return std::nullopt;
  return h;
}

}  // namespace

DiskPrefixStore::DiskPrefixStore(Options options) : options_(std::move(options)) {
  TACHYON_CHECK(options_.max_bytes > 0, "the disk prefix tier needs a positive byte budget");
  folder_ = (fs::path(options_.dir) / fmt::format("{:016x}", options_.fingerprint)).string();
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec || !fs::is_directory(folder_))
    throw Error("--prefix-cache-dir {}: cannot create {}: {}", options_.dir, folder_, ec.message());
  scan_folder();
  writer_ = std::thread([this] { run_writer(); });
}

DiskPrefixStore::~DiskPrefixStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  writer_.join();
}

std::string DiskPrefixStore::file_of(BlockHash hash) const {
  return (fs::path(folder_) / fmt::format("{:016x}{}", hash, kExtension)).string();
}

// Indexes the files a previous run left, oldest first (by modification time), after checking
// each header; leftovers of interrupted writes and files with a bad header are removed.
void DiskPrefixStore::scan_folder() {
  std::vector<std::pair<fs::file_time_type, std::pair<BlockHash, int64_t>>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder_, ec)) {
    const fs::path path = e.path();
    if (path.extension() == ".tmp") {
      fs::remove(path, ec);
      continue;
    }
    const auto hash = hash_of_name(path);
    if (!hash) continue;  // not ours
    std::FILE* f = std::fopen(path.c_str(), "rb");
    const bool ok = f && read_header(path, options_.fingerprint, *hash, f);
    if (f) std::fclose(f);
    if (!ok) {
      log::warn("disk prefix cache: removing {} (truncated, or not a block of this model)", path.string());
      fs::remove(path, ec);
      ++stats_.rejected;
      continue;
    }
    found.push_back({e.last_write_time(ec), {*hash, static_cast<int64_t>(e.file_size(ec))}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::lock_guard lock(mutex_);
  for (const auto& [time, entry] : found) index_locked(entry.first, entry.second);
  evict_locked();
}

bool DiskPrefixStore::contains(BlockHash hash) const {
  std::lock_guard lock(mutex_);
  return index_.count(hash) > 0 || queued_.count(hash) > 0;
}

bool DiskPrefixStore::put(BlockHash hash, std::vector<std::byte> payload, bool wait_for_room) {
  {
    std::unique_lock lock(mutex_);
    if (index_.count(hash) || queued_.count(hash)) return true;
    const auto bytes = static_cast<int64_t>(payload.size() + sizeof(FileHeader));
    if (wait_for_room && bytes <= options_.max_bytes)
      queue_changed_.wait(lock, [&] { return queue_.empty() || queued_bytes_ + payload.size() <= options_.max_queued_bytes; });
    if (stopping_ || bytes > options_.max_bytes ||
        (!queue_.empty() && queued_bytes_ + payload.size() > options_.max_queued_bytes)) {
      ++stats_.dropped;
      return false;
    }
    queued_bytes_ += payload.size();
    queued_.insert(hash);
    queue_.emplace_back(hash, std::move(payload));
  }
  queue_changed_.notify_all();
  return true;
}

std::optional<std::vector<std::byte>> DiskPrefixStore::get(BlockHash hash) {
  {
    std::lock_guard lock(mutex_);
    if (queued_.count(hash)) {  // evicted moments ago and not yet written
      for (const auto& [h, payload] : queue_)
        if (h == hash) {
          ++stats_.hits;
          return payload;
        }
    }
    auto it = index_.find(hash);
    if (it == index_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  const std::string path = file_of(hash);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::optional<std::vector<std::byte>> payload;
  if (f) {
    if (const auto header = read_header(path, options_.fingerprint, hash, f)) {
      std::vector<std::byte> bytes(header->payload_bytes);
      if (std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
          hash64(bytes.data(), bytes.size()) == header->checksum)
        payload = std::move(bytes);
    }
    std::fclose(f);
  }
  std::lock_guard lock(mutex_);
  if (payload) {
    ++stats_.hits;
    return payload;
  }
  if (index_.count(hash)) {  // not evicted by the writer meanwhile: the file itself is bad
    log::warn("disk prefix cache: removing {} (corrupt, truncated or foreign)", path);
    remove_locked(hash);
    ++stats_.rejected;
  }
  ++stats_.misses;
  return std::nullopt;
}

void DiskPrefixStore::flush() {
  std::unique_lock lock(mutex_);
  queue_changed_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

DiskPrefixStats DiskPrefixStore::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void DiskPrefixStore::run_writer() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything written
    auto [hash, payload] = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    write_file(hash, payload);
    lock.lock();
    writing_ = false;
    queued_.erase(hash);
    queued_bytes_ -= payload.size();
    queue_changed_.notify_all();
  }
}

// Temp file, then rename: a reader (or a restarted server) sees the whole file or none.
void DiskPrefixStore::write_file(BlockHash hash, const std::vector<std::byte>& payload) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.fingerprint = options_.fingerprint;
  h.block_hash = hash;
  h.payload_bytes = payload.size();
  h.checksum = hash64(payload.data(), payload.size());
  const std::string path = file_of(hash), tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  bool ok = f && std::fwrite(&h, sizeof h, 1, f) == 1 &&
            std::fwrite(payload.data(), 1, payload.size(), f) == payload.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    log::warn("disk prefix cache: cannot write {}{}", path, ec ? ": " + ec.message() : std::string());
    fs::remove(tmp, ec);
    std::lock_guard lock(mutex_);
    ++stats_.dropped;
    return;
  }
  std::lock_guard lock(mutex_);
  index_locked(hash, static_cast<int64_t>(sizeof h + payload.size()));
  ++stats_.writes;
  stats_.bytes_written += sizeof h + payload.size();
  evict_locked();
}

void DiskPrefixStore::index_locked(BlockHash hash, int64_t bytes) {
  if (index_.count(hash)) return;
  index_[hash] = Entry{bytes, lru_.insert(lru_.end(), hash)};
  stats_.bytes_on_disk += bytes;
  ++stats_.files;
}

void DiskPrefixStore::remove_locked(BlockHash hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  std::error_code ec;
  fs::remove(file_of(hash), ec);
  stats_.bytes_on_disk -= it->second.bytes;
  --stats_.files;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

void DiskPrefixStore::evict_locked() {
  while (stats_.bytes_on_disk > options_.max_bytes && !lru_.empty()) {
    remove_locked(lru_.front());
    ++stats_.evictions;
  }
}

}  // namespace tachyon::kv
