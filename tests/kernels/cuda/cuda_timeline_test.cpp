// The step timeline of lab builds (-DTACHYON_TIMELINE=1; skipped in every other build): one
// streaming matmul leaves, per CTA, one pdl_wait record whose wait returned after it was called,
// a staged mark after that return and a done mark after the staged one (what
// bench/cuda/decode_timeline.py reads).
#include <map>

#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/step_timeline.h"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

TEST_F(CudaKernels, StepTimelineRecordsEveryStreamingCtaWaitAndItsMarks) {
  TACHYON_SKIP_WITHOUT_HOPPER_KERNELS();
  if (!cuda::timeline_built()) GTEST_SKIP() << "not a TACHYON_TIMELINE build";
  const int64_t n = 8200, k = 1100;
  const auto wb = to_bf16(random_vec(static_cast<size_t>(n * k), rng, 0.05f));
  const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, n, k});
  float* x = upload(random_vec(static_cast<size_t>(k), rng));
  float* out = poisoned(static_cast<size_t>(n));
  cuda::set_decode_matmul_variant(cuda::kDecodeStream);
  cuda::timeline_start(1u << 16);
  gpu->matmul(x, 1, w, nullptr, out);
  const auto records = cuda::timeline_stop();
  cuda::set_decode_matmul_variant(cuda::kDecodeAuto);

  ASSERT_FALSE(records.empty());
  const uint32_t grid = records.front().grid;
  std::map<uint32_t, uint64_t> returned;              // block -> its wait's return
  std::map<uint32_t, std::map<uint32_t, uint64_t>> marks;  // block -> kind -> time
  for (const auto& r : records) {
    EXPECT_EQ(grid, r.grid);
    EXPECT_EQ(288u, r.threads);
    ASSERT_LT(r.block, grid);
    if (r.kind == 0) {
      EXPECT_LE(r.t_call, r.t_return);
      EXPECT_TRUE(returned.emplace(r.block, r.t_return).second) << "two waits of block " << r.block;
    } else {
      EXPECT_EQ(r.t_call, r.t_return);
      EXPECT_TRUE(marks[r.block].emplace(r.kind, r.t_call).second) << "mark " << r.kind << " twice, block " << r.block;
    }
  }
  EXPECT_EQ(grid, returned.size());
  EXPECT_EQ(grid, marks.size());
  for (const auto& [block, kinds] : marks) {
    ASSERT_EQ(2u, kinds.size()) << "block " << block;
    EXPECT_LE(returned[block], kinds.at(cuda::kTimelineStaged)) << "block " << block;
    EXPECT_LE(kinds.at(cuda::kTimelineStaged), kinds.at(cuda::kTimelineDone)) << "block " << block;
  }
}

}  // namespace
}  // namespace tachyon::kernels
