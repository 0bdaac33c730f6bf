// Lab probe for issue 6's prefill GEMM: does a chain of Hopper wgmma instructions give the bits
// of the chain of mma.sync.m16n8k16 that every matmul kernel of the backend computes (the
// canonical order of docs/perf/cuda.md: per 512-k segment, one chain of k16 steps from zero)?
// A wgmma kernel for the tiled (M > 64) matmul can only replace the mma.sync one if it does:
// rows 1-64 run through the skinny mma.sync kernels and a row's bits must not depend on the batch.
//
// One warpgroup (4 warps) multiplies A [64 x K] by B [K x N] for K = 512, N = 8 and 64, three ways:
//   mma   each warp chains mma.sync.m16n8k16 over its 16 rows, k in order from zero
//   rs    wgmma.m64nNk16 with A from registers (the same fragments), B from shared memory
//   ss    wgmma.m64nNk16 with A and B from shared memory
// and prints, for several random inputs, how many outputs differ in bits from `mma` and the
// largest relative difference to a double-precision reference (to show the layouts are right).
// Build: the CMake target wgmma_probe (build/bench/wgmma_probe), or
//   nvcc -std=c++20 -O2 -Isrc -gencode arch=compute_90a,code=sm_90a bench/cuda/wgmma_probe.cu -o wgmma_probe
// Result on the H200 (bench/results/wgmma-bits-probe-03f9424.md): 0 of 73,728 outputs differ, both forms.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "check_cuda.h"
#include "kernels/cuda/mma.cuh"  // mma_bf16: the chain every matmul kernel of the backend computes

namespace {

using tachyon::kernels::cuda::mma_bf16;

constexpr int kM = 64, kK = 512;


__device__ __forceinline__ uint32_t pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) | (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

// Shared-memory matrix descriptor, no swizzle: core matrices of 8 rows x 16 bytes; `lbo` bytes
// between core matrices adjacent in K, `sbo` between those adjacent in M/N.
__device__ __forceinline__ uint64_t descriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return (static_cast<uint64_t>((addr & 0x3FFFF) >> 4)) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// Core-matrix (no swizzle, K-major) byte offset of element (row, k) of a [rows x 16] k16 tile:
// core matrix (row / 8, k / 8) at (k / 8) * 128 + (row / 8) * 256, row r % 8 at 16 * (r % 8).
__device__ __forceinline__ int tile_offset(int row, int k) { return (k / 8) * 128 + (row / 8) * 256 + (row % 8) * 16 + (k % 8) * 2; }

template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int scale_d);
template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <>
__device__ __forceinline__ void wgmma_rs<8>(float (&d)[4], const uint32_t (&a)[4], uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_ss<8>(float (&d)[4], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "r"(scale_d));
}
#define D32(i) "+f"(d[i])
template <>
__device__ __forceinline__ void wgmma_rs<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
      " {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
      : D32(0), D32(1), D32(2), D32(3), D32(4), D32(5), D32(6), D32(7), D32(8), D32(9), D32(10), D32(11), D32(12),
        D32(13), D32(14), D32(15), D32(16), D32(17), D32(18), D32(19), D32(20), D32(21), D32(22), D32(23), D32(24),
        D32(25), D32(26), D32(27), D32(28), D32(29), D32(30), D32(31)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
      " %32, %33, p, 1, 1, 0, 0;\n}\n"
      : D32(0), D32(1), D32(2), D32(3), D32(4), D32(5), D32(6), D32(7), D32(8), D32(9), D32(10), D32(11), D32(12),
        D32(13), D32(14), D32(15), D32(16), D32(17), D32(18), D32(19), D32(20), D32(21), D32(22), D32(23), D32(24),
        D32(25), D32(26), D32(27), D32(28), D32(29), D32(30), D32(31)
      : "l"(a), "l"(b), "r"(scale_d));
}
#undef D32
#endif

// a [64, K] row-major, b [N, K] row-major (B's columns: the weight layout), out [3][64, N].
template <int N>
__global__ void probe(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b, float* __restrict__ out) {
  extern __shared__ __align__(128) unsigned char smem[];
  // Per k16 step: the A tile [64 x 16] (2 KB) and the B tile [N x 16] (N * 32 bytes), core-matrix order.
  constexpr int kSteps = kK / 16, kATile = kM * 32, kBTile = N * 32;
  unsigned char* as = smem;
  unsigned char* bs = smem + kSteps * kATile;
  for (int i = threadIdx.x; i < kSteps * kM * 16; i += blockDim.x) {
    const int s = i / (kM * 16), r = (i / 16) % kM, k = i % 16;
    *reinterpret_cast<__nv_bfloat16*>(as + s * kATile + tile_offset(r, k)) = a[r * kK + s * 16 + k];
  }
  for (int i = threadIdx.x; i < kSteps * N * 16; i += blockDim.x) {
    const int s = i / (N * 16), n = (i / 16) % N, k = i % 16;
    *reinterpret_cast<__nv_bfloat16*>(bs + s * kBTile + tile_offset(n, k)) = b[n * kK + s * 16 + k];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int r0 = 16 * warp + g;
  auto a_frag = [&](int s, uint32_t (&f)[4]) {
    const __nv_bfloat16* p = a + s * 16;
    f[0] = pack2(p[r0 * kK + 2 * t], p[r0 * kK + 2 * t + 1]);
    f[1] = pack2(p[(r0 + 8) * kK + 2 * t], p[(r0 + 8) * kK + 2 * t + 1]);
    f[2] = pack2(p[r0 * kK + 2 * t + 8], p[r0 * kK + 2 * t + 9]);
    f[3] = pack2(p[(r0 + 8) * kK + 2 * t + 8], p[(r0 + 8) * kK + 2 * t + 9]);
  };
  // mma.sync chain, one n8 block at a time.
  for (int nb = 0; nb < N / 8; ++nb) {
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int s = 0; s < kSteps; ++s) {
      uint32_t f[4];
      a_frag(s, f);
      const __nv_bfloat16* q = b + (8 * nb + g) * kK + s * 16;
      mma_bf16(d, f, pack2(q[2 * t], q[2 * t + 1]), pack2(q[2 * t + 8], q[2 * t + 9]));
    }
    float* o = out;
    o[r0 * N + 8 * nb + 2 * t] = d[0];
    o[r0 * N + 8 * nb + 2 * t + 1] = d[1];
    o[(r0 + 8) * N + 8 * nb + 2 * t] = d[2];
    o[(r0 + 8) * N + 8 * nb + 2 * t + 1] = d[3];
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // D of m64nNk16: per warp the mma C layout of each n8 block: d[4 nb .. 4 nb + 3].
  auto store = [&](const float (&d)[N / 2], float* o) {
    for (int nb = 0; nb < N / 8; ++nb) {
      o[r0 * N + 8 * nb + 2 * t] = d[4 * nb];
      o[r0 * N + 8 * nb + 2 * t + 1] = d[4 * nb + 1];
      o[(r0 + 8) * N + 8 * nb + 2 * t] = d[4 * nb + 2];
      o[(r0 + 8) * N + 8 * nb + 2 * t + 1] = d[4 * nb + 3];
    }
  };
  {
    float d[N / 2];
    for (auto& v : d) v = 0.f;
    for (int s = 0; s < kSteps; ++s) {  // one wgmma in flight at a time: its A registers are reused
      uint32_t f[4];
      a_frag(s, f);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
      wgmma_rs<N>(d, f, descriptor(bs + s * kBTile, 128, 256), s > 0);
      asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    store(d, out + kM * N);
  }
  {
    float d[N / 2];
    for (auto& v : d) v = 0.f;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int s = 0; s < kSteps; ++s)  // chained on the same accumulators, as a GEMM main loop issues them
      wgmma_ss<N>(d, descriptor(as + s * kATile, 128, 256), descriptor(bs + s * kBTile, 128, 256), s > 0);
    asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    store(d, out + 2 * kM * N);
  }
#endif
}

template <int N>
void run(std::mt19937& rng, int trials) {
  std::normal_distribution<float> dist(0.f, 1.f);
  const size_t smem = kK / 16 * (kM * 32 + N * 32);
  CHECK_CUDA(cudaFuncSetAttribute(probe<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  std::vector<__nv_bfloat16> a(kM * kK), b(N * kK);
  std::vector<float> out(3 * kM * N);
  __nv_bfloat16 *da, *db;
  float* dout;
  CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
  CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
  CHECK_CUDA(cudaMalloc(&dout, out.size() * 4));
  long differ[2] = {0, 0}, total = 0;
  double err[3] = {0, 0, 0};
  for (int trial = 0; trial < trials; ++trial) {
    // Mixed magnitudes (some trials with a wide exponent range) so that roundings differ if the
    // accumulation orders do.
    const float spread = trial % 2 ? 8.f : 0.f;
    for (auto& v : a) v = __float2bfloat16(dist(rng) * std::exp2(spread * dist(rng) / 4));
    for (auto& v : b) v = __float2bfloat16(dist(rng) * std::exp2(spread * dist(rng) / 4));
    CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0xFF, out.size() * 4));
    probe<N><<<1, 128, smem>>>(da, db, dout);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int m = 0; m < kM; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0, scale = 0;
        for (int k = 0; k < kK; ++k) {
          const double p = double(__bfloat162float(a[m * kK + k])) * double(__bfloat162float(b[n * kK + k]));
          ref += p;
          scale += std::fabs(p);
        }
        for (int v = 0; v < 3; ++v) err[v] = std::max(err[v], std::fabs(out[v * kM * N + m * N + n] - ref) / (scale + 1e-30));
        for (int v = 1; v < 3; ++v)
          if (std::memcmp(&out[m * N + n], &out[v * kM * N + m * N + n], 4) != 0) ++differ[v - 1];
        ++total;
      }
  }
  std::printf("| m64n%dk16, K = %d, %d inputs | %ld | %ld / %ld | %ld / %ld | %.2e | %.2e | %.2e |\n", N, kK, trials, total,
              differ[0], total, differ[1], total, err[0], err[1], err[2]);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
}

}  // namespace

int main() {
  std::mt19937 rng(1234);
  std::printf("| shape | outputs | rs differs from mma.sync (bits) | ss differs | max rel err mma | rs | ss |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  run<8>(rng, 16);
  run<64>(rng, 16);
  return 0;
}
