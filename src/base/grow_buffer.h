// Grow-only buffers (device workspaces, pinned staging): replaced by a larger one when a request
// needs more. The old buffer is released before the new one is taken (device memory is what
// runs out), and the pointer and capacity are cleared in between: an allocation that throws
// (out of memory under a large prompt) leaves an empty buffer, never a released pointer still
// paired with its capacity, which the next call would hand out again (kernels writing freed
// memory) and the destructor would release a second time.
#pragma once

#include <cstddef>

namespace tachyon {

// Makes `buffer` hold at least `need`: if it holds less, releases it and acquires `new_capacity`
// (>= need). Capacities are in the caller's unit (bytes or elements), acquire(new_capacity)
// returns the new buffer or throws; release(ptr) frees. Returns the buffer.
template <class T, class Release, class Acquire>
T* grow_buffer(T*& buffer, size_t& capacity, size_t need, size_t new_capacity, Release&& release,
               Acquire&& acquire) {
  if (need <= capacity) return buffer;  // capacity is 0 whenever buffer is null
  T* old = buffer;
  buffer = nullptr;
  capacity = 0;
  if (old) release(old);
  buffer = acquire(new_capacity);
  capacity = new_capacity;
  return buffer;
}

}  // namespace tachyon
