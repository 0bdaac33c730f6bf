#include "kernels/cuda/attention_wgmma.cuh"

#include <climits>
#include <cmath>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/attention_chunk.cuh"
#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/attention_wgmma_layout.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <int D>
using Layout = WgmmaLayout<D>;  // q, two K buffers, vstage, vt (attention_wgmma_layout.cuh)

// CTA (query tile, KV head, head chunk) as the mma.sync query-tile kernel (attention.cu), 128
// pairs: warpgroup w takes pairs [64w, 64w + 64), warp w·4 + i the 16 pairs from 64w + 16i.
// Per 64-key chunk: the CTA's copies land (K straight into core-matrix order, V into vstage),
// the CTA transposes V into vt and starts the next chunk's copies; each warpgroup with a valid
// key in the chunk then runs s = q·k as D/8 wgmma.m64n64k8 (q and K from shared memory), the
// softmax and merge of chunk_softmax / merge_factors on the accumulators (the mma layout), and
// o = p·v as 8 wgmma.m64nDk8 with p from registers. The chains, their k order and the merge
// are those of attention_chunk.cuh: the bits of the mma.sync kernels.
template <int D, bool kSkew>
__global__ void __launch_bounds__(kThreads, 1) attention_wgmma_kernel(
    const float* __restrict__ q, DeviceAttentionMeta meta, const QueryTile* __restrict__ tiles,
    const float* __restrict__ k_cache, const float* __restrict__ v_cache, AttentionShape s, int heads_per_chunk,
    float* __restrict__ out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<D>;
  constexpr int DT = D / 8;  // 8-column d tiles
  pdl_enter();
  extern __shared__ __align__(128) float4 smem4[];
  uint32_t* qs = reinterpret_cast<uint32_t*>(smem4);
  float* kbuf = reinterpret_cast<float*>(qs + L::q_words);
  float* vstage = kbuf + 2 * L::k_words;
  float* vt = vstage + L::vstage_words;
  __shared__ int32_t pos_s[kWgmmaPairs], lo_s[kWgmmaPairs];

  const TilePairs tp = tile_pairs_of_cta(tiles, s, heads_per_chunk);
  const int kvh = tp.kvh, hg = tp.hg, h_begin = tp.h_begin, num_pairs = tp.num_pairs;
  const QueryTile tile = tp.tile;
  // q in core-matrix order, 16 bytes (one core-matrix row) per copy: thread i takes column block
  // i / 8 of pairs 8n + i % 8, so that 8 lanes fill one core matrix (conflict-free) and its
  // loads are independent of each other (issued together).
  {
    constexpr int kQUnits = kWgmmaPairs * D / 4 / kThreads, kPairStep = kThreads / (D / 4);
    const int c = threadIdx.x / 8 % (D / 4), p0 = threadIdx.x % 8 + 8 * (threadIdx.x / (2 * D));
    float4 v[kQUnits];
#pragma unroll
    for (int n = 0; n < kQUnits; ++n) {
      const int p = p0 + kPairStep * n;
      const int64_t pair_q = (static_cast<int64_t>(tile.row0 + p / hg) * s.num_heads + h_begin + p % hg) * D;
      v[n] = p < num_pairs ? *reinterpret_cast<const float4*>(q + pair_q + 4 * c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int n = 0; n < kQUnits; ++n) {
      const int p = p0 + kPairStep * n;
      *reinterpret_cast<uint4*>(qs + c * L::kQL + p / 8 * 32 + p % 8 * 4) =
          make_uint4(to_operand(v[n].x), to_operand(v[n].y), to_operand(v[n].z), to_operand(v[n].w));
    }
  }
  int kmin, kmax;
  tile_key_windows(meta, s, tile, pos_s, lo_s, kmin, kmax);
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[tile.row0]];

  // The warpgroup index through a shuffle: provably uniform per warp, so ptxas does not treat
  // the wgmmas as divergent code (it serialises them there; matmul.cu).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int pair0 = 64 * wg + 16 * (warp % 4);
  int wg_lo = INT_MAX, wg_hi = -1;  // the warpgroup's keys: the union of its rows' windows
  for (int r = 64 * wg / hg; r <= min(tile.num_rows - 1, (64 * wg + 63) / hg); ++r)
    wg_lo = min(wg_lo, lo_s[r]), wg_hi = max(wg_hi, pos_s[r]);
  int32_t row_lo[2], row_pos[2];  // the lane's two rows (pairs pair0 + g, pair0 + g + 8)
  lane_key_windows(tp, pair0, pos_s, lo_s, row_lo, row_pos);
  float M[2] = {-INFINITY, -INFINITY}, L_[2] = {0.f, 0.f}, A[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) A[i][0] = A[i][1] = A[i][2] = A[i][3] = 0.f;

  const int64_t width = static_cast<int64_t>(s.num_kv_heads) * D, head_offset = static_cast<int64_t>(kvh) * D;
  // The copies of chunk keys [c0, c0 + 64) (zero rows outside [kmin, kmax]: their zero weights
  // multiply finite values). Thread i copies 16 bytes of column block c = 2 ((i / 16) % (D / 8))
  // + i % 2 (two lanes read 32 contiguous bytes of a row) for keys key0 + kKeyStep·n: the same
  // column and key in block for all its units, so every address but the key's slot is fixed.
  constexpr int kUnits = kChunkKeys * D / 4 / kThreads, kKeyStep = kChunkKeys / kUnits;
  const int tid = threadIdx.x;
  const int c_copy = 2 * (tid / 16 % (D / 8)) + tid % 2, key0 = 8 * (tid / (2 * D)) + tid / 2 % 8;
  const int k_off = c_copy * L::kKL + key0 / 8 * 32 + key0 % 8 * 4, v_off = key0 * L::kVR + 4 * c_copy;
  auto stage = [&](int c0, int buffer) {
    float* kd = kbuf + buffer * L::k_words;
    int64_t src[kUnits];  // first every key's slot (independent table loads, issued together)
#pragma unroll
    for (int n = 0; n < kUnits; ++n) {
      const int j = c0 + key0 + kKeyStep * n;
      src[n] = j < kmin || j > kmax ? -1 : kv_slot(table, j, s.block_size) * width + head_offset + 4 * c_copy;
    }
#pragma unroll
    for (int n = 0; n < kUnits; ++n) {
      float* k_dst = kd + k_off + kKeyStep / 8 * 32 * n;
      float* v_dst = vstage + v_off + kKeyStep * L::kVR * n;
      if (src[n] < 0) {
        *reinterpret_cast<float4*>(k_dst) = make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<float4*>(v_dst) = make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        cp_async16(k_dst, k_cache + src[n]);
        cp_async16(v_dst, v_cache + src[n]);
      }
    }
    cp_async_commit();
  };
  // vstage -> vt. A warp takes 8 keys (lane % 8) x 4 column blocks (lane / 8); thread's column
  // block c_t and key in block fixed, key blocks kb_t + kBlockStep·n.
  constexpr int kBlockStep = kThreads / 32 / (D / 16);
  const int c_t = 4 * (warp % (D / 16)) + lane / 8, kb_t = warp / (D / 16);
  const float* v_src = vstage + (8 * kb_t + lane % 8) * L::kVR + 4 * c_t;
  float* vt_dst = vt + (2 * kb_t + lane % 2) * L::kVL + c_t / 2 * L::kVS + c_t % 2 * 16 + lane % 8 / 2;
  auto transpose_v = [&] {
    float4 v[kUnits];  // all loads first: the stores do not wait on one load at a time
#pragma unroll
    for (int n = 0; n < kUnits; ++n) v[n] = *reinterpret_cast<const float4*>(v_src + 8 * kBlockStep * L::kVR * n);
#pragma unroll
    for (int n = 0; n < kUnits; ++n) {
      float* dst = vt_dst + 2 * kBlockStep * L::kVL * n;
      dst[0] = v[n].x, dst[4] = v[n].y, dst[8] = v[n].z, dst[12] = v[n].w;
    }
  };

  const int c_first = kmin / kChunkKeys * kChunkKeys;
  stage(c_first, 0);
  const uint32_t* qa = qs + wg * 8 * 32;  // this warpgroup's pair blocks
  // Warpgroup 0 issues its scores before the V transposition and warpgroup 1 after it, so the
  // two run half a phase apart: one's wgmmas overlap the other's softmax instead of both
  // contending for the tensor cores and then both idling them.
  for (int c0 = c_first, n = 0; c0 <= kmax; c0 += kChunkKeys, ++n) {
    cp_async_wait<0>();
    fence_proxy_async();  // this thread's K copies, read by wgmma after the barrier
    __syncthreads();      // the chunk landed; every warpgroup is done with the last chunk's vt and K
    const bool live = __shfl_sync(0xffffffffu, c0 + kChunkKeys - 1 >= wg_lo && c0 <= wg_hi, 0);
    const float* ks = kbuf + (n % 2) * L::k_words;
    float sc[kChunkTiles][4];
    auto issue_scores = [&] { issue_chunk_scores<D>(sc, qa, ks); };
    if (kSkew && wg == 0 && live) issue_scores();
    transpose_v();
    fence_proxy_async();  // vt (stores) is read by wgmma
    __syncthreads();
    if ((!kSkew || wg == 1) && live) issue_scores();
    if (c0 + kChunkKeys <= kmax) stage(c0 + kChunkKeys, (n + 1) % 2);
    if (!live) continue;
    wgmma_wait<0>();
    float m[2], fo[2], fn[2];
    chunk_softmax_factors(sc, row_lo, row_pos, c0, s, M, L_, m, fo, fn);
    float o[4 * DT];
    issue_chunk_pv<D>(o, sc, vt);
    wgmma_wait<0>();
    merge_chunk_output(A, o, m, fo, fn);
  }

  write_tile_rows(tp, pair0, s, D, 0, DT, M, L_, A, out);
#else
  __trap();  // built for sm_90 without the arch-specific features: never launched (attention_wgmma_supported)
#endif
}

template <int D, bool kSkew>
void launch_wgmma(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                  const float* k_cache, const float* v_cache, const AttentionShape& shape, int heads_per_chunk,
                  float* out, cudaStream_t stream) {
  static const bool configured = [] {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(attention_wgmma_kernel<D, kSkew>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(Layout<D>::bytes)));
    return true;
  }();
  (void)configured;
  launch(attention_wgmma_kernel<D, kSkew>, query_tile_grid(num_tiles, shape, heads_per_chunk), kThreads,
         Layout<D>::bytes, stream, q, meta, tiles, k_cache, v_cache, shape, heads_per_chunk, out);
}

// A/B runs: TACHYON_ATTENTION_SKEW=0 lets both warpgroups issue their scores together.
template <int D>
void launch_wgmma(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                  const float* k_cache, const float* v_cache, const AttentionShape& shape, int heads_per_chunk,
                  float* out, cudaStream_t stream) {
  static const bool skew = !env_turned_off("TACHYON_ATTENTION_SKEW");
  if (skew) launch_wgmma<D, true>(q, meta, tiles, num_tiles, k_cache, v_cache, shape, heads_per_chunk, out, stream);
  else launch_wgmma<D, false>(q, meta, tiles, num_tiles, k_cache, v_cache, shape, heads_per_chunk, out, stream);
}

}  // namespace

namespace {
bool g_wgmma_on = !env_turned_off("TACHYON_ATTENTION_WGMMA");  // A/B runs: 0 = the mma.sync kernel
// A/B runs: TACHYON_ATTENTION_RING=0 keeps this file's kernel (copies and the V transposition by
// all threads between two CTA barriers per chunk) instead of the producer-warpgroup ring.
bool ring_on() {
  static const bool on = !env_turned_off("TACHYON_ATTENTION_RING");
  return on;
}
}  // namespace

void set_attention_wgmma(bool on) { g_wgmma_on = on; }

bool attention_wgmma_supported(int head_dim) {
  static const bool device_ok = [] {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return false;
    return prop.major == 9 && prop.minor == 0;
  }();
  // A TACHYON_ATTENTION_BF16 build has bf16 operands in the ring kernel only (attention_ring_bf16.cuh).
  return (!TACHYON_ATTENTION_BF16 || ring_on()) && g_wgmma_on && device_ok && (head_dim == 64 || head_dim == 128);
}

void attention_wgmma(const float* q, const DeviceAttentionMeta& meta, const QueryTile* tiles, int num_tiles,
                     const float* k_cache, const float* v_cache, const AttentionShape& shape, int heads_per_chunk,
                     float* out, cudaStream_t stream) {
  if (ring_on()) {
    attention_ring(q, meta, tiles, num_tiles, k_cache, v_cache, shape, heads_per_chunk, out, stream);
    return;
  }
  if (shape.head_dim == 128)
    launch_wgmma<128>(q, meta, tiles, num_tiles, k_cache, v_cache, shape, heads_per_chunk, out, stream);
  else if (shape.head_dim == 64)
    launch_wgmma<64>(q, meta, tiles, num_tiles, k_cache, v_cache, shape, heads_per_chunk, out, stream);
  else
    fail_unsupported("wgmma attention head_dim (64 or 128)", shape.head_dim);
}

}  // namespace tachyon::kernels::cuda
