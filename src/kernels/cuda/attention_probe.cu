#include "kernels/cuda/attention_probe.cuh"

#include <cmath>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kTile = 64, kDepth = 16, kThreads = 256;  // 64x64 score tiles, 4x4 per thread

// scores[(h * Q + i) * rows + j] = the score of query row i (batch row rows - Q + i) of head h
// against key j, or -inf where the row does not see the key. Grid: (key tiles, query tiles of
// the group's group·Q rows, KV heads); a tile's row m is head g·group + m / Q, query m % Q.
__global__ void __launch_bounds__(kThreads)
    probe_scores_kernel(const float* __restrict__ q, const float* __restrict__ k, int64_t rows, int64_t H, int64_t KV,
                        int64_t D, int64_t Q, float scale, int64_t window, float softcap, float* __restrict__ scores) {
  __shared__ float a[kDepth][kTile + 4], b[kDepth][kTile + 4];
  const int64_t group = H / KV, g = blockIdx.z, m0 = static_cast<int64_t>(blockIdx.y) * kTile,
                n0 = static_cast<int64_t>(blockIdx.x) * kTile, first = rows - Q;
  const int t = static_cast<int>(threadIdx.x), tx = t % 16, ty = t / 16;
  const int64_t M = group * Q;
  float acc[4][4] = {};
  // Each thread loads 4 of the 64x16 elements of each operand: row t / 4, depth (t % 4) * 4 + 0..3.
  const int lr = t / 4, ld = (t % 4) * 4;
  const int64_t am = m0 + lr, bn = n0 + lr;
  const float* arow = nullptr;
  if (am < M) arow = q + ((first + am % Q) * H + g * group + am / Q) * D;
  const float* brow = bn < rows ? k + (bn * KV + g) * D : nullptr;
  for (int64_t d0 = 0; d0 < D; d0 += kDepth) {
    for (int e = 0; e < 4; ++e) {
      const int64_t d = d0 + ld + e;
      a[ld + e][lr] = arow && d < D ? arow[d] : 0.f;
      b[ld + e][lr] = brow && d < D ? brow[d] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      float av[4], bv[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) av[x] = a[d][ty * 4 + x], bv[x] = b[d][tx * 4 + x];
#pragma unroll
      for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y) acc[x][y] = fmaf(av[x], bv[y], acc[x][y]);
    }
    __syncthreads();
  }
  for (int x = 0; x < 4; ++x) {
    const int64_t m = m0 + ty * 4 + x;
    if (m >= M) continue;
    const int64_t h = g * group + m / Q, i = m % Q, row = first + i;
    float* out = scores + (h * Q + i) * rows;
    for (int y = 0; y < 4; ++y) {
      const int64_t j = n0 + tx * 4 + y;
      if (j >= rows) continue;
      float s = acc[x][y] * scale;
      if (softcap > 0.f) s = softcap * tanhf(s / softcap);
      const bool seen = j <= row && (window <= 0 || j > row - window);
      out[j] = seen ? s : -INFINITY;
    }
  }
}

// stats[r] = (max, sum of exp(score - max)) of score row r. One block per row.
__global__ void __launch_bounds__(kThreads)
    probe_row_stats_kernel(const float* __restrict__ scores, int64_t rows, float2* __restrict__ stats) {
  __shared__ float part[kThreads];
  const float* row = scores + static_cast<int64_t>(blockIdx.x) * rows;
  const int t = static_cast<int>(threadIdx.x);
  float best = -INFINITY;
  for (int64_t j = t; j < rows; j += kThreads) best = fmaxf(best, row[j]);
  part[t] = best;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (t < s) part[t] = fmaxf(part[t], part[t + s]);
    __syncthreads();
  }
  best = part[0];
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = t; j < rows; j += kThreads) sum += row[j] == -INFINITY ? 0.f : expf(row[j] - best);
  part[t] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (t < s) part[t] += part[t + s];
    __syncthreads();
  }
  if (t == 0) stats[blockIdx.x] = make_float2(best, part[0]);
}

// mass[j], peak[j]: the sum and the largest (each scaled by its query row's weight, where given)
// of key j's probabilities over every score row, in row order. One thread per key (consecutive keys: coalesced reads of each row).
__global__ void __launch_bounds__(kThreads)
    probe_columns_kernel(const float* __restrict__ scores, int64_t rows, int64_t num_rows, int64_t Q,
                         const float2* __restrict__ stats, const float* __restrict__ weights, float* __restrict__ mass,
                         float* __restrict__ peak) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (j >= rows) return;
  float total = 0.f, top = 0.f;
  for (int64_t r = 0; r < num_rows; ++r) {
    const float s = scores[r * rows + j];
    if (s == -INFINITY) continue;
    const float2 st = stats[r];
    const float p = expf(s - st.x) / st.y;
    total += p;
    top = fmaxf(top, weights ? weights[r % Q] * p : p);
  }
  mass[j] = total;
  peak[j] = top;
}

// The scores' bytes, rounded up to 16 so that the row stats after them are aligned.
size_t scores_bytes(int64_t rows, const AttentionProbeParams& p) {
  return (static_cast<size_t>(p.num_heads * p.query_rows * rows) * sizeof(float) + 15) / 16 * 16;
}

}  // namespace

size_t attention_probe_workspace_bytes(int64_t rows, const AttentionProbeParams& p) {
  return scores_bytes(rows, p) + static_cast<size_t>(p.num_heads * p.query_rows) * sizeof(float2) +
         static_cast<size_t>(p.query_rows) * sizeof(float);
}

void attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& p, void* workspace,
                     float* mass, float* peak, cudaStream_t stream) {
  const int64_t H = p.num_heads, KV = p.num_kv_heads, Q = p.query_rows, group = H / KV, num_rows = H * Q;
  float* scores = static_cast<float*>(workspace);
  float2* stats = reinterpret_cast<float2*>(static_cast<char*>(workspace) + scores_bytes(rows, p));
  float* weights = nullptr;
  if (p.query_weights) {
    weights = reinterpret_cast<float*>(stats + num_rows);
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(weights, p.query_weights, static_cast<size_t>(Q) * sizeof(float),
                                       cudaMemcpyHostToDevice, stream));
  }
  const dim3 grid(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>((group * Q + kTile - 1) / kTile),
                  static_cast<unsigned>(KV));
  probe_scores_kernel<<<grid, kThreads, 0, stream>>>(q, k, rows, H, KV, p.head_dim, Q, p.scale, p.sliding_window,
                                                     p.softcap, scores);
  TACHYON_CUDA_LAUNCH_CHECK();
  probe_row_stats_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(scores, rows, stats);
  TACHYON_CUDA_LAUNCH_CHECK();
  probe_columns_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      scores, rows, num_rows, Q, stats, weights, mass, peak);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
