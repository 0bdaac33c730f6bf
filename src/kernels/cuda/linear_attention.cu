#include "kernels/cuda/linear_attention.cuh"

#include <cuda_bf16.h>

#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kMaxConvKernel = 8;

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20)
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

__global__ void causal_conv1d_silu_kernel(const float* __restrict__ x, int64_t channels, const __nv_bfloat16* w,
                                          int kernel, DeviceRecurrentMeta meta, float* state, int64_t state_stride,
                                          float* __restrict__ out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  float wc[kMaxConvKernel], win[kMaxConvKernel];  // win[0:kernel-1]: oldest input first
  if (c < channels)
    for (int i = 0; i < kernel; ++i) wc[i] = __bfloat162float(w[mma_fragment_index(c, i, kernel)]);
  pdl_enter();
  if (c >= channels) return;
  float* st = state + meta.seq_state_slot[s] * state_stride;  // [kernel − 1, channels]
  for (int i = 0; i < kernel - 1; ++i) win[i] = st[i * channels + c];
  for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
    const float xr = x[r * channels + c];
    float acc = wc[kernel - 1] * xr;
    for (int i = 0; i < kernel - 1; ++i) acc += wc[i] * win[i];
    out[r * channels + c] = silu(acc);
    if (kernel > 1) {
      for (int i = 0; i + 1 < kernel - 1; ++i) win[i] = win[i + 1];
      win[kernel - 2] = xr;
    }
    const int snap = meta.row_snapshot_slot[r];
    if (snap >= 0)
      for (int i = 0; i < kernel - 1; ++i) state[snap * state_stride + i * channels + c] = win[i];
  }
  for (int i = 0; i < kernel - 1; ++i) st[i * channels + c] = win[i];
}

// The gated delta rule, one CTA per (sequence, value head, group of 32 state columns). Column j
// of the state evolves on its own given the token's k, q and scalars, so the columns split over
// CTAs, and one sequence of Qwen3-Next (32 heads x 4 groups) fills an H100. Thread (warp w, lane
// c) holds S[32w .. 32w + 31][column c] in registers: a token costs each thread a 32-long partial
// dot, one block barrier where the warps' partials meet, then the rank-1 update and the partial
// output dot. Everything that does not depend on the state runs a token or two ahead: the next
// token's raw q, k go from registers to shared memory (three buffers: a buffer is rewritten two
// barriers after its last read) with their squared norms reduced per warp, and the token after
// that is loaded from global memory into registers. The l2 norms are applied as scalars
// (Sᵀk = kinv·Sᵀk_raw), so the dot products start before the norms are known. Tokens run in order
// and every row's arithmetic is fixed, so the bits do not depend on batch-mates or on where
// forwards split.
constexpr int kDeltaMaxWarps = 4;  // k_dim <= 128
constexpr int kDeltaCols = 32;

struct DeltaScalars {  // one token's per-thread inputs other than q and k
  float v = 0.f, a = 0.f, b = 0.f;
  int snapshot = -1;
};

__global__ void __launch_bounds__(kDeltaMaxWarps * 32) gated_delta_rule_kernel(
    const float* __restrict__ qkv, int64_t qs, const float* __restrict__ ba, DeltaRuleParams p, DeviceRecurrentMeta meta,
    float* state, int64_t state_stride, float* __restrict__ out) {
  __shared__ __align__(16) float kq[3][2][kDeltaMaxWarps * 32];  // [buffer][k, q][element], raw values
  __shared__ float norm_part[3][2][kDeltaMaxWarps];             // [buffer][k, q][warp]: Σ x² over its 32 elements
  __shared__ float m_part[2][kDeltaMaxWarps][kDeltaCols];        // Σ_i S[i][c]·k_raw[i] over the warp's rows
  __shared__ float o_part[2][kDeltaMaxWarps][kDeltaCols];        // Σ_i S'[i][c]·q_raw[i] over the warp's rows
  const int dk = static_cast<int>(p.k_dim), dv = static_cast<int>(p.v_dim);
  const int Hk = static_cast<int>(p.num_k_heads), Hv = static_cast<int>(p.num_v_heads);
  const int h = blockIdx.y, s = blockIdx.z, kh = h / (Hv / Hk);
  const int warps = static_cast<int>(blockDim.x) / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = blockIdx.x * kDeltaCols + lane, i0 = w * 32;
  const bool has_col = col < dv;
  const int e = threadIdx.x;  // the q, k element this thread stages (e < dk)
  const float A = expf(p.A_log[h]), dt_bias = p.dt_bias[h], q_scale = 1.f / sqrtf(static_cast<float>(dk));
  pdl_enter();
  const int64_t r0 = meta.seq_row_begin[s], n = meta.seq_row_begin[s + 1] - r0;
  float* st = state + meta.seq_state_slot[s] * state_stride + static_cast<int64_t>(h) * dk * dv;
  float S[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) S[j] = has_col && i0 + j < dk ? st[(i0 + j) * dv + col] : 0.f;

  auto load_kq = [&](int64_t r, float& k, float& q) {
    const float* row = qkv + r * qs;
    k = e < dk ? row[Hk * dk + kh * dk + e] : 0.f;
    q = e < dk ? row[kh * dk + e] : 0.f;
  };
  auto load_scalars = [&](int64_t r) {
    DeltaScalars x;
    if (has_col) x.v = qkv[r * qs + 2 * Hk * dk + h * dv + col];
    x.b = ba[r * 2 * Hv + h];
    x.a = ba[r * 2 * Hv + Hv + h];
    x.snapshot = meta.row_snapshot_slot[r];
    return x;
  };
  auto stage = [&](int buf, float k, float q) {  // raw values to shared memory, squared norms per warp
    kq[buf][0][e] = k;
    kq[buf][1][e] = q;
    const float kk = warp_sum(k * k), qq = warp_sum(q * q);
    if (lane == 0) norm_part[buf][0][w] = kk, norm_part[buf][1][w] = qq;
  };
  auto reduce_output = [&](int64_t t, int buf, float qinv) {  // token t's output, after its partials met
    if (w != static_cast<int>(t % warps) || !has_col) return;
    float o = 0.f;
    for (int x = 0; x < warps; ++x) o += o_part[buf][x][lane];
    out[(r0 + t) * Hv * dv + h * dv + col] = o * qinv;
  };

  if (n > 0) {
    float k0, q0;
    load_kq(r0, k0, q0);
    stage(0, k0, q0);
  }
  float k_next = 0.f, q_next = 0.f;  // token t + 1's raw elements, staged during token t
  if (n > 1) load_kq(r0 + 1, k_next, q_next);
  DeltaScalars cur = n > 0 ? load_scalars(r0) : DeltaScalars{}, next = n > 1 ? load_scalars(r0 + 1) : DeltaScalars{};
  float qinv_prev = 0.f;
  __syncthreads();
  for (int64_t t = 0; t < n; ++t) {
    const int buf = static_cast<int>(t % 3), par = static_cast<int>(t & 1);
    const float4* k4 = reinterpret_cast<const float4*>(&kq[buf][0][i0]);
    const float4* q4 = reinterpret_cast<const float4*>(&kq[buf][1][i0]);
    float m = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 k = k4[j];
      m = fmaf(S[4 * j], k.x, m), m = fmaf(S[4 * j + 1], k.y, m), m = fmaf(S[4 * j + 2], k.z, m),
      m = fmaf(S[4 * j + 3], k.w, m);
    }
    m_part[par][w][lane] = m;
    if (t + 1 < n) stage(static_cast<int>((t + 1) % 3), k_next, q_next);
    DeltaScalars after = {};
    if (t + 2 < n) load_kq(r0 + t + 2, k_next, q_next), after = load_scalars(r0 + t + 2);
    __syncthreads();
    if (t > 0) reduce_output(t - 1, par ^ 1, qinv_prev);
    float mem = 0.f, kk = 0.f, qq = 0.f;
    for (int x = 0; x < warps; ++x) mem += m_part[par][x][lane], kk += norm_part[buf][0][x], qq += norm_part[buf][1][x];
    const float kinv = 1.f / sqrtf(kk + 1e-6f), qinv = 1.f / sqrtf(qq + 1e-6f) * q_scale;
    const float decay = expf(-A * softplus(cur.a + dt_bias)), beta = 1.f / (1.f + expf(-cur.b));
    const float delta = (cur.v - mem * kinv * decay) * beta, kd = delta * kinv;
    float o = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 k = k4[j], q = q4[j];
      S[4 * j] = fmaf(S[4 * j], decay, k.x * kd), o = fmaf(S[4 * j], q.x, o);
      S[4 * j + 1] = fmaf(S[4 * j + 1], decay, k.y * kd), o = fmaf(S[4 * j + 1], q.y, o);
      S[4 * j + 2] = fmaf(S[4 * j + 2], decay, k.z * kd), o = fmaf(S[4 * j + 2], q.z, o);
      S[4 * j + 3] = fmaf(S[4 * j + 3], decay, k.w * kd), o = fmaf(S[4 * j + 3], q.w, o);
    }
    o_part[par][w][lane] = o;
    if (cur.snapshot >= 0 && has_col) {
      float* dst = state + cur.snapshot * state_stride + static_cast<int64_t>(h) * dk * dv;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        if (i0 + j < dk) dst[(i0 + j) * dv + col] = S[j];
    }
    qinv_prev = qinv;
    cur = next, next = after;
  }
  if (n > 0) {
    __syncthreads();
    reduce_output(n - 1, static_cast<int>((n - 1) & 1), qinv_prev);
  }
  if (has_col)
#pragma unroll
    for (int j = 0; j < 32; ++j)
      if (i0 + j < dk) st[(i0 + j) * dv + col] = S[j];
}

}  // namespace

void causal_conv1d_silu(const float* x, int64_t channels, const void* w, int64_t kernel,
                        const DeviceRecurrentMeta& meta, float* state, int64_t state_stride, float* out,
                        cudaStream_t stream) {
  if (meta.num_seqs == 0) return;
  if (kernel < 1 || kernel > kMaxConvKernel) fail_unsupported("conv kernel", kernel);
  const dim3 grid(static_cast<unsigned>(ceil_div(channels, 128)), static_cast<unsigned>(meta.num_seqs));
  launch(causal_conv1d_silu_kernel, grid, dim3(128), 0, stream, x, channels, static_cast<const __nv_bfloat16*>(w),
         static_cast<int>(kernel), meta, state, state_stride, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, const DeltaRuleParams& p,
                      const DeviceRecurrentMeta& meta, float* state, int64_t state_stride, float* out,
                      cudaStream_t stream) {
  if (meta.num_seqs == 0) return;
  if (p.k_dim < 1 || p.k_dim > 32 * kDeltaMaxWarps) fail_unsupported("linear attention k_dim", p.k_dim);
  if (p.v_dim < 1) fail_unsupported("linear attention v_dim", p.v_dim);
  if (p.num_k_heads < 1 || p.num_v_heads % p.num_k_heads != 0) fail_unsupported("num_v_heads", p.num_v_heads);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.v_dim, kDeltaCols)), static_cast<unsigned>(p.num_v_heads),
                  static_cast<unsigned>(meta.num_seqs));
  const dim3 block(static_cast<unsigned>(32 * ceil_div(p.k_dim, 32)));
  launch(gated_delta_rule_kernel, grid, block, 0, stream, qkv, qkv_stride, ba, p, meta, state, state_stride, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
