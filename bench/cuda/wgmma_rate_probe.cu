// Lab probe for issue 6's prefill GEMM: how fast do the tensor cores run wgmma.m64nNk16 with both
// operands in shared memory, by tile width and shared-memory layout, with nothing else in the
// loop (no loads, no barriers, no epilogue)? The GEMM (matmul.cu) reads its operands in
// core-matrix order without swizzle and reaches ~62-65% of the bf16 tensor peak per cycle under
// ncu (docs/perf/cuda.md); this separates the instruction's own rate
// from the kernel's pipeline.
// One CTA per SM, two warpgroups, each issuing 4 wgmmas per 64-k stage over a 4-stage smem ring
// (one stage kept in flight, as the GEMM does), for N = 128, 192, 256 and layouts:
//   none   core matrices of 8 rows x 16 bytes (lbo 128 B, sbo 1 KB): the GEMM's layout
//   128B   rows of 64 k (128 bytes) with the 128-byte swizzle (sbo 1 KB, k16 steps 32 B apart)
// The operands are zeros: the products are not the point. Then the same wgmmas fed from global
// memory the way the GEMM feeds them (fed_kernel): by bulk copies from an L2-resident buffer, one
// CTA per tile or in multicast pairs, and by the GEMM's own tensor copies of core-order boxes. Prints TFLOP/s and FLOP per cycle per SM (SM
// clock from clock64 over globaltimer in the same kernel) against the peak of 4096.
// Build: the CMake target wgmma_rate_probe (build/bench/wgmma_rate_probe).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "check_cuda.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/core_tensor_map.h"
#include "kernels/cuda/wgmma.cuh"

namespace {

using namespace tachyon::kernels::cuda;

constexpr int kStages = 4, kStageKt = 4;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Descriptor: start >> 4, leading byte offset >> 4 (bits 16-29), stride byte offset >> 4
// (bits 32-45), layout type in bits 62-63 (0: no swizzle, 1: 128-byte swizzle).
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t lbo, uint32_t sbo, bool swizzle128) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (swizzle128 ? uint64_t{1} << 62 : 0);
}

// m64n256k16 (the kernels stop at 192 columns: wgmma.cuh holds those forms).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1));
}

template <int N>
__device__ __forceinline__ void wgmma_n(float (&d)[N / 2], uint64_t a, uint64_t b) {
  if constexpr (N == 128) wgmma_m64n128k16(d, a, b);
  else if constexpr (N == 192) wgmma_m64n192k16(d, a, b);
  else wgmma_m64n256k16(d, a, b);
}

// The leader thread's clock and timer at the start of the timed loop.
__device__ __forceinline__ void start_clocks(bool leader, long long& c0, long long& t0) {
  if (!leader) return;
  c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
}
// The end of a probe kernel: the last wgmmas retired, their sum kept alive (zeros in, zeros out:
// the store is never taken), the leader of CTA 0 writes its clocks and nanoseconds (clock_ns).
template <int N>
__device__ __forceinline__ void end_probe(float (&acc)[N / 2], bool leader, long long c0, long long t0, float* sink,
                                          long long* clock_ns) {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += acc[i];
  if (sum != 0.f) sink[blockIdx.x] = sum;
  if (leader && blockIdx.x == 0) {
    long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    clock_ns[0] = clock64() - c0;
    clock_ns[1] = t1 - t0;
  }
}
#endif

template <int N, bool kSwizzle>
__global__ void __launch_bounds__(256, 1) rate_kernel(int iters, float* sink, long long* clock_ns) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint4 smem[];
  constexpr int kAStage = 2 * 64 * 128, kBStage = N * 128;  // bytes per stage: both warpgroups' A, B
  const int total = kStages * (kAStage + kBStage) / 16;
  for (int i = threadIdx.x; i < total; i += blockDim.x) smem[i] = make_uint4(0, 0, 0, 0);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  long long c0 = 0, t0 = 0;
  start_clocks(threadIdx.x == 0, c0, t0);
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
    const int s = it % kStages;
    const uint32_t a = base + s * (kAStage + kBStage) + wg * (kAStage / 2), b = base + s * (kAStage + kBStage) + kAStage;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kt = 0; kt < kStageKt; ++kt) {
      if constexpr (kSwizzle)  // rows of 128 bytes, 8-row groups 1 KB apart; a k16 step is 32 bytes along the row
        wgmma_n<N>(acc, descriptor(a + 32 * kt, 16, 1024, true), descriptor(b + 32 * kt, 16, 1024, true));
      else  // core matrices: k-blocks 128 bytes apart, row-blocks 1 KB apart (8 k-blocks per 64-k stage)
        wgmma_n<N>(acc, descriptor(a + 256 * kt, 128, 1024, false), descriptor(b + 256 * kt, 128, 1024, false));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  end_probe<N>(acc, threadIdx.x == 0, c0, t0, sink, clock_ns);
#endif
}

// Times launch(iterations) after a warm-up launch of a tenth as many, and prints the row: the
// rate over the event time, and per clock of the SM (the kernel's clock64 over its timer).
template <int N, typename Launch>
void time_probe(const char* what, const char* layout, int sms, long long* clock_ns, Launch launch) {
  const int iters = 20000;
  launch(iters / 10);
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaEventRecord(e0));
  launch(iters);
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaEventSynchronize(e1));
  CHECK_CUDA(cudaGetLastError());
  float ms = 0.f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  long long host[2];
  CHECK_CUDA(cudaMemcpy(host, clock_ns, sizeof(host), cudaMemcpyDeviceToHost));
  const double per_cta = 2.0 * 2 * double(iters) * kStageKt * 64 * N * 16;  // two warpgroups
  const double per_clock = per_cta / double(host[0]);
  std::printf("| m64n%dk16%s | %s | %.1f | %.2f | %.0f | %.1f%% |\n", N, what, layout, per_cta * sms / (ms * 1e-3) / 1e12,
              double(host[0]) / double(host[1]), per_clock, 100.0 * per_clock / 4096);
}

template <int N, bool kSwizzle>
void measure(int sms, float* sink, long long* clock_ns) {
  constexpr size_t smem = kStages * (2 * 64 * 128 + N * 128);
  CHECK_CUDA(cudaFuncSetAttribute(rate_kernel<N, kSwizzle>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  time_probe<N>("", kSwizzle ? "128B swizzle" : "none (core matrices)", sms, clock_ns,
                [&](int iters) { rate_kernel<N, kSwizzle><<<sms, 256, smem>>>(iters, sink, clock_ns); });
}

// The same wgmmas fed as the GEMM feeds them: a producer warpgroup (one thread) loads each stage
// from global memory by two bulk copies (both warpgroups' A: 16 KB; B: N x 128 bytes) into a ring
// of as many slots as fit in ~200 KB, counted on the slot's `full` mbarrier; each consumer warp
// releases a slot on `empty` once the wgmmas that read it are done (one stage kept in flight).
// The source is `src_stages` stages read round-robin across CTAs: 16 MB stays in L2, so the rate
// against the unfed kernel's says what the loads into shared memory (L2 bandwidth, TMA writes
// beside the wgmma reads, the barrier hand-off) cost without the GEMM's epilogue, rounds and
// conversion of x.
// kPair: clusters of two CTAs that share B as the GEMM's pairs do (matmul.cu): each producer loads
// its own A and half of B, multicast into both CTAs; a slot is free once both CTAs' consumers
// released it (16 arrivals). Against one CTA per tile at the same CTA count: if the rate rises, the
// L2's reads were the limit; if it stays, the bytes each SM takes in are.
// kTensor: the stages come as the GEMM loads them, by 3-D tensor copies of core-order boxes
// (x_map, w_map: 16 runs of 1 KB per A box, N / 8 per B box) from an x and a weight that stay in L2,
// each CTA walking the k-stages of its own (row block, column block) tile; against the bulk rows
// it tells what the tensor copies cost.
template <int N, bool kPair, bool kTensor>
__global__ void __launch_bounds__(384, 1) fed_kernel(int iters, const uint8_t* __restrict__ src, int64_t src_stages,
                                                     float* sink, long long* clock_ns,
                                                     const __grid_constant__ CUtensorMap x_map,
                                                     const __grid_constant__ CUtensorMap w_map, int row_blocks,
                                                     int col_blocks, int k_stages) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kA = 2 * 64 * 128, kB = N * 128, kStage = kA + kB, kSlots = 200 * 1024 / kStage;
  extern __shared__ __align__(1024) uint4 smem[];
  auto* ring = reinterpret_cast<uint8_t*>(smem);
  auto* full = reinterpret_cast<uint64_t*>(ring + kSlots * kStage);
  uint64_t* empty = full + kSlots;
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kPair ? 16 : 8);
    fence_mbarrier_init();
  }
  if constexpr (kPair) cluster_sync();
  else __syncthreads();
  const uint32_t rank = kPair ? cluster_rank() : 0u, peer = rank ^ 1u;
  if (wg == 0) {
    if (threadIdx.x != 0) return;
    const int64_t group = kPair ? blockIdx.x / 2 : blockIdx.x, groups = kPair ? gridDim.x / 2 : gridDim.x;
    int it = 0;
    for (; it < iters; ++it) {
      const int slot = it % kSlots;
      if (it >= kSlots) mbar_wait(&empty[slot], ((it / kSlots) - 1) & 1);
      mbar_arrive_expect_tx(&full[slot], kStage);
      const uint8_t* from = src + ((group + static_cast<int64_t>(it) * groups) % src_stages) * kStage;
      if constexpr (kTensor) {  // row block of this CTA (pairs: 2 per cluster), column block of the group
        const int rb = static_cast<int>(kPair ? (2 * group + rank) % row_blocks : group % row_blocks);
        const int cb = static_cast<int>((kPair ? 2 * group / row_blocks : group / row_blocks) % col_blocks);
        const int ks = it % k_stages;
        tensor_load_3d(ring + slot * kStage, &x_map, 0, ks * 8, rb * 16, &full[slot]);
        if constexpr (kPair)
          tensor_load_3d_multicast(ring + slot * kStage + kA + rank * (kB / 2), &w_map, 0, ks * 8,
                                   cb * (N / 8) + static_cast<int>(rank) * (N / 16), &full[slot], 0b11);
        else
          tensor_load_3d(ring + slot * kStage + kA, &w_map, 0, ks * 8, cb * (N / 8), &full[slot]);
      } else if constexpr (kPair) {
        bulk_load(ring + slot * kStage, from + rank * (kStage / 2), kA, &full[slot]);  // own A
        bulk_load_multicast(ring + slot * kStage + kA + rank * (kB / 2), from + kA + rank * (kB / 2), kB / 2,
                            &full[slot], 0b11);
      } else {
        bulk_load(ring + slot * kStage, from, kA, &full[slot]);
        bulk_load(ring + slot * kStage + kA, from + kA, kB, &full[slot]);
      }
    }
    // kPair: the other CTA writes into this one's slots until it has consumed every stage.
    if constexpr (kPair)
      for (const int last = it; it < last + kSlots; ++it)
        if (it >= kSlots) mbar_wait(&empty[it % kSlots], ((it / kSlots) - 1) & 1);
    return;
  }
  long long c0 = 0, t0 = 0;
  start_clocks(threadIdx.x == 128, c0, t0);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
  const auto release = [&](int slot) {
    mbar_arrive(&empty[slot]);
    if constexpr (kPair) mbar_arrive_remote(&empty[slot], peer);
  };
  int pending = -1;
  for (int it = 0; it < iters; ++it) {
    const int slot = it % kSlots;
    mbar_wait(&full[slot], (it / kSlots) & 1);
    const uint32_t a = base + slot * kStage + (wg - 1) * (kA / 2), b = base + slot * kStage + kA;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kt = 0; kt < kStageKt; ++kt)
      wgmma_n<N>(acc, descriptor(a + 256 * kt, 128, 1024, false), descriptor(b + 256 * kt, 128, 1024, false));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    if (lane == 0 && pending >= 0) release(pending % kSlots);
    pending = it;
  }
  if (kPair && lane == 0) release(pending % kSlots);  // the producers wait for every release before exiting
  end_probe<N>(acc, threadIdx.x == 128, c0, t0, sink, clock_ns);
#endif
}

// A core-order [rows, k] bf16 matrix as the GEMM's 3-D tensor map, boxes of `box_blocks` row-blocks.
CUtensorMap core_map(const void* base, int64_t rows, int64_t k, uint32_t box_blocks) {
  CUtensorMap map{};
  if (tensor_map_encoder() == nullptr || encode_core_tensor_map(&map, base, rows, k / 8, box_blocks) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled unavailable or failed\n");
    std::exit(1);
  }
  return map;
}

// The operands of the tensor-fed rows: x of 1024 rows and a weight of 6 (192) or 9 (128, 256: 4 or
// 9) column blocks, both 4096 k: 8 + ~9 MB, L2-resident like the bulk rows' 16 MB.
struct TensorSource {
  const uint8_t* x;
  const uint8_t* w;
  int64_t k = 4096, x_rows = 1024, w_rows = 1152;
};

template <int N, bool kPair, bool kTensor>
void measure_fed(int ctas, const uint8_t* src, size_t src_bytes, const TensorSource& ts, float* sink,
                 long long* clock_ns) {
  constexpr int kStage = 2 * 64 * 128 + N * 128, kSlots = 200 * 1024 / kStage;
  constexpr size_t smem = kSlots * kStage + 2 * kSlots * sizeof(uint64_t);
  CHECK_CUDA(cudaFuncSetAttribute(fed_kernel<N, kPair, kTensor>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  const std::string what =
      std::string(kPair ? ", pairs sharing B by multicast" : ", fed by") +
      (kTensor ? " tensor copies of core-order boxes from x " + std::to_string(ts.x_rows) + " x " + std::to_string(ts.k) +
                     " and w " + std::to_string(ts.w_rows / N * N) + " x " + std::to_string(ts.k)
               : " bulk copies from " + std::to_string(src_bytes >> 20) + " MB") +
      " (" + std::to_string(kSlots) + " slots, " + std::to_string(ctas) + " CTAs)";
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(ctas);
  config.blockDim = dim3(384);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kPair ? 2 : 1, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  const int64_t stages = static_cast<int64_t>(src_bytes / kStage);
  const CUtensorMap x_map = kTensor ? core_map(ts.x, ts.x_rows, ts.k, 16) : CUtensorMap{};
  const CUtensorMap w_map = kTensor ? core_map(ts.w, ts.w_rows / N * N, ts.k, kPair ? N / 16 : N / 8) : CUtensorMap{};
  const int row_blocks = static_cast<int>(ts.x_rows / 128), col_blocks = static_cast<int>(ts.w_rows / N);
  const int k_stages = static_cast<int>(ts.k / 64);
  time_probe<N>(what.c_str(), "none (core matrices)", ctas, clock_ns, [&](int iters) {  // the warm-up fills L2
    CHECK_CUDA(cudaLaunchKernelEx(&config, fed_kernel<N, kPair, kTensor>, iters, src, stages, sink, clock_ns, x_map,
                                  w_map, row_blocks, col_blocks, k_stages));
  });
}

}  // namespace

int main() {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* sink;
  long long* clock_ns;
  CHECK_CUDA(cudaMalloc(&sink, sms * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&clock_ns, 2 * sizeof(long long)));
  std::printf("| wgmma (both operands in shared memory) | layout | TFLOP/s | SM GHz | FLOP/clock/SM | of 4096 |\n");
  std::printf("|---|---|---|---|---|---|\n");
  measure<128, false>(sms, sink, clock_ns);
  measure<128, true>(sms, sink, clock_ns);
  measure<192, false>(sms, sink, clock_ns);
  measure<192, true>(sms, sink, clock_ns);
  measure<256, false>(sms, sink, clock_ns);
  measure<256, true>(sms, sink, clock_ns);
  const size_t src_bytes = size_t{16} << 20;  // stays in L2 (50 MB)
  uint8_t* src;
  CHECK_CUDA(cudaMalloc(&src, src_bytes));
  CHECK_CUDA(cudaMemset(src, 0, src_bytes));
  // Per SM the same rate with half or a quarter of the SMs reading says the limit is each SM's
  // intake, not the L2's total (which multicast would relieve).
  TensorSource ts;
  uint8_t *x, *w;
  CHECK_CUDA(cudaMalloc(&x, size_t(ts.x_rows * ts.k * 2)));
  CHECK_CUDA(cudaMalloc(&w, size_t(ts.w_rows * ts.k * 2)));
  CHECK_CUDA(cudaMemset(x, 0, size_t(ts.x_rows * ts.k * 2)));
  CHECK_CUDA(cudaMemset(w, 0, size_t(ts.w_rows * ts.k * 2)));
  ts.x = x, ts.w = w;
  measure_fed<128, false, false>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, false, false>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<256, false, false>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, false, false>(sms / 2, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, false, false>(sms / 4, src, src_bytes, ts, sink, clock_ns);
  measure_fed<128, false, false>(sms / 2, src, src_bytes, ts, sink, clock_ns);
  measure_fed<128, true, false>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, true, false>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<256, true, false>(sms, src, src_bytes, ts, sink, clock_ns);
  // As the GEMM loads: tensor copies of core-order boxes (its pairs at 128 and 192 columns).
  measure_fed<128, true, true>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, true, true>(sms, src, src_bytes, ts, sink, clock_ns);
  measure_fed<192, false, true>(sms, src, src_bytes, ts, sink, clock_ns);
  return 0;
}
