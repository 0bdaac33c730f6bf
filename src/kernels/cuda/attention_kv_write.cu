// Writes of new keys and values into the paged cache, in its stored format: write_kv, and the
// fused attention prologue (per-head RMSNorm of q and k, RoPE, k and v to the cache) of
// Backend::qkv_norm_rope_write_kv. f32 caches hold the operand values the attention reads; the
// other formats hold kv_quant.h's codes (kv_codec.cuh).
#include "kernels/cuda/attention_kv_write.cuh"

#include "kernels/cuda/attention_common.cuh"

namespace tachyon::kernels::cuda {
namespace {

__global__ void write_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, DeviceAttentionMeta meta,
                                float* __restrict__ k_cache, float* __restrict__ v_cache, int block_size,
                                int64_t width) {
  pdl_enter();
  const int r = blockIdx.x;
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;  // one element per thread
  if (i < width) {
    k_cache[slot * width + i] = round_operand(k[r * width + i]);  // the precision attention reads
    v_cache[slot * width + i] = round_operand(v[r * width + i]);
  }
}

// A coded cache (every format but f32): one warp per (row, KV head) encodes the head's k and v
// (kv_codec.cuh store_head_record: kv_quant.h's bytes), kWriteWarps heads per CTA.
constexpr int kWriteWarps = 4;
__global__ void __launch_bounds__(32 * kWriteWarps) write_kv_coded_kernel(const float* __restrict__ k,
                                                                          const float* __restrict__ v,
                                                                          DeviceAttentionMeta meta, KvPair kv,
                                                                          int block_size, int D) {
  pdl_enter();
  __shared__ float vecs[kWriteWarps][2][256];
  const int r = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, h = blockIdx.y * kWriteWarps + warp;
  if (h >= kv.heads) return;  // a whole warp: store_head_record's barriers are the warp's own
  const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
  const int64_t slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  const int64_t key = kv_record_key(slot, block_size, kv.heads, h);
  float* xk = vecs[warp][0];
  float* xv = vecs[warp][1];
  const int64_t offset = (static_cast<int64_t>(r) * kv.heads + h) * D;
  for (int i = lane; i < D; i += 32) xk[i] = k[offset + i], xv[i] = v[offset + i];
  __syncwarp();
  store_head_record(kv.k, key, xk, D);
  store_head_record(kv.v, key, xv, D);
}

// Turbo keys are stored rotated (kv_quant.h turbo_rotate): the queries take the same rotation, so
// q·k is computed in the rotated space. One warp per (row, head), the keys' function.
__global__ void __launch_bounds__(32 * kWriteWarps) rotate_queries_kernel(const float* __restrict__ q, int heads,
                                                                          int D, float* __restrict__ out) {
  pdl_enter();
  __shared__ float vecs[kWriteWarps][256];
  const int r = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, h = blockIdx.y * kWriteWarps + warp;
  if (h >= heads) return;
  float* x = vecs[warp];
  const int64_t offset = (static_cast<int64_t>(r) * heads + h) * D;
  for (int i = lane; i < D; i += 32) x[i] = q[offset + i];
  __syncwarp();
  turbo_rotate_warp(x, D);
  for (int i = lane; i < D; i += 32) out[offset + i] = x[i];
}

// The attention prologue fused (Backend::qkv_norm_rope_write_kv): one warp per (row, head) of
// q (heads [0, num_heads)) and of k (the rest), read from the fused projection's row; q heads go
// to q and k heads, with v's head, to the row's cache slot. kPrologueWarps heads per CTA
// (one-warp CTAs ran at a quarter of the copy bandwidth on long prefills: the SM's CTA slots,
// not its warps, were the limit).
constexpr int kPrologueWarps = 4;
template <int PL>  // elements per lane: head_dim <= 32 * PL
__global__ void __launch_bounds__(32 * kPrologueWarps) qkv_norm_rope_write_kv_kernel(
    const float* __restrict__ qkv, float* __restrict__ q, QkPrologue p, DeviceAttentionMeta meta, KvPair kv,
    int block_size) {
  __shared__ float heads[kPrologueWarps][32 * PL];
  __shared__ float v_heads[kPrologueWarps][32 * PL];  // a coded cache's v, encoded from shared memory
  const int r = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int qk_head = blockIdx.y * kPrologueWarps + warp;  // q heads, then k heads
  // The decode attention after this kernel is scheduled at once, so its CTAs stage the older
  // keys before its wait while the qkv projection still streams (see attention_decode_kernel for
  // why that stays sound).
  const auto enter = [] { pdl_enter_releasing_first(); };
  if (qk_head >= p.num_heads + p.kv_heads) {
    enter();
    return;
  }
  // Everything but qkv before the programmatic wait: the norm weight, the rotation's
  // frequencies and position, and a k head's cache slot (constants and the step's staged
  // metadata; loaded after the wait they were a chain of round trips on the step's critical path).
  const bool is_k = qk_head >= p.num_heads;
  const int h = is_k ? qk_head - p.num_heads : qk_head, head_dim = p.head_dim;
  const float* w = is_k ? p.k_norm : p.q_norm;
  HeadConstants<PL> c;
  load_head_constants(w, p, c);
  const int32_t position = p.positions[r];
  int64_t slot = 0;
  if (is_k) {
    const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
    slot = kv_slot(table, tree_position(meta, r, meta.positions[r]), block_size);
  }
  enter();
  float* head = heads[warp];
  const int64_t row_stride = static_cast<int64_t>(p.num_heads + 2 * p.kv_heads) * head_dim;
  const float* x = qkv + r * row_stride + static_cast<int64_t>(qk_head) * head_dim;  // this q or k head
  float vals[PL], v_vals[PL];  // v's head loaded with k's (one round trip)
  load_head(x, head_dim, vals);
  load_head(x + static_cast<int64_t>(p.kv_heads) * head_dim, is_k ? head_dim : 0, v_vals);  // k heads: its v
  norm_rope_head(vals, w != nullptr, c, p, position, head);
  const int64_t width = static_cast<int64_t>(p.kv_heads) * head_dim;
  if (is_k && !kv.f32()) {
    float* v_head = v_heads[warp];
#pragma unroll
    for (int j = 0; j < PL; ++j)
      if (lane + 32 * j < head_dim) v_head[lane + 32 * j] = v_vals[j];
    __syncwarp();
    const int64_t key = kv_record_key(slot, block_size, p.kv_heads, h);
    store_head_record(kv.k, key, head, head_dim);
    store_head_record(kv.v, key, v_head, head_dim);
    return;
  }
  float* __restrict__ k_cache = reinterpret_cast<float*>(kv.k.base);
  float* __restrict__ v_cache = reinterpret_cast<float*>(kv.v.base);
#pragma unroll
  for (int j = 0; j < PL; ++j) {
    const int i = lane + 32 * j;
    if (i >= head_dim) break;
    if (is_k) {
      k_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = round_operand(head[i]);
      v_cache[slot * width + static_cast<int64_t>(h) * head_dim + i] = round_operand(v_vals[j]);
    } else {
      q[(static_cast<int64_t>(r) * p.num_heads + h) * head_dim + i] = head[i];
    }
  }
}
}  // namespace

bool prologue_supported(const QkPrologue& p) {
  return p.head_dim <= 256 && p.num_heads + p.kv_heads <= 65535 && p.offset + 2 * p.half <= p.head_dim;
}

bool qkv_norm_rope_write_kv(const float* qkv, float* q, int64_t rows, const QkPrologue& p,
                            const DeviceAttentionMeta& meta, const KvPair& kv, int block_size, cudaStream_t stream) {
  if (!prologue_supported(p)) return false;
  if (rows == 0) return true;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(ceil_div(p.num_heads + p.kv_heads, kPrologueWarps)));
  auto go = [&](auto kernel) {
    launch(kernel, grid, 32 * kPrologueWarps, 0, stream, qkv, q, p, meta, kv, block_size);
  };
  if (p.head_dim <= 64) go(qkv_norm_rope_write_kv_kernel<2>);
  else if (p.head_dim <= 128) go(qkv_norm_rope_write_kv_kernel<4>);
  else go(qkv_norm_rope_write_kv_kernel<8>);
  return true;
}

void rotate_queries(const float* q, int64_t rows, int heads, int head_dim, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  if (head_dim > 256 || (head_dim & (head_dim - 1)) != 0)
    fail_unsupported("turbo KV query rotation head_dim (a power of two, at most 256)", head_dim);
  launch(rotate_queries_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(heads, kWriteWarps))),
         32 * kWriteWarps, 0, stream, q, heads, head_dim, out);
}

void write_kv(const float* k, const float* v, int64_t rows, const DeviceAttentionMeta& meta, const KvPair& kv,
              int block_size, int head_dim, cudaStream_t stream) {
  if (rows == 0) return;
  if (!kv.f32()) {
    if (head_dim > 256) fail_unsupported("write_kv head_dim of a coded KV cache (at most 256)", head_dim);
    launch(write_kv_coded_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(kv.heads, kWriteWarps))),
           32 * kWriteWarps, 0, stream, k, v, meta, kv, block_size, head_dim);
    return;
  }
  const int64_t width = static_cast<int64_t>(kv.heads) * head_dim;
  launch(write_kv_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(width, 128))), 128, 0,
         stream, k, v, meta, reinterpret_cast<float*>(kv.k.base), reinterpret_cast<float*>(kv.v.base), block_size,
         width);
}

}  // namespace tachyon::kernels::cuda
