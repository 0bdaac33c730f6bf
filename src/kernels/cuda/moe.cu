#include "kernels/cuda/moe.cuh"

#include <algorithm>
#include <atomic>
#include <cub/block/block_scan.cuh>

#include "base/grow_buffer.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/grouped_matmul.cuh"
#include "kernels/cuda/matmul_stream.cuh"

namespace tachyon::kernels::cuda {
namespace {

constexpr int kMaxTopK = 16;
constexpr int kMaxExperts = 1024;
constexpr int kMaxGroups = 64;
constexpr int kRouteWarps = 4;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// (v, i) beats (ov, oi): a valid index, a larger value, or the lower index among equals
// (the reference's top_k_indices rule).
__device__ __forceinline__ void keep_better(float& v, int& i, float ov, int oi) {
  if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
}

// picked[0:k] = indices of the k largest of v[0:n] (ties: lower index), largest first. One warp;
// n <= 32 * 32: lane l owns v[l + 32b] and marks the ones already picked in bit b of `taken`, so a
// round is one pass over the lane's values and one warp argmax (no scan of the picked list).
__device__ void warp_top_k(const float* v, int n, int k, int* picked) {
  const int lane = threadIdx.x % 32;
  uint32_t taken = 0;
  for (int i = 0; i < k; ++i) {
    float bv = 0.f;
    int bi = -1;
    for (int j = lane, b = 0; j < n; j += 32, ++b)
      if (!(taken >> b & 1u)) keep_better(bv, bi, v[j], j);
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      keep_better(bv, bi, ov, oi);
    }
    if (bi >= 0 && bi % 32 == lane) taken |= 1u << (bi / 32);
    if (lane == 0) picked[i] = bi;
  }
  __syncwarp();
}

// Serial top-k for a few values (group selection), same rule.
__device__ void serial_top_k(const float* v, int n, int k, int* picked) {
  for (int i = 0; i < k; ++i) {
    int best = -1;
    for (int j = 0; j < n; ++j) {
      bool taken = false;
      for (int t = 0; t < i; ++t) taken |= picked[t] == j;
      if (!taken && (best < 0 || v[j] > v[best])) best = j;
    }
    picked[i] = best;
  }
}

// One warp per row; the row's scores live in shared memory. Decisions and weights follow
// kernels/reference/moe_rowwise.h step by step (final weights by lane 0 in slot order).
__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_kernel(const float* __restrict__ logits, int rows,
                                                                     MoeRoutingParams p, int32_t* __restrict__ ids,
                                                                     float* __restrict__ weights) {
  extern __shared__ float route_smem[];  // [kRouteWarps][2][n]
  __shared__ int picked_all[kRouteWarps][kMaxTopK];
  __shared__ int kept_all[kRouteWarps][kMaxGroups];
  __shared__ float group_all[kRouteWarps][kMaxGroups];
  pdl_enter();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRouteWarps + warp;
  if (row >= rows) return;
  const int n = static_cast<int>(p.num_experts), k = static_cast<int>(p.top_k);
  float* scores = route_smem + warp * 2 * n;
  float* choice = scores + n;
  int* picked = picked_all[warp];
  float* w = weights + static_cast<int64_t>(row) * k;
  for (int j = lane; j < n; j += 32) scores[j] = logits[static_cast<int64_t>(row) * n + j];
  __syncwarp();
  if (p.kind == MoeRouting::SoftmaxTopK) {
    float mx = -INFINITY, sum = 0.f;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, scores[j]);
    mx = warp_max(mx);
    for (int j = lane; j < n; j += 32) sum += (scores[j] = expf(scores[j] - mx));
    sum = warp_sum(sum);
    for (int j = lane; j < n; j += 32) scores[j] /= sum;
    __syncwarp();
    warp_top_k(scores, n, k, picked);
  } else if (p.kind == MoeRouting::TopKSoftmax) {
    warp_top_k(scores, n, k, picked);
    if (lane == 0) {
      const float mx = scores[picked[0]];
      float s = 0.f;
      for (int i = 0; i < k; ++i) s += (w[i] = expf(scores[picked[i]] - mx));
      for (int i = 0; i < k; ++i) w[i] /= s, ids[static_cast<int64_t>(row) * k + i] = picked[i];
    }
    return;  // already normalised
  } else {  // SigmoidGroupTopK
    for (int j = lane; j < n; j += 32) {
      scores[j] = sigmoid(scores[j]);
      choice[j] = scores[j] + (p.correction_bias ? p.correction_bias[j] : 0.f);
    }
    __syncwarp();
    const int groups = static_cast<int>(p.n_group), per_group = n / groups;
    float* group_score = group_all[warp];
    for (int gi = lane; gi < groups; gi += 32) {
      int top[2] = {0, 0};
      serial_top_k(choice + gi * per_group, per_group, min(2, per_group), top);
      group_score[gi] = choice[gi * per_group + top[0]] + (per_group > 1 ? choice[gi * per_group + top[1]] : 0.f);
    }
    __syncwarp();
    int* kept = kept_all[warp];
    if (lane == 0) serial_top_k(group_score, groups, static_cast<int>(p.topk_group), kept);
    __syncwarp();
    for (int j = lane; j < n; j += 32) {  // transformers masks dropped groups with 0.0
      bool in = false;
      for (int t = 0; t < p.topk_group; ++t) in |= kept[t] == j / per_group;
      if (!in) choice[j] = 0.f;
    }
    __syncwarp();
    warp_top_k(choice, n, k, picked);
  }
  if (lane != 0) return;
  for (int i = 0; i < k; ++i) w[i] = scores[picked[i]], ids[static_cast<int64_t>(row) * k + i] = picked[i];
  if (p.norm_topk_prob) {
    float s = 0.f;
    for (int i = 0; i < k; ++i) s += w[i];
    if (p.kind == MoeRouting::SigmoidGroupTopK) s += 1e-20f;
    for (int i = 0; i < k; ++i) w[i] /= s;
  }
  if (p.kind == MoeRouting::SigmoidGroupTopK)
    for (int i = 0; i < k; ++i) w[i] *= p.routed_scaling_factor;
}

// One CTA of kPlanThreads, a thread per expert: entries in expert-major order (placement inside
// an expert is in arrival order, which does not matter: every entry is computed independently),
// tiles of <= 16 entries; the experts' entry and tile offsets are one block-wide scan.
constexpr int kPlanThreads = kMaxExperts;
__global__ void __launch_bounds__(kPlanThreads) moe_plan_kernel(const int32_t* __restrict__ ids, int slots, int top_k,
                                                                int experts, int32_t* __restrict__ pos,
                                                                int32_t* __restrict__ entry_row,
                                                                GroupTile* __restrict__ tiles,
                                                                int32_t* __restrict__ num_tiles) {
  using Scan = cub::BlockScan<int2, kPlanThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int count[kMaxExperts], offset[kMaxExperts];
  pdl_enter();
  const int e = threadIdx.x;
  if (e < experts) count[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < slots; s += blockDim.x)
    if (ids[s] >= 0 && ids[s] < experts) atomicAdd(&count[ids[s]], 1);
  __syncthreads();
  const int n = e < experts ? count[e] : 0;
  int2 first, total;  // (entries, tiles) before this expert, and in all
  Scan(scan_storage)
      .ExclusiveScan(make_int2(n, (n + kGroupTileRows - 1) / kGroupTileRows), first, make_int2(0, 0),
                     [](int2 x, int2 y) { return make_int2(x.x + y.x, x.y + y.y); }, total);
  if (e < experts) offset[e] = first.x;
  if (e == 0) *num_tiles = total.y;
  for (int i = 0; i * kGroupTileRows < n; ++i)
    tiles[first.y + i] = {e, first.x + i * kGroupTileRows, min(kGroupTileRows, n - i * kGroupTileRows), 0};
  __syncthreads();
  if (e < experts) count[e] = 0;  // now the fill of each expert
  __syncthreads();
  for (int s = threadIdx.x; s < slots; s += blockDim.x) {
    const int x = ids[s];
    if (x < 0 || x >= experts) {
      pos[s] = -1;  // out of range: contributes nothing (moe_route never produces it)
      continue;
    }
    const int p = offset[x] + atomicAdd(&count[x], 1);
    pos[s] = p;
    entry_row[p] = s / top_k;
  }
}

// out[r, i] = Σ over the row's slots in ascending expert id of w · y[entry, i], from 0.f. The
// entry of slot s is pos[s] (-1: none), or without pos s itself where its expert is in range.
__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ ids,
                                   const float* __restrict__ weights, const int32_t* __restrict__ pos, int top_k,
                                   int experts, int64_t hidden, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x, i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (i >= hidden) return;
  int order[kMaxTopK];
  for (int s = 0; s < top_k; ++s) {  // insertion sort of the slots by expert id
    int j = s;
    for (; j > 0 && ids[r * top_k + order[j - 1]] > ids[r * top_k + s]; --j) order[j] = order[j - 1];
    order[j] = s;
  }
  float acc = 0.f;
  for (int j = 0; j < top_k; ++j) {
    const int64_t s = r * top_k + order[j];
    const int64_t p = pos ? pos[s] : (ids[s] >= 0 && ids[s] < experts ? s : -1);
    if (p >= 0) acc += y[p * hidden + i] * weights[s];
  }
  out[r * hidden + i] = acc;
}

// h[s, j] = the gated activation of gate_up[s, j] and gate_up[s, I + j] (the streamed experts).
__global__ void moe_gated_kernel(const float* __restrict__ gate_up, int64_t slots, int64_t I, bool clamped_swiglu,
                                 float limit, float alpha, float* __restrict__ h) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots * I) return;
  const int64_t s = i / I, j = i - s * I;
  h[i] = moe_gated(gate_up[s * 2 * I + j], gate_up[s * 2 * I + I + j], clamped_swiglu, limit, alpha);
}

}  // namespace

void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids, float* weights,
               cudaStream_t stream) {
  if (rows == 0) return;
  if (p.top_k < 1 || p.top_k > kMaxTopK || p.top_k > p.num_experts) fail_unsupported("moe top_k", p.top_k);
  if (p.num_experts > kMaxExperts) fail_unsupported("num_experts", p.num_experts);
  if (p.kind == MoeRouting::SigmoidGroupTopK &&
      (p.n_group < 1 || p.n_group > kMaxGroups || p.num_experts % p.n_group != 0 || p.topk_group > p.n_group))
    fail_unsupported("n_group", p.n_group);
  const size_t smem = kRouteWarps * 2 * p.num_experts * sizeof(float);
  launch(moe_route_kernel, dim3(static_cast<unsigned>(ceil_div(rows, kRouteWarps))), dim3(kRouteWarps * 32), smem,
         stream, logits, static_cast<int>(rows), p, ids, weights);
  TACHYON_CUDA_LAUNCH_CHECK();
}

MoeRunner::~MoeRunner() {
  cudaStreamSynchronize(stream_);
  for (void* p : table_memory_) cudaFree(p);
  for (auto& b : buffers_) cudaFree(b.first);
}

void* MoeRunner::grow(size_t index, size_t bytes) {
  if (buffers_.size() <= index) buffers_.resize(index + 1, {nullptr, 0});
  auto& [ptr, capacity] = buffers_[index];
  // Grow-only, geometrically: a steady loop never reallocates.
  return grow_buffer(
      ptr, capacity, bytes, std::max(bytes, 2 * capacity),
      [&](void* old) {
        TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
        TACHYON_CUDA_CHECK(cudaFree(old));
      },
      [](size_t n) { return cuda_malloc(n); });
}

void* MoeRunner::grow_zeroed(size_t index, size_t bytes) {
  // Reallocated exactly when the capacity changes (the new block may reuse the old address).
  const size_t before = index < buffers_.size() ? buffers_[index].second : 0;
  void* p = grow(index, bytes);
  if (buffers_[index].second != before) TACHYON_CUDA_CHECK(cudaMemsetAsync(p, 0, buffers_[index].second, stream_));
  return p;
}

const MoeRunner::Tables& MoeRunner::tables(const MoeExperts& e) {
  const int64_t E = e.num_experts;
  std::vector<const void*> host(static_cast<size_t>(4 * E), nullptr);
  for (int64_t i = 0; i < E; ++i) {
    if (e.gate_up[i].layout != WeightLayout::MmaFragments || e.down[i].layout != WeightLayout::MmaFragments)
      fail_unsupported("moe expert weight not from upload_weight, expert", i);
    if (e.gate_up[i].rows != 2 * e.intermediate || e.gate_up[i].cols != e.hidden || e.down[i].rows != e.hidden ||
        e.down[i].cols != e.intermediate)
      fail_unsupported("moe expert weight shape, expert", i);
    host[i] = e.gate_up[i].data;
    host[E + i] = e.down[i].data;
    if (e.gate_up_bias && !e.gate_up_bias[i].empty()) host[2 * E + i] = e.gate_up_bias[i].data;
    if (e.down_bias && !e.down_bias[i].empty()) host[3 * E + i] = e.down_bias[i].data;
  }
  auto it = tables_.find(host);
  if (it != tables_.end()) return it->second;
  // Once per layer (the first step): the tables are immutable afterwards.
  void* d = cuda_malloc(host.size() * sizeof(void*));
  TACHYON_CUDA_CHECK(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice, stream_));
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
  table_memory_.push_back(d);
  auto* t = static_cast<const void* const*>(d);
  const bool has_gu_bias = std::any_of(host.begin() + 2 * E, host.begin() + 3 * E, [](auto p) { return p != nullptr; });
  const bool has_down_bias = std::any_of(host.begin() + 3 * E, host.end(), [](auto p) { return p != nullptr; });
  if (has_gu_bias && std::count(host.begin() + 2 * E, host.begin() + 3 * E, nullptr) > 0)
    fail_unsupported("moe gate_up biases on only some experts", E);
  if (has_down_bias && std::count(host.begin() + 3 * E, host.end(), nullptr) > 0)
    fail_unsupported("moe down biases on only some experts", E);
  Tables tab{t, t + E, has_gu_bias ? reinterpret_cast<const float* const*>(t + 2 * E) : nullptr,
             has_down_bias ? reinterpret_cast<const float* const*>(t + 3 * E) : nullptr};
  return tables_.emplace(std::move(host), tab).first->second;
}

static std::atomic<uint64_t> g_streamed_calls{0};

uint64_t moe_streamed_calls() { return g_streamed_calls.load(); }

bool MoeRunner::streams(int64_t rows, int64_t slots, const Tables& tab, const MoeExperts& e) const {
  // Past 8 slots down runs once per 8 slots (its x rows); gate_up takes every slot at once.
  return !tab.gate_up_bias && !tab.down_bias && slots <= kStreamMaxGatherSlots &&
         stream_gather_fits(rows, e.hidden, slots, 2 * e.intermediate) &&
         stream_gather_fits(std::min<int64_t>(slots, kStreamMaxRows), e.intermediate, kStreamMaxRows, e.hidden);
}

void MoeRunner::run_streamed(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                             const MoeExperts& e, const Tables& tab, float* out) {
  ++g_streamed_calls;
  const int64_t slots = rows * top_k, I = e.intermediate, H = e.hidden;
  auto* gate_up = static_cast<float*>(grow(7, slots * 2 * I * sizeof(float)));  // [slots, 2I]
  auto* h = static_cast<float*>(grow(3, slots * I * sizeof(float)));            // [slots, I]
  auto* y = static_cast<float*>(grow(4, slots * H * sizeof(float)));            // [slots, hidden]
  StreamGather g;
  g.ids = ids, g.experts = static_cast<int>(e.num_experts), g.slots = static_cast<int>(slots);
  g.table = tab.gate_up, g.slots_per_row = static_cast<int>(top_k), g.n_local = static_cast<int>(2 * I);
  matmul_stream_gathered(x, static_cast<int>(rows), static_cast<int>(H), static_cast<int>(round_up(H, kMmaColPad) / 32),
                         g, gate_up, stream_);
  TACHYON_CUDA_LAUNCH_CHECK();
  launch(moe_gated_kernel, dim3(static_cast<unsigned>(ceil_div(slots * I, 256))), dim3(256), 0, stream_, gate_up,
         slots, I, e.clamped_swiglu, e.swiglu_limit, e.swiglu_alpha, h);
  TACHYON_CUDA_LAUNCH_CHECK();
  g.table = tab.down, g.slots_per_row = 1, g.n_local = static_cast<int>(H);
  for (int64_t first = 0; first < slots; first += kStreamMaxRows) {
    const int n = static_cast<int>(std::min<int64_t>(kStreamMaxRows, slots - first));
    g.ids = ids + first, g.slots = n;
    matmul_stream_gathered(h + first * I, n, static_cast<int>(I), static_cast<int>(round_up(I, kMmaColPad) / 32), g,
                           y + first * H, stream_);
    TACHYON_CUDA_LAUNCH_CHECK();
  }
  launch(moe_combine_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(H, 256))), dim3(256), 0,
         stream_, y, ids, weights, static_cast<const int32_t*>(nullptr), static_cast<int>(top_k),
         static_cast<int>(e.num_experts), H, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

void MoeRunner::run(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                    const MoeExperts& e, float* out) {
  if (rows == 0) return;
  if (top_k < 1 || top_k > kMaxTopK) fail_unsupported("moe top_k", top_k);
  if (e.num_experts > kMaxExperts) fail_unsupported("num_experts", e.num_experts);
  const int64_t slots = rows * top_k, I = e.intermediate, H = e.hidden;
  const int64_t max_tiles = ceil_div(slots, kGroupTileRows) + std::min(slots, e.num_experts);
  if (max_tiles > 65535) fail_unsupported("moe rows x top_k in one call", slots);
  const Tables& tab = tables(e);
  if (streams(rows, slots, tab, e)) return run_streamed(x, rows, ids, weights, top_k, e, tab, out);
  auto* pos = static_cast<int32_t*>(grow(0, slots * sizeof(int32_t)));
  auto* entry_row = static_cast<int32_t*>(grow(1, slots * sizeof(int32_t)));
  auto* tiles = static_cast<GroupTile*>(grow(2, max_tiles * sizeof(GroupTile) + sizeof(GroupTile)));
  auto* num_tiles = reinterpret_cast<int32_t*>(tiles + max_tiles);
  auto* h = static_cast<float*>(grow(3, slots * I * sizeof(float)));  // [entries, I]
  auto* y = static_cast<float*>(grow(4, slots * H * sizeof(float)));  // [entries, hidden]

  launch(moe_plan_kernel, dim3(1), dim3(kPlanThreads), 0, stream_, ids,
         static_cast<int>(slots), static_cast<int>(top_k), static_cast<int>(e.num_experts), pos, entry_row, tiles,
         num_tiles);
  TACHYON_CUDA_LAUNCH_CHECK();
  GroupedMatmul gate_up;
  gate_up.x = x, gate_up.x_row_stride = H, gate_up.x_rows = entry_row;
  gate_up.w_table = tab.gate_up, gate_up.bias_table = tab.gate_up_bias;
  gate_up.n = I, gate_up.k = H, gate_up.out = h, gate_up.out_row_stride = I;
  gate_up.gated = true, gate_up.clamped_swiglu = e.clamped_swiglu;
  gate_up.swiglu_limit = e.swiglu_limit, gate_up.swiglu_alpha = e.swiglu_alpha;
  GroupedMatmul down;
  down.x = h, down.x_row_stride = I;
  down.w_table = tab.down, down.bias_table = tab.down_bias;
  down.n = H, down.k = I, down.out = y, down.out_row_stride = H;
  // Decode-sized steps split k (grouped_matmul.cuh); both launches share the scratch, in stream order.
  const GroupedSplitKSize gu_size = grouped_splitk_size(gate_up, max_tiles), d_size = grouped_splitk_size(down, max_tiles);
  GroupedSplitK splitk;
  if (gu_size.counters > 0 || d_size.counters > 0) {
    splitk.partial = static_cast<float*>(grow(5, std::max(gu_size.partial_bytes, d_size.partial_bytes)));
    splitk.counters =
        static_cast<unsigned*>(grow_zeroed(6, std::max(gu_size.counters, d_size.counters) * sizeof(unsigned)));
  }
  grouped_matmul(gate_up, tiles, num_tiles, max_tiles, stream_, splitk.counters ? &splitk : nullptr);
  grouped_matmul(down, tiles, num_tiles, max_tiles, stream_, splitk.counters ? &splitk : nullptr);
  launch(moe_combine_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(ceil_div(H, 256))), dim3(256), 0,
         stream_, y, ids, weights, pos, static_cast<int>(top_k), static_cast<int>(e.num_experts), H, out);
  TACHYON_CUDA_LAUNCH_CHECK();
}

}  // namespace tachyon::kernels::cuda
