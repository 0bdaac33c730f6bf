// A cluster of eight 512-thread CTAs per row draws kernels::sample_token's token with its arithmetic
// (sampling_arithmetic.h: one exp, integer masses, one rank key per candidate), so the token is
// the host's whatever the batch. No sort: every question the draw asks ("the k-th candidate",
// "where the cumulative mass reaches top_p", "where it passes u") is a radix descent over the
// 64-bit rank keys with count and mass histograms, eight key bits a level; once a bucket holds
// few enough candidates they move to shared memory and the remaining levels read only those.
// One CTA per row took 0.83 ms per step on the H200 at batch 1 (a flat row, top-p 0.9: about ten
// passes over 152k candidates on one SM); the cluster splits each pass eight ways. Before Hopper
// (no clusters) one CTA draws a row: every combine is an exact integer sum or a max, so the token
// is the same.
#include "kernels/cuda/sampling.cuh"

#include <cooperative_groups.h>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/sampling_arithmetic.h"

namespace tachyon::kernels::cuda {
namespace {

namespace arith = sampling_arithmetic;
namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kCluster = 8;                    // CTAs per row on Hopper (the portable cluster size): one slice each
constexpr int kBuckets = 256;                  // 8 key bits a level
constexpr unsigned kGatherCap = 4096;          // a bucket this small moves into CTA 0's shared memory
constexpr uint32_t kMaskedWord = 0xffffffffu;  // scratch word of a masked logit: its key has bit 63 set

// A bucket's mass is 64 bits kept as two 32-bit words: 64-bit shared-memory atomics are
// compare-and-swap loops on the GPU, 32-bit adds are native (the carry comes from the old value).
struct Histogram {
  unsigned count[kBuckets];
  unsigned mass_lo[kBuckets], mass_hi[kBuckets];
  __device__ __forceinline__ uint64_t mass(int b) const {
    return (static_cast<uint64_t>(mass_hi[b]) << 32) | mass_lo[b];
  }
  __device__ __forceinline__ void clear() {
    for (int b = threadIdx.x; b < kBuckets; b += blockDim.x) count[b] = 0, mass_lo[b] = 0, mass_hi[b] = 0;
  }
  __device__ __forceinline__ void add(int b, unsigned c, uint64_t m) {
    atomicAdd(&count[b], c);
    const unsigned lo = static_cast<unsigned>(m), old = atomicAdd(&mass_lo[b], lo);
    const unsigned carry = old + lo < old;
    if ((m >> 32) + carry) atomicAdd(&mass_hi[b], static_cast<unsigned>(m >> 32) + carry);
  }
};
struct Descent {  // a CTA's copy; every CTA of the row computes the same from the merged histograms
  unsigned long long prefix;       // key bits fixed so far (the bucket of each level)
  unsigned long long mass_before;  // of the members ranked before the prefix's bucket
  unsigned long long count_before;
  unsigned bucket_count;  // members in the bucket chosen last (the whole row)
  unsigned list_size;     // this CTA's gathered candidates
};
struct Crossing {
  uint64_t key;
  uint64_t mass_through;  // of the members up to and including it
};
struct Shared {
  Histogram local[2];  // this CTA's slice, by level parity: a level's merge reads the other CTAs' copy
  Histogram merged;    // the row's
  Descent d;
  uint64_t list[kGatherCap];
  unsigned long long slot;  // cluster reductions: this CTA's value
  Crossing result;          // CTA 0's, of a descent it finished alone
};

// The rank key of candidate i from its scratch word (the bits of its p, or kMaskedWord).
__device__ __forceinline__ uint64_t key_at(const uint32_t* __restrict__ words, int64_t i) {
  return (static_cast<uint64_t>(words[i]) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}
__device__ __forceinline__ bool is_member(uint64_t key, uint64_t bound) { return key >= bound && !(key >> 63); }
__device__ __forceinline__ uint64_t mass_of(uint64_t key) { return arith::candidate_mass(arith::key_p(key)); }

// The CTAs that draw one row: a cluster of kCluster (sm_90), or one CTA alone (OneCta).
#if !TACHYON_PRE_HOPPER_DEVICE_CODE
struct ClusterCtas {
  static constexpr int kCount = kCluster;
  cg::cluster_group group;
  __device__ unsigned rank() const { return group.block_rank(); }
  __device__ void sync() { group.sync(); }
  template <typename T>
  __device__ T* at(T* p, int r) {  // p's object in the shared memory of CTA r
    return group.map_shared_rank(p, static_cast<unsigned>(r));
  }
};
#endif
struct OneCta {
  static constexpr int kCount = 1;
  __device__ unsigned rank() const { return 0; }
  __device__ void sync() { __syncthreads(); }
  template <typename T>
  __device__ T* at(T* p, int) {
    return p;
  }
};

// This CTA's elements of the row: interleaved over the row's CTAs, so every pass reads whole lines.
struct Slice {
  int64_t first, stride;
};
template <typename Ctas>
__device__ __forceinline__ Slice my_slice(unsigned rank) {
  return {static_cast<int64_t>(rank) * blockDim.x + threadIdx.x, static_cast<int64_t>(Ctas::kCount) * blockDim.x};
}

// Combines each CTA's value (already reduced over the CTA) over the row's cluster: integer sums
// are exact, max is order-free, so every CTA gets the same result.
template <typename Ctas, typename Op>
__device__ unsigned long long cluster_combine(Ctas& cluster, Shared& sh, unsigned long long v, Op op) {
  if (threadIdx.x == 0) sh.slot = v;
  cluster.sync();
  unsigned long long out = *cluster.at(&sh.slot, 0);
  for (int r = 1; r < Ctas::kCount; ++r) out = op(out, *cluster.at(&sh.slot, r));
  cluster.sync();  // the slots are read before anyone writes them again
  return out;
}

// Counts a thread's run of candidates in one bucket before it moves on: consecutive candidates of
// a slice mostly share the top levels' buckets (a flat row puts most of the vocabulary into a
// few), so this is one shared atomic per run, not per candidate.
struct BucketRun {
  unsigned bucket = kBuckets, count = 0;
  unsigned long long mass = 0;
  __device__ __forceinline__ void add(Histogram& h, unsigned b, uint64_t m) {
    if (b != bucket) flush(h), bucket = b;
    ++count, mass += m;
  }
  __device__ __forceinline__ void flush(Histogram& h) {
    if (count) h.add(static_cast<int>(bucket), count, mass);
    count = 0, mass = 0;
  }
};

// Warp 0: the bucket of this level where the cumulative count (by_count) or mass of the members
// reaches `target`, scanning buckets from the top; advances the descent past the buckets before it.
__device__ __forceinline__ void choose_bucket(const Histogram& h, bool by_count, uint64_t target, Descent& d) {
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned lane = threadIdx.x;
  uint64_t lane_count = 0, lane_mass = 0;  // lane l holds buckets 255 - 8l down to 248 - 8l
  for (int j = 0; j < 8; ++j) {
    const int b = kBuckets - 1 - 8 * static_cast<int>(lane) - j;
    lane_count += h.count[b], lane_mass += h.mass(b);
  }
  uint64_t count_through = lane_count, mass_through = lane_mass;  // inclusive over lanes
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t c = __shfl_up_sync(kAll, count_through, o), m = __shfl_up_sync(kAll, mass_through, o);
    if (lane >= static_cast<unsigned>(o)) count_through += c, mass_through += m;
  }
  const uint64_t need = target - (by_count ? d.count_before : d.mass_before);  // >= 1
  const unsigned crossing = __ballot_sync(kAll, (by_count ? count_through : mass_through) >= need);
  // Never empty for a target within reach; the last lane otherwise (a wrong token, not a hang).
  const unsigned owner = crossing ? __ffs(crossing) - 1 : 31;
  if (lane != owner) return;
  uint64_t count = count_through - lane_count, mass = mass_through - lane_mass;  // of the lanes above
  int b = kBuckets - 1 - 8 * static_cast<int>(lane);
  for (int j = 0; j < 7; ++j, --b) {
    if ((by_count ? count + h.count[b] : mass + h.mass(b)) >= need) break;
    count += h.count[b], mass += h.mass(b);
  }
  d.count_before += count, d.mass_before += mass;
  d.prefix = (d.prefix << 8) | static_cast<unsigned>(b);
  d.bucket_count = h.count[b];
}

// Adds the members under the descent's prefix among `keys` (this CTA's slice of the row, or its
// gathered list) to h, by their digit at `shift`.
template <typename Keys>
__device__ __forceinline__ void histogram_level(Histogram& h, const Keys& keys, int64_t count, int64_t first,
                                                int64_t stride, uint64_t bound, int shift, uint64_t prefix) {
  BucketRun run;
  for (int64_t i = first; i < count; i += stride) {
    const uint64_t key = keys(i);
    if (is_member(key, bound) && (shift == 56 || (key >> (shift + 8)) == prefix))
      run.add(h, static_cast<unsigned>(key >> shift) & (kBuckets - 1), mass_of(key));
  }
  run.flush(h);
}

// The first member (key >= bound) in rank order at which the cumulative count (by_count) or
// mass reaches target, 1 <= target <= the members' total. Every thread of the cluster calls it;
// `parity` (the local histogram the next cluster level fills) carries over between calls.
// Cluster levels: each CTA's histogram of its slice, one cluster barrier, every CTA merges the
// eight and chooses the same bucket. Once the chosen bucket holds <= kGatherCap candidates in
// the whole row, each CTA gathers its share, CTA 0 collects them and finishes the descent alone
// (no more cluster barriers), and the others read its result.
template <typename Ctas>
__device__ Crossing find_crossing(Ctas& cluster, Shared& sh, const uint32_t* __restrict__ words,
                                  int64_t n, uint64_t bound, bool by_count, uint64_t target, int& parity) {
  Descent& d = sh.d;
  __syncthreads();  // the previous descent's readers are done with d and the list
  if (threadIdx.x == 0) d.prefix = 0, d.mass_before = 0, d.count_before = 0;
  const unsigned rank = cluster.rank();
  const Slice slice = my_slice<Ctas>(rank);
  const auto row_key = [&](int64_t i) { return key_at(words, i); };
  const auto list_key = [&](int64_t i) { return sh.list[i]; };
  // Ids are below n, so the bits of ~id above them are ones: a level of those alone puts every
  // candidate into bucket 255 and is skipped.
  const int id_bits = n > 1 ? 64 - __clzll(static_cast<unsigned long long>(n - 1)) : 0;
  bool gathered = false, alone = false;  // alone: CTA 0 over the row's gathered candidates
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (shift < 32 && shift >= id_bits) {
      if (threadIdx.x == 0) d.prefix = (d.prefix << 8) | (kBuckets - 1);
      __syncthreads();
      continue;
    }
    if (alone) {
      Histogram& h = sh.merged;
      h.clear();
      __syncthreads();
      histogram_level(h, list_key, d.list_size, threadIdx.x, blockDim.x, bound, shift, d.prefix);
      __syncthreads();
      if (threadIdx.x < 32) choose_bucket(h, by_count, target, d);
      __syncthreads();
      continue;
    }
    Histogram& h = sh.local[parity];
    parity ^= 1;
    h.clear();
    __syncthreads();
    histogram_level(h, row_key, n, slice.first, slice.stride, bound, shift, d.prefix);
    // Every CTA's histogram of this level is complete; the other parity's (last level's) is no
    // longer read by anyone, so the next level may clear it.
    cluster.sync();
    for (int b = threadIdx.x; b < kBuckets; b += blockDim.x) {
      unsigned count = 0;
      unsigned long long mass = 0;
      for (int r = 0; r < Ctas::kCount; ++r) {
        const Histogram* other = cluster.at(&h, r);
        count += other->count[b], mass += other->mass(b);
      }
      sh.merged.count[b] = count;
      sh.merged.mass_lo[b] = static_cast<unsigned>(mass), sh.merged.mass_hi[b] = static_cast<unsigned>(mass >> 32);
    }
    __syncthreads();
    if (threadIdx.x < 32) choose_bucket(sh.merged, by_count, target, d);
    __syncthreads();
    if (shift == 0 || d.bucket_count > kGatherCap) continue;
    // Gather: each CTA its share of the chosen bucket, then CTA 0 all of them.
    const uint64_t chosen = d.prefix;
    if (threadIdx.x == 0) d.list_size = 0;
    __syncthreads();
    for (int64_t i = slice.first; i < n; i += slice.stride) {
      const uint64_t key = key_at(words, i);
      if (is_member(key, bound) && (key >> shift) == chosen) sh.list[atomicAdd(&d.list_size, 1u)] = key;
    }
    cluster.sync();  // every share is complete (and stays until the result barrier below)
    gathered = true;
    if (rank != 0) break;
    unsigned offset = d.list_size;
    for (int r = 1; r < Ctas::kCount; ++r) {
      const unsigned size = cluster.at(&d, r)->list_size;
      const uint64_t* share = cluster.at(sh.list, r);
      for (unsigned i = threadIdx.x; i < size; i += blockDim.x) sh.list[offset + i] = share[i];
      offset += size;
    }
    __syncthreads();
    if (threadIdx.x == 0) d.list_size = offset;
    __syncthreads();
    alone = true;
  }
  if (gathered) {  // CTA 0 holds the result
    if (rank == 0 && threadIdx.x == 0) sh.result = {d.prefix, d.mass_before + mass_of(d.prefix)};
    cluster.sync();
    return *cluster.at(&sh.result, 0);
  }
  return {d.prefix, d.mass_before + mass_of(d.prefix)};
}

// Row blockIdx.x / Ctas::kCount, by the CTAs `cluster`.
template <typename Ctas>
__device__ __forceinline__ void sample_row(Ctas cluster, const float* __restrict__ x, int64_t n,
                                           const TokenSampling* __restrict__ params, uint32_t* __restrict__ workspace,
                                           int32_t* __restrict__ ids) {
  pdl_enter();
  __shared__ Shared sh;
  const unsigned rank = cluster.rank();
  const int64_t r = blockIdx.x / Ctas::kCount;
  const float* row = x + r * n;
  uint32_t* words = workspace + r * n;
  const TokenSampling s = params[r];
  if (!(s.temperature > 0.f)) {  // greedy: one CTA of the cluster (no cluster barrier on this path)
    if (rank == 0) {
      const int best = block_argmax(row, n);
      if (threadIdx.x == 0) ids[r] = best;
    }
    return;
  }
  const Slice slice = my_slice<Ctas>(rank);
  // x = logit / temperature of every finite logit into the scratch, its maximum, the survivors.
  float max_x = -INFINITY;
  unsigned survivors = 0;
  for (int64_t i = slice.first; i < n; i += slice.stride) {
    const float l = row[i];
    if (l > -INFINITY) {
      const float xi = l / s.temperature;
      max_x = fmaxf(max_x, xi);
      ++survivors;
      words[i] = arith::bits_of<uint32_t>(xi);
    } else {
      words[i] = kMaskedWord;
    }
  }
  const auto max_of = [](unsigned long long a, unsigned long long b) {
    return arith::bits_of<float>(static_cast<uint32_t>(a)) >= arith::bits_of<float>(static_cast<uint32_t>(b)) ? a : b;
  };
  const auto sum_of = [](unsigned long long a, unsigned long long b) { return a + b; };
  max_x = arith::bits_of<float>(static_cast<uint32_t>(
      cluster_combine(cluster, sh, arith::bits_of<uint32_t>(block_max(max_x)), max_of)));
  survivors = static_cast<unsigned>(cluster_combine(cluster, sh, block_sum(survivors), sum_of));
  if (survivors == 0) {
    if (rank == 0 && threadIdx.x == 0) ids[r] = -1;
    return;
  }
  // p in place of x (each thread rereads its own words), and the total mass.
  unsigned long long total = 0;
  for (int64_t i = slice.first; i < n; i += slice.stride)
    if (words[i] != kMaskedWord) {
      const float p = arith::candidate_p(arith::bits_of<float>(words[i]), max_x);
      words[i] = arith::bits_of<uint32_t>(p);
      total += arith::candidate_mass(p);
    }
  // The cluster barriers in cluster_combine also order the words' writes before other CTAs read them.
  uint64_t mass = cluster_combine(cluster, sh, block_sum(total), sum_of), bound = 0;  // members: key >= bound
  int parity = 0;
  if (s.top_k > 0 && static_cast<unsigned>(s.top_k) < survivors) {
    const Crossing c = find_crossing(cluster, sh, words, n, 0, true, static_cast<uint64_t>(s.top_k), parity);
    bound = c.key, mass = c.mass_through;
  }
  if (s.top_p < 1.f) {
    const Crossing c = find_crossing(cluster, sh, words, n, bound, false, arith::ceil_times(s.top_p, mass), parity);
    bound = c.key, mass = c.mass_through;
  }
  if (s.min_p > 0.f) {  // p >= min_p * the top candidate's p, which is 1 (candidate_p of the largest x)
    const uint64_t at_least = arith::key_at_least(arith::mul_rn(s.min_p, 1.f));
    if (at_least > bound) {
      bound = at_least;
      unsigned long long m = 0;
      for (int64_t i = slice.first; i < n; i += slice.stride) {
        const uint64_t key = key_at(words, i);
        if (is_member(key, bound)) m += mass_of(key);
      }
      mass = cluster_combine(cluster, sh, block_sum(m), sum_of);
    }
  }
  const Crossing c = find_crossing(cluster, sh, words, n, bound, false, arith::floor_times(s.u, mass) + 1, parity);
  if (rank == 0 && threadIdx.x == 0) ids[r] = static_cast<int32_t>(arith::key_id(c.key));
  cluster.sync();  // no CTA leaves while another still reads its last histogram
}

// Launched in clusters of kCluster CTAs (sm_90 code only: device_arch.h).
__global__ void __launch_bounds__(kThreads, 1)
    sample_tokens_cluster_kernel(const float* __restrict__ x, int64_t n, const TokenSampling* __restrict__ params,
                                 uint32_t* __restrict__ workspace, int32_t* __restrict__ ids) {
#if TACHYON_PRE_HOPPER_DEVICE_CODE
  __trap();
#else
  sample_row(ClusterCtas{cg::this_cluster()}, x, n, params, workspace, ids);
#endif
}
__global__ void __launch_bounds__(kThreads, 1)
    sample_tokens_cta_kernel(const float* __restrict__ x, int64_t n, const TokenSampling* __restrict__ params,
                             uint32_t* __restrict__ workspace, int32_t* __restrict__ ids) {
  sample_row(OneCta{}, x, n, params, workspace, ids);
}

}  // namespace

size_t sample_workspace_bytes(int64_t rows, int64_t n) { return static_cast<size_t>(rows * n) * sizeof(uint32_t); }

void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, void* workspace,
                   int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  if (device_arch().hopper)
    return launch_clustered(sample_tokens_cluster_kernel, static_cast<unsigned>(rows * kCluster), kThreads, 0, stream,
                            kCluster, x, n, params, static_cast<uint32_t*>(workspace), ids);
  launch(sample_tokens_cta_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, x, n, params,
         static_cast<uint32_t*>(workspace), ids);
}

}  // namespace tachyon::kernels::cuda
