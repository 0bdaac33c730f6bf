// A KV pool sized for the machine costs resident memory only as it is used: creating it and
// reserving blocks writes nothing, so the process's RSS grows with written tokens, not with
// the pool.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "../runs_out_backend.h"

namespace tachyon::kv {
namespace {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(KvPoolMemory, ALargePoolIsNotResidentUntilWritten) {
  auto backend = kernels::make_backend("cpu");
  // 6 layers x 2 KV heads x 64 x 4096 blocks of 16: 48 MiB of K and V per layer, 576 MiB in all.
  const KvLayout layout{.num_layers = 6, .num_kv_heads = 2, .head_dim = 64, .block_size = 16, .num_blocks = 4096};
  const int64_t before = resident_bytes();
  KvCache kv(*backend, layout);
  const SeqId seq = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(seq, 1000 * 16));
  const int64_t grown = resident_bytes() - before;
  EXPECT_LT(grown, int64_t{16} << 20) << "the pool's pages were touched at allocation";
  // Writing one block of one layer makes (about) that much resident, not the pool.
  const kernels::PagedKv layer = kv.layer(0);
  const size_t block_floats = static_cast<size_t>(16 * 2 * 64);
  for (size_t i = 0; i < block_floats; ++i) static_cast<float*>(layer.k)[i] = 1.f;  // the layout is f32
  EXPECT_LT(resident_bytes() - before, int64_t{16} << 20);
}

using test_support::RunsOutBackend;

// A KV cache too large for the device (the PFlash scorer's cache for a long prompt) runs out of
// memory after some of its layers were allocated: the failure must hand them back, or every
// such prompt leaks device memory until nothing fits.
TEST(KvPoolMemory, ACacheThatRunsOutOfMemoryPartWayFreesWhatItTook) {
  const KvLayout layout{.num_layers = 6, .num_kv_heads = 2, .head_dim = 64, .block_size = 16, .num_blocks = 64};
  for (int64_t fail_at : {0, 1, 5, 11}) {  // 12 allocations: K and V of 6 layers
    RunsOutBackend backend;
    backend.fail_at = fail_at;
    EXPECT_THROW(KvCache(backend, layout), Error) << "allocation " << fail_at;
    EXPECT_EQ(backend.live, 0) << "allocation " << fail_at;
  }
  RunsOutBackend backend;
  { KvCache kv(backend, layout); }
  EXPECT_EQ(backend.live, 0);
}

}  // namespace
}  // namespace tachyon::kv
