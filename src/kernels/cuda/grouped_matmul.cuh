// Grouped matmul over bf16 fragment-packed weights: many small matmuls in one launch, each
// group (an MoE expert, an MLA head) with its own weight and its own rows. It follows the
// canonical reduction order of common.cuh (512-k segments, one m16n8k16 chain each, segment
// sums in order, bias last), so a row's output bits equal what `matmul` gives it alone,
// whatever other rows or groups share the launch.
//
// Work comes as tiles of at most 16 entries of one group (an m-tile): a warp computes one
// 8-column n-tile of one tile over all of k. The tile list may be written by an earlier
// kernel (MoE routing is on the device): CTAs past `*num_tiles` exit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tachyon::kernels::cuda {

constexpr int kGroupTileRows = 16;

// Entries [begin, begin + count) of `group` (count <= kGroupTileRows).
struct GroupTile {
  int32_t group, begin, count, pad;
};

struct GroupedMatmul {
  // Input row of entry e: x + row(e)·x_row_stride + group·x_group_stride, row(e) = x_rows[e]
  // (or e when x_rows is null); k floats.
  const float* x = nullptr;
  int64_t x_row_stride = 0, x_group_stride = 0;
  const int32_t* x_rows = nullptr;
  // Weight of a group: w_table[group] when set, else w + group·w_group_stride (bytes), each a
  // fragment-packed [n, k] matrix (the group's rows of a larger one when strided: n % 8 == 0).
  const void* const* w_table = nullptr;
  const void* w = nullptr;
  int64_t w_group_stride = 0;
  const float* const* bias_table = nullptr;  // [groups] of [n] f32 (or of [2n] when gated), or null
  int64_t n = 0, k = 0;
  // Output of entry e: out + e·out_row_stride + group·out_group_stride.
  float* out = nullptr;
  int64_t out_row_stride = 0, out_group_stride = 0;
  // Gated (MoE gate_up): the weight has 2n rows, gate then up; the output is act(gate, up):
  // silu(g)·u, or with clamped_swiglu (gpt-oss) min(g, limit), clamp(u, ±limit),
  // (u + 1)·g·sigmoid(alpha·g). n % 8 == 0.
  bool gated = false, clamped_swiglu = false;
  float swiglu_limit = 7.f, swiglu_alpha = 1.702f;
};

#ifdef __CUDACC__
// The gated activation of an MoE expert's gate and up outputs (GroupedMatmul::gated), shared by
// the grouped kernels' epilogue and the streamed experts (moe.cu), so both give the same bits.
__device__ __forceinline__ float moe_gated(float g, float u, bool clamped_swiglu, float limit, float alpha) {
  if (clamped_swiglu) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    return (u + 1.f) * (g * (1.f / (1.f + expf(-(g * alpha)))));
  }
  return g / (1.f + expf(-g)) * u;
}
#endif

// Scratch of the split-K kernel, which decode-sized launches take (at most kGroupedSplitKMaxTiles
// tiles, k over two or more 512-k segments): the segment sums, and one counter per (tile,
// n-group of 4 n-tiles) that must be zero when first used (each launch leaves them zero).
constexpr int64_t kGroupedSplitKMaxTiles = 32;
struct GroupedSplitK {
  float* partial = nullptr;
  unsigned* counters = nullptr;
};
struct GroupedSplitKSize {
  size_t partial_bytes = 0, counters = 0;  // zero: the launch would not split k
};
GroupedSplitKSize grouped_splitk_size(const GroupedMatmul& p, int64_t max_tiles);

// Runs `tiles` (device, max_tiles entries; the first *num_tiles are valid, or all when
// num_tiles is null). With `splitk` (sized by grouped_splitk_size) a decode-sized launch splits
// k over CTAs; the output bits are the same either way.
void grouped_matmul(const GroupedMatmul& p, const GroupTile* tiles, const int32_t* num_tiles, int64_t max_tiles,
                    cudaStream_t stream, const GroupedSplitK* splitk = nullptr);

}  // namespace tachyon::kernels::cuda
