// The disk tier of the prefix cache: files survive a new store on the same folder (a restart),
// are kept under their byte budget least recently used first, and a corrupt, truncated or
// foreign file is removed and never returned.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kv/disk_prefix_store.h"

namespace tachyon::kv {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tachyon_disk_prefix_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<std::byte> payload(size_t n, int seed) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(seed) * 7) & 0xff);
  return p;
}

DiskPrefixStore::Options options(const TempDir& dir, uint64_t fingerprint = 0x1234, int64_t max_bytes = 1 << 20) {
  return {.dir = dir.path.string(), .max_bytes = max_bytes, .fingerprint = fingerprint};
}

TEST(DiskPrefixStore, BlocksSurviveARestart) {
  TempDir dir;
  {
    DiskPrefixStore store(options(dir));
    EXPECT_TRUE(store.put(11, payload(1000, 1)));
    EXPECT_TRUE(store.contains(11));  // queued counts
    store.flush();
    EXPECT_TRUE(fs::exists(store.file_of(11)));
    EXPECT_EQ(store.stats().writes, 1u);
    EXPECT_EQ(store.get(11), payload(1000, 1));
  }
  DiskPrefixStore again(options(dir));
  EXPECT_EQ(again.stats().files, 1);
  EXPECT_TRUE(again.contains(11));
  EXPECT_EQ(again.get(11), payload(1000, 1));
  EXPECT_FALSE(again.get(12).has_value());
  const DiskPrefixStats s = again.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.rejected, 0u);
}

TEST(DiskPrefixStore, NoTemporaryFileIsLeftAndLeftoversAreRemoved) {
  TempDir dir;
  std::string folder;
  {
    DiskPrefixStore store(options(dir));
    folder = store.folder();
    store.put(1, payload(100, 1));
    store.flush();
    for (const auto& e : fs::directory_iterator(folder)) EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  std::ofstream(fs::path(folder) / "0000000000000002.kvblock.tmp") << "half a write";
  DiskPrefixStore again(options(dir));
  EXPECT_FALSE(fs::exists(fs::path(folder) / "0000000000000002.kvblock.tmp"));
  EXPECT_TRUE(again.contains(1));
}

TEST(DiskPrefixStore, AFlippedByteIsDetectedAndTheFileRemoved) {
  TempDir dir;
  DiskPrefixStore store(options(dir));
  store.put(7, payload(4096, 3));
  store.flush();
  {
    std::fstream f(store.file_of(7), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(48 + 1000);  // inside the payload, past the 48-byte header
    char c = 0;
    f.read(&c, 1);
    f.seekp(48 + 1000);
    c = static_cast<char>(c ^ 0x01);
    f.write(&c, 1);
  }
  EXPECT_FALSE(store.get(7).has_value());
  EXPECT_FALSE(fs::exists(store.file_of(7)));
  EXPECT_FALSE(store.contains(7));
  EXPECT_EQ(store.stats().rejected, 1u);
  EXPECT_EQ(store.stats().files, 0);
}

TEST(DiskPrefixStore, ATruncatedFileIsRemovedOnReadAndAtStartUp) {
  TempDir dir;
  std::string a, b;
  {
    DiskPrefixStore store(options(dir));
    store.put(1, payload(4096, 1));
    store.put(2, payload(4096, 2));
    store.flush();
    a = store.file_of(1);
    b = store.file_of(2);
    fs::resize_file(a, 3000);
    EXPECT_FALSE(store.get(1).has_value());  // read while running
    EXPECT_FALSE(fs::exists(a));
    EXPECT_EQ(store.stats().rejected, 1u);
  }
  fs::resize_file(b, 48 + 100);
  DiskPrefixStore again(options(dir));  // found by its header at start-up
  EXPECT_FALSE(fs::exists(b));
  EXPECT_FALSE(again.contains(2));
  EXPECT_EQ(again.stats().rejected, 1u);
}

TEST(DiskPrefixStore, AFileOfAnotherFingerprintIsIgnoredAndRemoved) {
  TempDir dir;
  std::string theirs;
  {
    DiskPrefixStore other(options(dir, /*fingerprint=*/0xaaaa));
    other.put(5, payload(512, 5));
    other.flush();
    theirs = other.file_of(5);
  }
  DiskPrefixStore mine(options(dir, /*fingerprint=*/0xbbbb));
  EXPECT_NE(mine.folder(), fs::path(theirs).parent_path().string());  // each model has its own folder
  EXPECT_FALSE(mine.contains(5));
  // The other model's file copied under this model's folder (a renamed folder, a stray copy):
  // its header names the other fingerprint, so it is removed at start-up and never loaded.
  fs::copy_file(theirs, mine.file_of(5));
  DiskPrefixStore restarted(options(dir, /*fingerprint=*/0xbbbb));
  EXPECT_FALSE(restarted.contains(5));
  EXPECT_FALSE(restarted.get(5).has_value());
  EXPECT_FALSE(fs::exists(restarted.file_of(5)));
  EXPECT_EQ(restarted.stats().rejected, 1u);
  EXPECT_TRUE(fs::exists(theirs));  // the other model's own folder is left alone
  // A file naming another block hash than its name says is removed the same way.
  fs::copy_file(theirs, fs::path(theirs).parent_path() / "0000000000000006.kvblock");
  DiskPrefixStore other_again(options(dir, /*fingerprint=*/0xaaaa));
  EXPECT_TRUE(other_again.contains(5));
  EXPECT_FALSE(other_again.contains(6));
  EXPECT_EQ(other_again.stats().rejected, 1u);
}

TEST(DiskPrefixStore, LeastRecentlyUsedFilesGoFirstWithinTheBudget) {
  TempDir dir;
  const size_t n = 1000;                      // + 48 bytes of header per file
  DiskPrefixStore store(options(dir, 0x1234, /*max_bytes=*/3 * 1048 + 10));
  for (BlockHash h : {1, 2, 3}) {
    store.put(h, payload(n, static_cast<int>(h)));
    store.flush();
  }
  ASSERT_TRUE(store.get(1).has_value());  // 1 is now the most recently used; 2 the least
  store.put(4, payload(n, 4));
  store.flush();
  EXPECT_FALSE(store.contains(2));
  EXPECT_FALSE(fs::exists(store.file_of(2)));
  for (BlockHash h : {1, 3, 4}) EXPECT_TRUE(store.contains(h)) << h;
  const DiskPrefixStats s = store.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(s.bytes_on_disk, 3 * 1048);
}

TEST(DiskPrefixStore, APayloadLargerThanTheBudgetIsDropped) {
  TempDir dir;
  DiskPrefixStore store(options(dir, 0x1234, /*max_bytes=*/1000));
  EXPECT_FALSE(store.put(1, payload(2000, 1)));
  EXPECT_FALSE(store.contains(1));
  EXPECT_EQ(store.stats().dropped, 1u);
}

}  // namespace
}  // namespace tachyon::kv
