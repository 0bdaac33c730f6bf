// Buffers of a backend in host memory (weights, KV pools, step workspaces): 64-byte aligned;
// from kMappedBufferBytes up mapped straight from the kernel and unmapped when freed, never
// through malloc.
//
// Why not malloc: glibc serves a large malloc with its own mapping too, but freeing one raises
// its mmap threshold to that size (up to 32 MiB) for the whole process. Once a step workspace had
// grown (its old buffer freed), every later allocation up to that size, the workspace's next
// growth and the transient vectors of every thread, came from the malloc heaps, whose freed holes
// stay resident: a 10-minute soak's engine heap kept growing after warm-up (+2.9 MiB;
// bench/results/reliability3-24ba4e0.md). Backend buffers are few and long-lived, so a system call
// for each costs nothing.
//
//   void* p = host_buffer_allocate(bytes);   // throws std::bad_alloc when the host has no memory
//   host_buffer_free(p);
#pragma once

#include <cstddef>

namespace tachyon {

inline constexpr size_t kMappedBufferBytes = size_t{256} << 10;

void* host_buffer_allocate(size_t bytes);
void host_buffer_free(void* buffer);  // null: nothing

}  // namespace tachyon
