// The prefill matmul on mma.sync (M > 64 where the wgmma kernel does not run: devices other than
// sm_90a, weights without a core-matrix copy, TACHYON_WGMMA=0), and x's conversion to A fragments,
// which the 17-64-row decode kernels read too.
#include "kernels/cuda/matmul_prefill.cuh"

#include <type_traits>

namespace tachyon::kernels::cuda {
namespace {

// ---- tiled: M > 64 ------------------------------------------------------------------------
constexpr int kTileN = 16;   // n-tiles (8 columns) per CTA
constexpr int kStageUnitsA = kTileM * kStageKt * 32;        // uint4 per stage
constexpr int kStageUnitsB = kTileN * (kStageKt / 2) * 32;  // uint4 per stage
// Pipeline stages: 4 (128 KB) where the GPU's shared memory per block holds them (Hopper, A100),
// else 3 (96 KB: sm_86 and sm_89 hold 99 KB). Same bits: the stages only stage loads.
constexpr size_t tiled_smem_bytes(int stages) {
  return static_cast<size_t>(stages) * (kStageUnitsA + kStageUnitsB) * sizeof(uint4);
}

// x [M, K] f32 -> A fragments [m_tiles][k_tiles][32 lanes] x uint4, zero-padded.
__global__ void to_a_fragments_kernel(const float* __restrict__ x, int M, int K, int64_t m_tiles, int k_tiles,
                                      uint4* __restrict__ xa) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m_tiles * k_tiles * 32) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t unit = i / 32;
  const int mt = static_cast<int>(unit / k_tiles), kt = static_cast<int>(unit % k_tiles);
  uint32_t a[4];
  load_a_fragment(x, M, K, 16 * mt, 16 * kt, lane, a);
  xa[i] = make_uint4(a[0], a[1], a[2], a[3]);
}

template <int kStages>
__global__ void __launch_bounds__(256, 1) matmul_tiled_kernel(const uint4* __restrict__ xa, int M, int k_tiles,
                                                              const uint4* __restrict__ w, int N,
                                                              const float* __restrict__ bias, float* __restrict__ out) {
  pdl_enter();
  extern __shared__ uint4 smem[];
  uint4* As = smem;                           // [kStages][kTileM][kStageKt][32]
  uint4* Bs = smem + kStages * kStageUnitsA;  // [kStages][kTileN][kStageKt / 2][32]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile: 4 m-tiles x 4 n-tiles
  const int mt0 = blockIdx.x * kTileM, nt0 = blockIdx.y * kTileN;
  const int kp_count = k_tiles / 2, num_stages = k_tiles / kStageKt;

  auto load_stage = [&](int slot, int ks) {
#pragma unroll
    for (int i = 0; i < kStageUnitsA / 256; ++i) {
      const int c = tid + 256 * i, mt = c / (kStageKt * 32), rem = c % (kStageKt * 32);
      cp_async16(As + slot * kStageUnitsA + c,
                 xa + (static_cast<int64_t>(mt0 + mt) * k_tiles + ks * kStageKt) * 32 + rem);
    }
#pragma unroll
    for (int i = 0; i < kStageUnitsB / 256; ++i) {
      const int c = tid + 256 * i, nt = c / (kStageKt / 2 * 32), rem = c % (kStageKt / 2 * 32);
      cp_async16(Bs + slot * kStageUnitsB + c,
                 w + (static_cast<int64_t>(nt0 + nt) * kp_count + ks * (kStageKt / 2)) * 32 + rem);
    }
  };

  float acc[4][4][4], total[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = total[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_stages) load_stage(s, s);
    cp_async_commit();
  }
  for (int ks = 0; ks < num_stages; ++ks) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (ks + kStages - 1 < num_stages) load_stage((ks + kStages - 1) % kStages, ks + kStages - 1);
    cp_async_commit();
    const int slot = ks % kStages;
    const uint4* a_s = As + slot * kStageUnitsA;
    const uint2* b_s = reinterpret_cast<const uint2*>(Bs + slot * kStageUnitsB);
#pragma unroll
    for (int kt = 0; kt < kStageKt; ++kt) {
      uint32_t a[4][4];
      uint2 b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v = a_s[((wm * 4 + i) * kStageKt + kt) * 32 + lane];
        a[i][0] = v.x, a[i][1] = v.y, a[i][2] = v.z, a[i][3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = b_s[(((wn * 4 + j) * (kStageKt / 2) + kt / 2) * 32 + lane) * 2 + kt % 2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16(acc[i][j], a[i], b[j].x, b[j].y);
    }
    if ((ks + 1) % kStagesPerSegment == 0 || ks + 1 == num_stages) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) total[i][j][r] += acc[i][j][r], acc[i][j][r] = 0.f;
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = (mt0 + wm * 4 + i) * 16 + g + 8 * (r / 2), col = (nt0 + wn * 4 + j) * 8 + 2 * c + r % 2;
        if (row < M && col < N) out[static_cast<int64_t>(row) * N + col] = finish(total[i][j][r], bias, col);
      }
}

}  // namespace

void to_a_fragments(const float* x, int M, int K, int64_t m_tiles, int k_tiles, uint4* xa, cudaStream_t stream) {
  const int64_t units = m_tiles * k_tiles * 32;
  launch(to_a_fragments_kernel, static_cast<unsigned>(ceil_div(units, 256)), 256, 0, stream, x, M, K, m_tiles, k_tiles,
         xa);
}

void matmul_tiled(const uint4* xa, int M, int64_t m_tiles, int k_tiles, const uint4* w, int N, const float* bias,
                  float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(m_tiles / kTileM), static_cast<unsigned>(round_up(N, kMmaRowPad) / 128));
  // Each variant's shared memory is raised the first time it runs (a GPU refuses more than it has).
  const auto go = [&](auto stages) {
    constexpr int kStages = decltype(stages)::value;
    static const bool configured = [] {
      TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_tiled_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(tiled_smem_bytes(kStages))));
      return true;
    }();
    (void)configured;
    launch(matmul_tiled_kernel<kStages>, grid, 256, tiled_smem_bytes(kStages), stream, xa, M, k_tiles, w, N, bias, out);
  };
  if (tiled_smem_bytes(4) <= device_arch().smem_per_block) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 3>{});
}

}  // namespace tachyon::kernels::cuda
