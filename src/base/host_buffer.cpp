#include "base/host_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace tachyon {

namespace {

// Each buffer is preceded by one 64-byte header (the alignment is kept) saying how it was made.
constexpr size_t kHeader = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr uint64_t kMapped = 0x6d61707065644255;  // "UBdeppam"
constexpr uint64_t kMalloced = 0x6d616c6c6f634255;

struct Header {
  uint64_t kind;
  size_t mapped_bytes;  // the whole mapping, header included (kMapped)
};

}  // namespace

void* host_buffer_allocate(size_t bytes) {
  const size_t total = kHeader + (bytes + 63) / 64 * 64;
  void* base = nullptr;
  Header header{kMalloced, 0};
  if (bytes >= kMappedBufferBytes) {
    base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    // Transparent huge pages where the host allows them only on request (Debian's default
    // "madvise"): a decode step reads a KV head's records 2 KB apart across a pool of hundreds of
    // MB, two keys per 4 KB page. Measured: 5-8% off the attention of a decode step at 8k context
    // (kv_decode_bench, bf16 KV, 2 threads, AMD EPYC VM: 60-62 against 63-67 ms).
    if (total >= kHugePageBytes) ::madvise(base, total, MADV_HUGEPAGE);  // advice: failure changes nothing
    header = {kMapped, total};
  } else {
    base = std::aligned_alloc(64, total);
    if (!base) throw std::bad_alloc();
  }
  *static_cast<Header*>(base) = header;
  return static_cast<char*>(base) + kHeader;
}

void host_buffer_free(void* buffer) {
  if (!buffer) return;
  void* base = static_cast<char*>(buffer) - kHeader;
  const Header header = *static_cast<const Header*>(base);
  if (header.kind == kMapped) {
    ::munmap(base, header.mapped_bytes);
  } else {
    std::free(base);
  }
}

}  // namespace tachyon
