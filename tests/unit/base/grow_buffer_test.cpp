// Grow-only buffers (base/grow_buffer.h: the CUDA backend's workspaces and staging, the model's
// activation workspace), with a counting allocator: an allocation that throws (out of device
// memory) must leave the buffer empty, so that the next use allocates again instead of handing
// out, or freeing a second time, the buffer released before the failed allocation.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "base/grow_buffer.h"

namespace tachyon {
namespace {

// Hands out fake addresses, records what is live, and fails the allocations it is told to.
struct FakeHeap {
  std::map<char*, size_t> live;
  char* next = reinterpret_cast<char*>(0x1000);
  size_t fail_above = SIZE_MAX;  // an allocation larger than this throws
  int double_frees = 0;

  char* acquire(size_t n) {
    if (n > fail_above) throw std::runtime_error("out of memory");
    char* p = next;
    next += n + 64;
    live[p] = n;
    return p;
  }
  void release(char* p) {
    if (live.erase(p) == 0) ++double_frees;
  }
  char* grow(char*& buffer, size_t& capacity, size_t need) {
    return grow_buffer(
        buffer, capacity, need, need * 2, [&](char* p) { release(p); }, [&](size_t n) { return acquire(n); });
  }
};

TEST(GrowBuffer, GrowsOnlyWhenNeededAndReleasesTheOldBuffer) {
  FakeHeap heap;
  char* buffer = nullptr;
  size_t capacity = 0;
  char* first = heap.grow(buffer, capacity, 100);
  EXPECT_EQ(capacity, 200u);
  EXPECT_EQ(heap.grow(buffer, capacity, 150), first);  // fits: the same buffer
  char* second = heap.grow(buffer, capacity, 300);
  EXPECT_NE(second, first);
  EXPECT_EQ(capacity, 600u);
  EXPECT_EQ(heap.live.size(), 1u);
  EXPECT_EQ(heap.live.count(second), 1u);
}

TEST(GrowBuffer, AFailedAllocationLeavesAnEmptyBufferNotTheReleasedOne) {
  FakeHeap heap;
  char* buffer = nullptr;
  size_t capacity = 0;
  char* first = heap.grow(buffer, capacity, 100);
  heap.fail_above = 1000;
  EXPECT_THROW(heap.grow(buffer, capacity, 5000), std::runtime_error);
  // The old buffer was released to make room; nothing may still point at it.
  EXPECT_EQ(buffer, nullptr);
  EXPECT_EQ(capacity, 0u);
  EXPECT_TRUE(heap.live.empty());
  // A smaller request afterwards gets fresh memory, not the released buffer with its old capacity.
  char* again = heap.grow(buffer, capacity, 50);
  EXPECT_NE(again, nullptr);
  EXPECT_EQ(heap.live.count(again), 1u);
  EXPECT_NE(again, first);
  heap.release(buffer);
  EXPECT_EQ(heap.double_frees, 0);
}

}  // namespace
}  // namespace tachyon
