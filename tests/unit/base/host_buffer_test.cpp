// Backend buffers in host memory (src/base/host_buffer.h): aligned, writable to their last byte,
// and from kMappedBufferBytes up a mapping of their own that freeing returns, so that freeing
// one leaves glibc's mmap threshold where it was (a large malloc right after still gets a
// mapping of its own instead of heap memory).
#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "base/host_buffer.h"

// Sanitizers replace glibc's malloc with their own allocator: its threshold is not there to test.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TACHYON_GLIBC_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TACHYON_GLIBC_MALLOC 0
#endif
#endif
#ifndef TACHYON_GLIBC_MALLOC
#define TACHYON_GLIBC_MALLOC 1
#endif

namespace tachyon {
namespace {

// Whether `p` lies in a mapping of this process that starts within a page of it.
bool starts_a_mapping(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    const uintptr_t start = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    if (address >= start && address - start < 4096) return true;
  }
  return false;
}

TEST(HostBuffer, AlignedAndWritableWhateverTheSize) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kMappedBufferBytes - 1, kMappedBufferBytes,
                       size_t{3} << 20}) {
    auto* p = static_cast<unsigned char*>(host_buffer_allocate(bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    EXPECT_EQ(p[bytes - 1], 0xab);
    host_buffer_free(p);
  }
  host_buffer_free(nullptr);
}

TEST(HostBuffer, LargeBuffersAreMappedAndFreeingThemLeavesMallocsThresholdAlone) {
  // 8 MiB: glibc's default threshold (128 KiB) would map it too, and freeing that mapping
  // through free() would raise the threshold to 8 MiB.
  if (!TACHYON_GLIBC_MALLOC) GTEST_SKIP() << "a sanitizer's allocator stands in for glibc's malloc";
  void* big = host_buffer_allocate(size_t{8} << 20);
  EXPECT_TRUE(starts_a_mapping(big));
  host_buffer_free(big);
  // A 4 MiB malloc now still gets a mapping of its own (it would come from the heap had the
  // threshold been raised).
  void* after = std::malloc(size_t{4} << 20);
  ASSERT_NE(after, nullptr);
  EXPECT_TRUE(starts_a_mapping(after)) << "malloc's mmap threshold was raised";
  std::free(after);
}

}  // namespace
}  // namespace tachyon
