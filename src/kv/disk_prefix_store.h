// The disk tier of the prefix cache: KV blocks the memory pool evicts are written to files
// named by their hash chain (prefix_hash.h), under a folder named by the fingerprint of
// everything that decides a block's bytes (the weights, the KV storage format and layout, the
// backend); a prefix lookup that misses in memory reads them back, also after a restart.
//
//   DIR/<fingerprint, 16 hex>/<block hash, 16 hex>.kvblock
//     header (48 bytes): magic "TKVBLK1\0", version, fingerprint, block hash, payload bytes,
//                        payload checksum (base/hash64.h)
//     payload: whatever KvCache::block_payload wrote (the block's K/V in the stored format,
//              every layer, and a hybrid model's state snapshot when the block has one)
//
// Files are written by one background thread from a bounded queue (a block that does not fit
// the queue is dropped, never waited for: eviction happens inside an engine step), each to a
// temporary name then renamed, so a file is whole or absent. The folder is kept under
// `max_bytes`, least recently used (written or read) files removed first. A file that is
// truncated, fails its checksum, or names another fingerprint or hash is removed when found
// (at start-up by its header, on read by its checksum) and never loaded.
//
// Thread safety: every call may come from any thread.
//
//   DiskPrefixStore disk({.dir = "/var/cache/tachyon", .max_bytes = 8 << 30, .fingerprint = fp});
//   disk.put(hash, std::move(payload));            // queued; written in the background
//   if (auto payload = disk.get(hash)) restore(*payload);
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/block_pool.h"

namespace tachyon::kv {

struct DiskPrefixStats {
  uint64_t hits = 0;          // blocks read back
  uint64_t misses = 0;        // lookups of a hash the tier does not have
  uint64_t writes = 0;        // files written
  uint64_t bytes_written = 0;
  uint64_t evictions = 0;     // files removed to stay under max_bytes
  uint64_t rejected = 0;      // files removed as corrupt, truncated or foreign
  uint64_t dropped = 0;       // blocks not written because the queue was full
  int64_t bytes_on_disk = 0;
  int64_t files = 0;
};

class DiskPrefixStore {
 public:
  struct Options {
    std::string dir;                            // created if missing
    int64_t max_bytes = 0;                      // > 0
    uint64_t fingerprint = 0;                   // the model's (weights, KV format, layout, backend)
    size_t max_queued_bytes = size_t{256} << 20;  // payloads waiting for the writer
  };
  explicit DiskPrefixStore(Options options);  // throws Error when the folder cannot be made
  ~DiskPrefixStore();                         // writes what is queued, then stops
  DiskPrefixStore(const DiskPrefixStore&) = delete;
  DiskPrefixStore& operator=(const DiskPrefixStore&) = delete;

  // On disk or queued for it.
  bool contains(BlockHash hash) const;
  // Queues the block for writing; false (and counted as dropped) when the queue is full (unless
  // `wait_for_room`: then it waits for the writer) or the payload alone exceeds max_bytes. A
  // hash already stored or queued is not written again.
  bool put(BlockHash hash, std::vector<std::byte> payload, bool wait_for_room = false);
  // The payload, checked; nullopt when absent or bad (a bad file is removed).
  std::optional<std::vector<std::byte>> get(BlockHash hash);
  // Waits until every queued block is written.
  void flush();

  DiskPrefixStats stats() const;
  const std::string& folder() const { return folder_; }
  int64_t max_bytes() const { return options_.max_bytes; }
  std::string file_of(BlockHash hash) const;

 private:
  struct Entry {
    int64_t bytes = 0;
    std::list<BlockHash>::iterator lru;
  };
  void scan_folder();
  void run_writer();
  void write_file(BlockHash hash, const std::vector<std::byte>& payload);
  void index_locked(BlockHash hash, int64_t bytes);
  void remove_locked(BlockHash hash);
  void evict_locked();

  Options options_;
  std::string folder_;
  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<std::pair<BlockHash, std::vector<std::byte>>> queue_;
  std::unordered_set<BlockHash> queued_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  std::unordered_map<BlockHash, Entry> index_;
  std::list<BlockHash> lru_;  // front: least recently used
  DiskPrefixStats stats_;
  std::thread writer_;
};

}  // namespace tachyon::kv
