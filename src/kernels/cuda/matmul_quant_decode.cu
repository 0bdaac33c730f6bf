// The decode matmul of quantized weights (1-64 rows; matmul_quant.cuh): split-K over the packed
// codes of quant_layout.h, dequantized in registers into bf16 B fragments, in the canonical order
// of common.cuh. Modelled on the bf16 split-K kernel (matmul_decode.cu), with 2-4x fewer bytes
// per segment in flight per warp.
#include "kernels/cuda/matmul_common.cuh"
#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/quant_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kUnitsPerSegment = static_cast<int>(kSegmentK / 32);  // 32-column units (k-pairs)

// Grid (column groups of 8 n-tiles, k segments / kSegs): warp w of CTA (g, y) computes n-tile
// 8g + w over segments [y·kSegs, (y + 1)·kSegs), each its own chain from zero (the canonical
// order: the bits do not depend on kSegs). Its codes (one 16-byte load per lane per 2 or 4 units,
// every segment's at once: 4-bit codes need 4 segments for the bf16 split-K kernel's 8 KB in
// flight per warp) are loaded before pdl_wait (weights are constant); x's segments are staged as
// bf16 A fragments in shared memory (as the bf16 split-K kernel does); each k-tile's 4 codes per
// lane become two bf16x2 B registers with the group's scale (and bias); the last CTA of the column
// group adds the segment sums in order.
template <int MT, bool kHalf, int kKind, int kSegs>  // MT m-tiles of 16 rows; kHalf: M <= 8 (A rows 8-15 are zero)
__global__ void __launch_bounds__(256, 2)
    matmul_quant_decode_kernel(const float* __restrict__ x, int M, int K, QuantMatrix w, int N, int kp_count,
                               const float* __restrict__ bias, float* __restrict__ out, float* __restrict__ partial,
                               unsigned* __restrict__ counters) {
  constexpr int kBits = quant_kind_bits(kKind);
  constexpr int kUnitsPerVector = kBits == 8 ? 2 : 4;
  constexpr int kVectors = kUnitsPerSegment / kUnitsPerVector;  // 16-byte loads per lane per segment
  constexpr int kRegs = kHalf ? 2 : 4;                          // A registers staged per lane per k-tile
  constexpr int kSegTiles = 2 * kUnitsPerSegment;
  extern __shared__ uint32_t xs_quant[];  // [kSegs][MT][kSegTiles][32 lanes][kRegs]
  __shared__ bool is_last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = blockIdx.x * kSplitWarps + warp, seg0 = blockIdx.y * kSegs;
  const int num_segments = (kp_count + kUnitsPerSegment - 1) / kUnitsPerSegment;
  const int64_t vectors_per_tile = (kp_count + kUnitsPerVector - 1) / kUnitsPerVector;
  const uint4* codes = static_cast<const uint4*>(w.codes) + (nt * vectors_per_tile + seg0 * kVectors) * 32 + lane;
  uint4 v[kSegs][kVectors];
#pragma unroll
  for (int sg = 0; sg < kSegs; ++sg)
#pragma unroll
    for (int i = 0; i < kVectors; ++i)
      v[sg][i] = (seg0 + sg) * kVectors + i < vectors_per_tile ? load_stream(codes + (sg * kVectors + i) * 32)
                                                               : make_uint4(0, 0, 0, 0);
  // This lane's row of scales (and biases): row nt·8 + lane/4 (quant_layout.h's scale_base).
  const int64_t scale_row = w.scale_base(static_cast<int64_t>(nt) * 8 + lane / 4);
  const int group_shift = __ffsll(w.group) - 1;  // groups are powers of two (quant_layout_of)
  pdl_wait();
  for (int i = threadIdx.x; i < kSegs * MT * kSegTiles * 32; i += 256) {
    const int l = i % 32, kt = (i / 32) % kSegTiles, mt = (i / (32 * kSegTiles)) % MT, sg = i / (32 * kSegTiles * MT);
    const int k = (seg0 + sg) * kUnitsPerSegment * 32 + 16 * kt + 2 * (l & 3), row = 16 * mt + (l >> 2);
    uint32_t* dst = xs_quant + i * kRegs;
    dst[0] = load_x_pair(x, M, K, row, k);
    dst[1] = load_x_pair(x, M, K, row, k + 8);
    if constexpr (!kHalf) {
      dst[2] = load_x_pair(x, M, K, row + 8, k);
      dst[3] = load_x_pair(x, M, K, row + 8, k + 8);
    }
  }
  __syncthreads();
  pdl_launch_dependents();
  const int n_pad = gridDim.x * kSplitWarps * 8;
  const int g = lane / 4, c = lane % 4, col = nt * 8 + 2 * c;
#pragma unroll
  for (int sg = 0; sg < kSegs; ++sg) {
    const int seg = seg0 + sg;
    if (seg >= num_segments) break;
    const int kp_begin = seg * kUnitsPerSegment, kp_end = min(kp_count, kp_begin + kUnitsPerSegment);
    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
#pragma unroll
    for (int u = 0; u < kUnitsPerSegment; ++u) {
      if (kp_begin + u >= kp_end) break;
      const uint4 vu = v[sg][u / kUnitsPerVector];
      const uint32_t words[4] = {vu.x, vu.y, vu.z, vu.w};
      uint32_t breg[4];
      quant_unit_fragment<kKind>(w, words, u % kUnitsPerVector, kp_begin + u, scale_row, group_shift, breg);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int xi = ((sg * MT + mt) * kSegTiles + 2 * u + t) * 32 + lane;
          uint32_t a[4];
          if constexpr (kHalf) {
            const uint2 xv = reinterpret_cast<const uint2*>(xs_quant)[xi];
            a[0] = xv.x, a[1] = 0u, a[2] = xv.y, a[3] = 0u;
          } else {
            const uint4 xv = reinterpret_cast<const uint4*>(xs_quant)[xi];
            a[0] = xv.x, a[1] = xv.z, a[2] = xv.y, a[3] = xv.w;
          }
          mma_bf16(acc[mt], a, breg[2 * t], breg[2 * t + 1]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 16 * mt + g + 8 * h;
        if (row < M)
          *reinterpret_cast<float2*>(partial + (static_cast<int64_t>(seg) * M + row) * n_pad + col) =
              make_float2(acc[mt][2 * h], acc[mt][2 * h + 1]);
      }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The segment sums in segment order (add_segment_sums' arithmetic), Int8Rows' row scale, the bias.
  constexpr int kGroupCols = kSplitWarps * 8;
  for (int i = threadIdx.x; i < M * kGroupCols; i += 256) {
    const int row = i / kGroupCols, cc = blockIdx.x * kGroupCols + i % kGroupCols;
    if (cc >= N) continue;
    float total = 0.f;
    for (int s2 = 0; s2 < num_segments; ++s2)
      total += __ldcg(partial + (static_cast<int64_t>(s2) * M + row) * n_pad + cc);
    if constexpr (kKind == kQuantInt8Rows) total = __fmul_rn(total, w.row_scales[cc]);
    out[static_cast<int64_t>(row) * N + cc] = total + (bias ? bias[cc] : 0.f);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0u;
}

template <int MT, bool kHalf, int kKind, int kSegs>
void launch_quant_decode(const float* x, int M, int K, const QuantMatrix& w, int N, int kp_count, const float* bias,
                         float* out, float* partial, unsigned* counters, cudaStream_t stream) {
  constexpr size_t smem =
      static_cast<size_t>(kSegs) * MT * 2 * kUnitsPerSegment * 32 * (kHalf ? 2 : 4) * sizeof(uint32_t);
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(matmul_quant_decode_kernel<MT, kHalf, kKind, kSegs>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int64_t groups = round_up(N, kMmaRowPad) / 8 / kSplitWarps;
  const int64_t ctas_per_group = ceil_div(ceil_div(kp_count, kUnitsPerSegment), kSegs);
  launch(matmul_quant_decode_kernel<MT, kHalf, kKind, kSegs>,
         dim3(static_cast<unsigned>(groups), static_cast<unsigned>(ctas_per_group)), 256, smem, stream, x, M, K, w, N,
         kp_count, bias, out, partial, counters);
  TACHYON_CUDA_LAUNCH_CHECK();
}

int segments_per_warp = 0;  // set_quant_decode_segments; 0: by code width

}  // namespace

void matmul_quant_decode(const float* x, int64_t rows, const QuantMatrix& w, const float* bias, float* out,
                         void* partial, unsigned* counters, cudaStream_t stream) {
  if (rows == 0) return;
  if (rows > 64) fail_unsupported("quantized decode matmul rows (at most 64)", rows);
  const int M = static_cast<int>(rows), N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
  const int kp_count = static_cast<int>(w.units_per_row_tile());
  auto* p = static_cast<float*>(partial);
  // Up to 8 rows each warp streams 8 KB of codes (the bf16 split-K kernel's bytes in flight): two
  // segments of 8-bit codes, four of 4-bit ones. Not measured yet against one segment per warp
  // (set_quant_decode_segments; bench/cuda/quant_bench.cpp --segments).
  const int segs = segments_per_warp > 0 ? segments_per_warp : w.bits() == 8 ? 2 : 4;
  with_quant_kind(w.kind, [&](auto kind) {
    constexpr int kKind = decltype(kind)::value;
    if (M <= 8) {
      // 4 segments of 8-bit codes (16 KB per warp) spill registers: 8-bit codes take at most 2.
      if constexpr (quant_kind_bits(kKind) == 4) {
        if (segs == 4)
          return launch_quant_decode<1, true, kKind, 4>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
      }
      if (segs >= 2)
        launch_quant_decode<1, true, kKind, 2>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
      else
        launch_quant_decode<1, true, kKind, 1>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
    } else if (M <= 16) {
      launch_quant_decode<1, false, kKind, 1>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
    } else if (M <= 32) {
      launch_quant_decode<2, false, kKind, 1>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
    } else {
      launch_quant_decode<4, false, kKind, 1>(x, M, K, w, N, kp_count, bias, out, p, counters, stream);
    }
  });
}

void set_quant_decode_segments(int segments) {
  segments_per_warp = segments == 1 || segments == 2 || segments == 4 ? segments : 0;
}

}  // namespace tachyon::kernels::cuda
