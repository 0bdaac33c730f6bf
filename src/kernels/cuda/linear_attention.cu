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

__global__ void gated_delta_rule_kernel(const float* __restrict__ qkv, int64_t qs, const float* __restrict__ ba,
                                        DeltaRuleParams p, DeviceRecurrentMeta meta, float* state,
                                        int64_t state_stride, float* __restrict__ out) {
  extern __shared__ float delta_smem[];  // S [dk][dv], then q [dk], k [dk]
  const int dk = static_cast<int>(p.k_dim), dv = static_cast<int>(p.v_dim);
  const int Hk = static_cast<int>(p.num_k_heads), Hv = static_cast<int>(p.num_v_heads), ratio = Hv / Hk;
  const int h = blockIdx.x, s = blockIdx.y, j = threadIdx.x;
  float* S = delta_smem;
  float* q = S + dk * dv;
  float* k = q + dk;
  pdl_enter();
  float* st = state + meta.seq_state_slot[s] * state_stride + static_cast<int64_t>(h) * dk * dv;
  if (j < dv)
    for (int i = 0; i < dk; ++i) S[i * dv + j] = st[i * dv + j];
  const float A = expf(p.A_log[h]), dt_bias = p.dt_bias[h];
  for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
    const float* row = qkv + r * qs;
    __syncthreads();  // the previous token's q, k are consumed
    for (int i = j; i < dk; i += blockDim.x) {
      q[i] = row[(h / ratio) * dk + i];
      k[i] = row[Hk * dk + (h / ratio) * dk + i];
    }
    __syncthreads();
    if (j >= dv) continue;
    float qq = 0.f, kk = 0.f;  // every thread reduces the same way: identical values
    for (int i = 0; i < dk; ++i) qq += q[i] * q[i], kk += k[i] * k[i];
    const float qinv = 1.f / sqrtf(qq + 1e-6f) / sqrtf(static_cast<float>(dk)), kinv = 1.f / sqrtf(kk + 1e-6f);
    const float g = -A * softplus(ba[r * 2 * Hv + Hv + h] + dt_bias);
    const float decay = expf(g), beta = 1.f / (1.f + expf(-ba[r * 2 * Hv + h]));
    float mem = 0.f;
    for (int i = 0; i < dk; ++i) mem += S[i * dv + j] * decay * (k[i] * kinv);
    const float delta = (row[2 * Hk * dk + h * dv + j] - mem) * beta;
    float o = 0.f;
    for (int i = 0; i < dk; ++i) {
      const float sij = S[i * dv + j] * decay + (k[i] * kinv) * delta;
      S[i * dv + j] = sij;
      o += sij * (q[i] * qinv);
    }
    out[r * Hv * dv + h * dv + j] = o;
    const int snap = meta.row_snapshot_slot[r];
    if (snap >= 0) {
      float* dst = state + snap * state_stride + static_cast<int64_t>(h) * dk * dv;
      for (int i = 0; i < dk; ++i) dst[i * dv + j] = S[i * dv + j];
    }
  }
  if (j < dv)
    for (int i = 0; i < dk; ++i) st[i * dv + j] = S[i * dv + j];
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
  if (p.v_dim < 1 || p.v_dim > 1024) fail_unsupported("linear attention v_dim", p.v_dim);
  if (p.num_k_heads < 1 || p.num_v_heads % p.num_k_heads != 0) fail_unsupported("num_v_heads", p.num_v_heads);
  const size_t smem = static_cast<size_t>(p.k_dim * p.v_dim + 2 * p.k_dim) * sizeof(float);
  if (smem > device_arch().smem_per_block) fail_unsupported("linear attention k_dim x v_dim on this GPU", p.k_dim * p.v_dim);
  static size_t smem_allowed = 48 * 1024;  // raised once, for the largest head seen
  if (smem > smem_allowed) {
    TACHYON_CUDA_CHECK(cudaFuncSetAttribute(gated_delta_rule_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    smem_allowed = smem;
  }
  const int threads = static_cast<int>(round_up(p.v_dim, 32));
  const dim3 grid(static_cast<unsigned>(p.num_v_heads), static_cast<unsigned>(meta.num_seqs));
  launch(gated_delta_rule_kernel, grid, dim3(threads), smem, stream, qkv, qkv_stride, ba, p, meta, state,
         state_stride, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
