#include "kernels/cuda/elementwise.cuh"

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
namespace {

__global__ void embedding_kernel(const void* __restrict__ table, bool packed, int64_t vocab, int64_t dim,
                                 const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x, given = ids[r], id = given >= 0 && given < vocab ? given : 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = packed ? __bfloat162float(static_cast<const __nv_bfloat16*>(table)[mma_fragment_index(id, c, dim)])
                           : static_cast<const float*>(table)[id * dim + c];
    out[r * dim + c] = v * scale;
  }
}

__global__ void gated_activation_kernel(const float* __restrict__ gate_up, int64_t rows, int64_t dim, bool gelu,
                                        float* __restrict__ out) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * dim) return;
  const int64_t r = i / dim, c = i % dim;
  const float g = gate_up[r * 2 * dim + c];
  out[i] = gated(g, gate_up[r * 2 * dim + dim + c], gelu);
}

// The same per element, four columns per thread and the row from the grid (dim % 4 == 0): 16-byte
// accesses and no 64-bit division per element (the scalar kernel ran at half the copy bandwidth).
// release_first: at one row the down projection after this kernel streams its weights (matmul_stream),
// and its CTAs fill their rings during this kernel instead of after it. That first measured net
// zero (the rings took their bytes from gate_up's last CTAs); since gate_up's CTAs take their n-tiles
// from a counter and end together, it pays: H200, device wait per batch-1 step -0.45%, three
// alternating rounds (docs/perf/cuda.md).
__global__ void gated_activation4_kernel(const float4* __restrict__ gate_up, int64_t dim4, bool gelu,
                                         float4* __restrict__ out, bool release_first) {
  if (release_first) {
    pdl_enter_releasing_first();
  } else {
    pdl_enter();
  }
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (c >= dim4) return;
  const float4 g = gate_up[r * 2 * dim4 + c], u = gate_up[r * 2 * dim4 + dim4 + c];
  out[r * dim4 + c] = make_float4(gated(g.x, u.x, gelu), gated(g.y, u.y, gelu), gated(g.z, u.z, gelu),
                                  gated(g.w, u.w, gelu));
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void gather_rows_kernel(const float* __restrict__ src, const int32_t* __restrict__ rows, int64_t width,
                                   float* __restrict__ dst) {
  pdl_enter();
  const int64_t i = blockIdx.x, from = rows[i];
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dst[i * width + c] = src[from * width + c];
}

// One 1024-thread CTA per row (block_reduce.cuh: the first maximum).
__global__ void __launch_bounds__(1024) argmax_kernel(const float* __restrict__ x, int64_t n, int32_t* __restrict__ ids) {
  pdl_enter();
  const int best = block_argmax(x + static_cast<int64_t>(blockIdx.x) * n, n);
  if (threadIdx.x == 0) ids[blockIdx.x] = best;
}

// One 256-thread CTA per row: each thread keeps its strided top two in the order (value
// descending, index ascending), warps and the CTA merge them with the same order (so `best` is
// the first maximum and `second` the first maximum of the rest); then the softmax sum (float
// exponentials summed in double: the probabilities only order a draft tree's runner-ups).
struct Ranked {
  float v;
  int i;
};
__device__ __forceinline__ bool before(Ranked a, Ranked b) { return a.v > b.v || (a.v == b.v && a.i < b.i); }
__device__ __forceinline__ void insert(Ranked (&t)[2], Ranked c) {
  if (before(c, t[0])) t[1] = t[0], t[0] = c;
  else if (before(c, t[1])) t[1] = c;
}
__device__ __forceinline__ void merge_shfl(Ranked (&t)[2], int o) {
  const Ranked a{__shfl_xor_sync(0xffffffffu, t[0].v, o), __shfl_xor_sync(0xffffffffu, t[0].i, o)};
  const Ranked b{__shfl_xor_sync(0xffffffffu, t[1].v, o), __shfl_xor_sync(0xffffffffu, t[1].i, o)};
  insert(t, a);
  insert(t, b);
}
__global__ void __launch_bounds__(256) top_two_kernel(const float* __restrict__ x, int64_t n, TopTwo* __restrict__ out) {
  pdl_enter();
  __shared__ Ranked tops[8][2];
  __shared__ double sums[8];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  const Ranked none{-INFINITY, 0x7fffffff};
  Ranked t[2] = {none, none};
  for (int64_t c = threadIdx.x; c < n; c += 256) insert(t, {row[c], static_cast<int>(c)});
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) merge_shfl(t, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) tops[warp][0] = t[0], tops[warp][1] = t[1];
  __syncthreads();
  if (warp == 0) {
    t[0] = lane < 8 ? tops[lane][0] : none, t[1] = lane < 8 ? tops[lane][1] : none;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merge_shfl(t, o);
    if (lane == 0) tops[0][0] = t[0], tops[0][1] = t[1];
  }
  __syncthreads();
  const Ranked best = tops[0][0], second = tops[0][1];
  double sum = 0;
  for (int64_t c = threadIdx.x; c < n; c += 256) sum += expf(row[c] - best.v);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < 8; ++w) total += sums[w];
    TopTwo& r = out[blockIdx.x];
    r.best = best.i == 0x7fffffff ? -1 : best.i;
    r.second = second.i == 0x7fffffff ? -1 : second.i;
    r.p_best = best.i == 0x7fffffff ? 0.f : static_cast<float>(1.0 / total);
    r.p_second = second.i == 0x7fffffff ? 0.f : static_cast<float>(expf(second.v - best.v) / total);
  }
}

// dst[r, i] = src[r, i] with row strides (in-place-safe only when the ranges do not overlap).
__global__ void copy_strided_kernel(const float* __restrict__ src, int64_t src_stride, int64_t rows, int64_t width,
                                    float* __restrict__ dst, int64_t dst_stride) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t r = i / width, c = i % width;
  dst[r * dst_stride + c] = src[r * src_stride + c];
}

__global__ void gate_multiply_kernel(float* __restrict__ x, int64_t rows, int64_t dim,
                                     const float* __restrict__ gate, int64_t gate_stride, int64_t group, bool sigmoid) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * dim) return;
  const int64_t r = i / dim, c = i % dim;
  const float g = gate[r * gate_stride + c / group];
  x[i] *= sigmoid ? 1.f / (1.f + expf(-g)) : silu(g);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(ceil_div(n, 256)); }

}  // namespace

void embedding(const void* table, bool fragment_packed, int64_t vocab, int64_t dim, const int32_t* ids, int64_t rows,
               float scale, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch(embedding_kernel, static_cast<unsigned>(rows), 256, 0, stream, table, fragment_packed, vocab, dim, ids, scale,
         out);
}

void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out,
                      cudaStream_t stream) {
  if (rows * dim == 0) return;
  const bool aligned = dim % 4 == 0 && reinterpret_cast<uintptr_t>(gate_up) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (aligned && rows <= 65535) {
    launch(gated_activation4_kernel, dim3(blocks_for(dim / 4), static_cast<unsigned>(rows)), 256, 0, stream,
           reinterpret_cast<const float4*>(gate_up), dim / 4, act == Activation::GeluTanh,
           reinterpret_cast<float4*>(out), rows == 1);
    return;
  }
  launch(gated_activation_kernel, blocks_for(rows * dim), 256, 0, stream, gate_up, rows, dim,
         act == Activation::GeluTanh, out);
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch(add_kernel, blocks_for(n), 256, 0, stream, x, y, n);
}

void argmax(const float* x, int64_t rows, int64_t n, int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  launch(argmax_kernel, static_cast<unsigned>(rows), 1024, 0, stream, x, n, ids);
}

void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out, cudaStream_t stream) {
  if (rows == 0) return;
  launch(top_two_kernel, static_cast<unsigned>(rows), 256, 0, stream, x, n, out);
}

void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst, cudaStream_t stream) {
  if (n == 0) return;
  launch(gather_rows_kernel, static_cast<unsigned>(n), 256, 0, stream, src, rows, width, dst);
}

void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst, int64_t dst_stride,
                  cudaStream_t stream) {
  if (rows * width == 0) return;
  launch(copy_strided_kernel, blocks_for(rows * width), 256, 0, stream, src, src_stride, rows, width, dst, dst_stride);
}

void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride, int64_t group,
                   GateFn fn, cudaStream_t stream) {
  if (rows * dim == 0) return;
  launch(gate_multiply_kernel, blocks_for(rows * dim), 256, 0, stream, x, rows, dim, gate, gate_stride, group,
         fn == GateFn::Sigmoid);
}

namespace {
// A copy of whole 16-byte units where its ends allow (dst, src, bytes all multiples of 16), else of
// 4-byte words (a quantized token's param records: heads · 4 bytes). Workspace offsets are
// multiples of 16 bytes (CopyDesc).
__device__ __forceinline__ void copy_words(uint32_t* __restrict__ dst, const uint32_t* __restrict__ src, int64_t words) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 == 0) && words % 4 == 0) {
    uint4* d = reinterpret_cast<uint4*>(dst);
    const uint4* s = reinterpret_cast<const uint4*>(src);
    for (int64_t i = threadIdx.x; i < words / 4; i += blockDim.x) d[i] = s[i];
    return;
  }
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}
__global__ void gather_copies_kernel(const CopyDesc* __restrict__ copies, uint32_t* __restrict__ workspace) {
  pdl_enter();
  const CopyDesc c = copies[blockIdx.x];
  copy_words(workspace + c.offset, c.src, c.count);
}
__global__ void scatter_copies_kernel(const CopyDesc* __restrict__ copies, const uint32_t* __restrict__ workspace) {
  pdl_enter();
  const CopyDesc c = copies[blockIdx.x];
  copy_words(c.dst, workspace + c.offset, c.count);
}
}  // namespace

void copy_many(const CopyDesc* copies, int64_t num_copies, uint32_t* workspace, cudaStream_t stream) {
  if (num_copies == 0) return;
  launch(gather_copies_kernel, static_cast<unsigned>(num_copies), 128, 0, stream, copies, workspace);
  launch(scatter_copies_kernel, static_cast<unsigned>(num_copies), 128, 0, stream, copies,
         static_cast<const uint32_t*>(workspace));
}

}  // namespace tachyon::kernels::cuda
