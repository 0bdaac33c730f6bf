// Shared CUDA helpers: error checks, the fragment layout of matrices, small device utilities.
// Included by .cu files and by cuda_backend.cpp (host code), so it stays free of fmt.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/step_graph.h"
#include "kernels/cuda/step_timeline.h"
#if TACHYON_TIMELINE && defined(__CUDACC__)
#include "kernels/cuda/step_timeline.cuh"
#endif

namespace tachyon::kernels::cuda {

// Throws tachyon::Error naming the call site (defined in cuda_backend.cpp).
[[noreturn]] void fail_cuda(const char* file, int line, const char* expr, cudaError_t err);
// Throws tachyon::Error: `what` (e.g. "head_dim") = value is not supported by the CUDA kernels.
[[noreturn]] void fail_unsupported(const char* what, int64_t value);
// An attribute of the current device (SM count, opt-in shared memory per CTA, ...).
int device_attribute(cudaDeviceAttr attribute);

#define TACHYON_CUDA_CHECK(expr)                                                             \
  do {                                                                                        \
    const cudaError_t tachyon_cuda_err_ = (expr);                                            \
    if (tachyon_cuda_err_ != cudaSuccess)                                                    \
      ::tachyon::kernels::cuda::fail_cuda(__FILE__, __LINE__, #expr, tachyon_cuda_err_);     \
  } while (0)
// After every launch: a bad configuration surfaces here, not at the next synchronizing call.
#define TACHYON_CUDA_LAUNCH_CHECK() TACHYON_CUDA_CHECK(cudaGetLastError())

// Throws tachyon::Error for a failed allocation of `bytes`: how much was asked for and, on the
// device, how much was free of how much, so that an out-of-memory names its size (a 32k prompt's
// workspace, a KV pool) instead of only the allocating line (defined in cuda_backend.cpp).
[[noreturn]] void fail_allocation(bool device, size_t bytes, cudaError_t err);

// `bytes` of device memory, or of pinned host memory; out of memory throws tachyon::Error.
inline void* cuda_malloc(size_t bytes) {
  void* p = nullptr;
  if (const cudaError_t err = cudaMalloc(&p, bytes); err != cudaSuccess) fail_allocation(true, bytes, err);
  return p;
}
inline void* cuda_malloc_host(size_t bytes) {
  void* p = nullptr;
  if (const cudaError_t err = cudaMallocHost(&p, bytes); err != cudaSuccess) fail_allocation(false, bytes, err);
  return p;
}

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Matrices are stored as mma.m16n8k16 B fragments (WeightLayout::MmaFragments, see
// kernels/weight.h), padded to kMmaRowPad output rows and kMmaColPad input columns.
constexpr int64_t kMmaRowPad = 128;  // one prefill tile of output features
constexpr int64_t kMmaColPad = 64;   // one prefill k-stage
// The canonical reduction of every matmul output, which makes a row's bits independent of
// the batch and of which kernel ran: k is cut into segments of kSegmentK; each segment is one
// chain of m16n8k16 MMAs in k order starting from zero; segment sums are added in order,
// starting from 0.f; the bias is added last.
constexpr int64_t kSegmentK = 512;

// Offset (in bf16 elements) of W[n, k] in the fragment layout of a matrix with `cols` columns.
// Unit: (8 rows, 32 cols) = 32 lanes x 8 bf16; lane = (n % 8) * 4 + c holds, for the unit's
// k-tiles t = 0, 1, the B registers {k 2c, 2c+1} and {k 2c+8, 2c+9} (k relative to 16t).
__host__ __device__ inline int64_t mma_fragment_index(int64_t n, int64_t k, int64_t cols) {
  const int64_t kp_count = round_up(cols, kMmaColPad) / 32;
  const int64_t kk = k % 32, t = kk / 16, kt = kk % 16;
  const int64_t lane = (n % 8) * 4 + (kt % 8) / 2;
  const int64_t reg = 2 * t + (kt >= 8 ? 1 : 0);
  return (((n / 8) * kp_count + k / 32) * 32 + lane) * 8 + reg * 2 + (kt % 2);
}

// The wgmma kernels' core-matrix order (pack_core_weight, to_core_rows_kernel): core matrix
// (row / 8, k / 8) at ((row / 8) · kb_count + k / 8) · 128 bytes, each of its 8 rows 16 bytes of k.
// The index, in 16-byte rows, of `row`'s row in the core matrix at k-block `k_block`.
__host__ __device__ inline int64_t core_row_index(int64_t row, int64_t k_block, int64_t kb_count) {
  return ((row / 8) * kb_count + k_block) * 8 + row % 8;
}

// Device code compiled for a GPU before Hopper (sm_80-sm_89, or compute_80 PTX JIT-compiled on
// any GPU): the Hopper-only kernels (bulk copies, mbarrier transactions, clusters) are compiled to
// a trap there, and the backend never launches them where this code runs (device_arch.h decides by
// the loaded code's PTX version, not by the device alone).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TACHYON_PRE_HOPPER_DEVICE_CODE 1
#else
#define TACHYON_PRE_HOPPER_DEVICE_CODE 0
#endif

#ifdef __CUDACC__
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Programmatic dependent launch (sm_90). Every kernel of the backend is launched by `launch`
// below, so it may start while the kernel before it in the stream is still running. The
// rule that keeps this correct: a kernel touches nothing another kernel writes (activations,
// KV, workspaces) before pdl_wait(), which returns once the previous kernel has completed and
// its writes are visible (and that kernel itself waited for its own predecessor, so the
// whole stream before it is done). Only constant data (weights) may be read before it.
// pdl_launch_dependents() lets the next kernel be scheduled early (its CTAs then prefetch
// weights or wait).
__device__ __forceinline__ void pdl_wait() {
#if TACHYON_TIMELINE
  const bool record = timeline_records_here();
  const uint64_t t_call = record ? global_timer() : 0;
  const unsigned slot = record ? timeline_reserve() : 0;
#endif
#if !TACHYON_PRE_HOPPER_DEVICE_CODE  // before Hopper nothing launches early: the predecessor has ended
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#if TACHYON_TIMELINE
  if (record) timeline_write(slot, t_call, global_timer(), 0);
#endif
}
// Thread 0 marks a point of its CTA's run on the step timeline (step_timeline.h) in
// TACHYON_TIMELINE builds; nothing elsewhere.
__device__ __forceinline__ void cta_timeline_mark([[maybe_unused]] unsigned kind) {
#if TACHYON_TIMELINE
  if (threadIdx.x == 0) timeline_mark(kind);
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if !TACHYON_PRE_HOPPER_DEVICE_CODE
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The entry of a kernel that reads nothing before its predecessor ends: it waits, then releases
// the next kernel. Releasing before the wait everywhere moved ~1.5-2% from batch 8 to batch 1
// decode (H200, two calls; docs/perf/cuda.md), so
// only the kernels measured to gain from it do (pdl_enter_releasing_first).
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// The entry of a small kernel that lets the next kernel be scheduled before it waits: the next
// streaming matmul's CTAs then take each SM as the previous matmul's CTAs leave and fill their
// rings while this kernel waits and runs. Sound by the rule above, for any successor. Only the
// attention prologue must wait first: the decode attention after it reads older keys before its
// own wait, which needs every kernel before the prologue completed (attention.cu).
__device__ __forceinline__ void pdl_enter_releasing_first() {
  pdl_launch_dependents();
  pdl_wait();
}

// cluster_x > 1: thread block clusters of cluster_x CTAs along x (grid.x a multiple of it).
template <typename... Params>
void launch_now(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cluster_x,
                Params... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  // Programmatic launch and clusters are Hopper's: elsewhere each kernel starts once its
  // predecessor ended (pdl_wait compiles to nothing there) and no cluster is asked for.
  const DeviceArch& arch = device_arch();
  const bool hopper = arch.hopper;
  if (cluster_x > 1 && !hopper) fail_unsupported("a thread block cluster before Hopper, CTAs", cluster_x);
  // The device would take more where the arch is forced (tests): the limit of the GPU emulated holds.
  if (smem > arch.smem_per_block)
    fail_unsupported("dynamic shared memory per block beyond this GPU's, bytes", static_cast<int64_t>(smem));
  cudaLaunchAttribute attribute[2];
  unsigned count = 0;
  if (hopper) {
    attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attribute[count].id = cudaLaunchAttributeClusterDimension;
    attribute[count].val.clusterDim.x = cluster_x;
    attribute[count].val.clusterDim.y = 1;
    attribute[count++].val.clusterDim.z = 1;
  }
  config.attrs = attribute;
  config.numAttrs = count;
  TACHYON_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Launches `kernel` on `stream` in clusters of cluster_x CTAs (1: none) with programmatic stream
// serialization allowed (see pdl_wait); while a step is being recorded (step_graph.h) the launch
// is appended to it instead.
template <typename... Params, typename... Args>
void launch_clustered(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      unsigned cluster_x, Args&&... args) {
  if (StepGraphs* graphs = active_step_graphs()) {
    thread_local std::string key;  // reused: no allocation per recorded launch
    key.clear();
    append_key(key, kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, cluster_x);
    auto params = std::make_tuple(static_cast<Params>(std::forward<Args>(args))...);
    std::apply([&](const auto&... p) { append_key(key, p...); }, params);
    graphs->record(key, [=](cudaStream_t s) {
      std::apply([&](const auto&... p) { launch_now(kernel, grid, block, smem, s, cluster_x, p...); }, params);
    });
    return;
  }
  launch_now(kernel, grid, block, smem, stream, cluster_x, static_cast<Params>(std::forward<Args>(args))...);
}
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_clustered(kernel, grid, block, smem, stream, 1u, std::forward<Args>(args)...);
}
#endif

}  // namespace tachyon::kernels::cuda
