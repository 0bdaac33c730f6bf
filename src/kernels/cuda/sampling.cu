// One 1024-thread CTA per row draws kernels::sample_token's token with its arithmetic
// (sampling_arithmetic.h: one exp, integer masses, one rank key per candidate), so the token is
// the host's whatever the batch. No sort: every question the draw asks ("the k-th candidate",
// "where the cumulative mass reaches top_p", "where it passes u") is a radix descent over the
// 64-bit rank keys with count and mass histograms, eight key bits a level; once a bucket holds
// few enough candidates they move to shared memory and the remaining levels read only those.
#include "kernels/cuda/sampling.cuh"

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/sampling_arithmetic.h"

namespace tachyon::kernels::cuda {
namespace {

namespace arith = sampling_arithmetic;

constexpr int kThreads = 1024;
constexpr int kBuckets = 256;                  // 8 key bits a level
constexpr unsigned kGatherCap = 4096;          // candidates a descent may move to shared memory
constexpr uint32_t kMaskedWord = 0xffffffffu;  // scratch word of a masked logit: its key has bit 63 set
constexpr unsigned kAll = 0xffffffffu;

struct Histogram {
  unsigned count[kBuckets];
  unsigned long long mass[kBuckets];
};
struct Descent {  // shared by the CTA
  unsigned long long prefix;       // key bits fixed so far (the bucket of each level)
  unsigned long long mass_before;  // of the members ranked before the prefix's bucket
  unsigned long long count_before;
  unsigned bucket_count;  // members in the bucket chosen last
  unsigned list_size;
};
struct Crossing {
  uint64_t key;
  uint64_t mass_through;  // of the members up to and including it
};

// The rank key of candidate i from its scratch word (the bits of its p, or kMaskedWord).
__device__ __forceinline__ uint64_t key_at(const uint32_t* __restrict__ words, int64_t i) {
  return (static_cast<uint64_t>(words[i]) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}
__device__ __forceinline__ bool is_member(uint64_t key, uint64_t bound) { return key >= bound && !(key >> 63); }
__device__ __forceinline__ uint64_t mass_of(uint64_t key) { return arith::candidate_mass(arith::key_p(key)); }

// Adds a warp's candidates (the `valid` lanes, each into bucket d) to the histogram. Lanes of one
// bucket combine first: one atomic per bucket and warp, not per candidate (a flat row puts tens
// of thousands of candidates into a few buckets).
__device__ __forceinline__ void add_to_histogram(Histogram& h, bool valid, unsigned d, uint64_t mass) {
  if (!__ballot_sync(kAll, valid)) return;
  const unsigned group = __match_any_sync(kAll, valid ? d : kBuckets);
  if (!valid) return;
  // mass <= 2^40: two parts of at most 21 bits, each summed over <= 32 lanes within 32 bits
  const unsigned lo = __reduce_add_sync(group, static_cast<unsigned>(mass & 0x1fffff));
  const unsigned hi = __reduce_add_sync(group, static_cast<unsigned>(mass >> 21));
  if (threadIdx.x % 32 == static_cast<unsigned>(__ffs(group) - 1)) {
    atomicAdd(&h.count[d], static_cast<unsigned>(__popc(group)));
    atomicAdd(&h.mass[d], (static_cast<unsigned long long>(hi) << 21) + lo);
  }
}

// Warp 0: the bucket of this level where the cumulative count (by_count) or mass of the members
// reaches `target`, scanning buckets from the top; advances the descent past the buckets before it.
__device__ __forceinline__ void choose_bucket(const Histogram& h, bool by_count, uint64_t target, Descent& d) {
  const unsigned lane = threadIdx.x;
  uint64_t lane_count = 0, lane_mass = 0;  // lane l holds buckets 255 - 8l down to 248 - 8l
  for (int j = 0; j < 8; ++j) {
    const int b = kBuckets - 1 - 8 * static_cast<int>(lane) - j;
    lane_count += h.count[b], lane_mass += h.mass[b];
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
    if ((by_count ? count + h.count[b] : mass + h.mass[b]) >= need) break;
    count += h.count[b], mass += h.mass[b];
  }
  d.count_before += count, d.mass_before += mass;
  d.prefix = (d.prefix << 8) | static_cast<unsigned>(b);
  d.bucket_count = h.count[b];
}

// The first member (key >= bound) in rank order at which the cumulative count (by_count) or
// mass reaches target, 1 <= target <= the members' total. Every thread calls it.
__device__ Crossing find_crossing(const uint32_t* __restrict__ words, int64_t n, uint64_t bound, bool by_count,
                                  uint64_t target, Histogram& h, Descent& d, uint64_t* list) {
  __syncthreads();  // the previous descent's readers are done with d and the list
  if (threadIdx.x == 0) d.prefix = 0, d.mass_before = 0, d.count_before = 0;
  bool gathered = false;
  int64_t size = n;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBuckets; b += blockDim.x) h.count[b] = 0, h.mass[b] = 0;
    __syncthreads();
    const uint64_t prefix = d.prefix;
    for (int64_t base = threadIdx.x - threadIdx.x % 32; base < size; base += blockDim.x) {  // warp-uniform
      const int64_t i = base + threadIdx.x % 32;
      uint64_t key = 0;
      bool valid = false;
      if (i < size) {
        key = gathered ? list[i] : key_at(words, i);
        valid = is_member(key, bound) && (shift == 56 || (key >> (shift + 8)) == prefix);
      }
      add_to_histogram(h, valid, static_cast<unsigned>(key >> shift) & (kBuckets - 1), valid ? mass_of(key) : 0);
    }
    __syncthreads();
    if (threadIdx.x < 32) choose_bucket(h, by_count, target, d);
    __syncthreads();
    if (!gathered && shift > 0 && d.bucket_count <= kGatherCap) {
      const uint64_t chosen = d.prefix;
      if (threadIdx.x == 0) d.list_size = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint64_t key = key_at(words, i);
        if (is_member(key, bound) && (key >> shift) == chosen) list[atomicAdd(&d.list_size, 1u)] = key;
      }
      __syncthreads();
      gathered = true;
      size = d.list_size;
    }
  }
  return {d.prefix, d.mass_before + mass_of(d.prefix)};
}

__global__ void __launch_bounds__(kThreads) sample_tokens_kernel(const float* __restrict__ x, int64_t n,
                                                                 const TokenSampling* __restrict__ params,
                                                                 uint32_t* __restrict__ workspace,
                                                                 int32_t* __restrict__ ids) {
  pdl_enter();
  __shared__ Histogram h;
  __shared__ Descent d;
  __shared__ uint64_t list[kGatherCap];
  const int64_t r = blockIdx.x;
  const float* row = x + r * n;
  uint32_t* words = workspace + r * n;
  const TokenSampling s = params[r];
  if (!(s.temperature > 0.f)) {
    const int best = block_argmax(row, n);
    if (threadIdx.x == 0) ids[r] = best;
    return;
  }
  // x = logit / temperature of every finite logit into the scratch, its maximum, the survivors.
  float max_x = -INFINITY;
  unsigned survivors = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
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
  max_x = block_max(max_x);
  survivors = block_sum(survivors);
  if (survivors == 0) {
    if (threadIdx.x == 0) ids[r] = -1;
    return;
  }
  // p in place of x (each thread rereads its own words), and the total mass.
  unsigned long long total = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (words[i] != kMaskedWord) {
      const float p = arith::candidate_p(arith::bits_of<float>(words[i]), max_x);
      words[i] = arith::bits_of<uint32_t>(p);
      total += arith::candidate_mass(p);
    }
  uint64_t mass = block_sum(total), bound = 0;  // the members: candidates with key >= bound
  if (s.top_k > 0 && static_cast<unsigned>(s.top_k) < survivors) {
    const Crossing c = find_crossing(words, n, 0, true, static_cast<uint64_t>(s.top_k), h, d, list);
    bound = c.key, mass = c.mass_through;
  }
  if (s.top_p < 1.f) {
    const Crossing c = find_crossing(words, n, bound, false, arith::ceil_times(s.top_p, mass), h, d, list);
    bound = c.key, mass = c.mass_through;
  }
  if (s.min_p > 0.f) {  // p >= min_p * the top candidate's p, which is 1 (candidate_p of the largest x)
    const uint64_t at_least = arith::key_at_least(arith::mul_rn(s.min_p, 1.f));
    if (at_least > bound) {
      bound = at_least;
      unsigned long long m = 0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint64_t key = key_at(words, i);
        if (is_member(key, bound)) m += mass_of(key);
      }
      mass = block_sum(m);
    }
  }
  const Crossing c = find_crossing(words, n, bound, false, arith::floor_times(s.u, mass) + 1, h, d, list);
  if (threadIdx.x == 0) ids[r] = static_cast<int32_t>(arith::key_id(c.key));
}

}  // namespace

size_t sample_workspace_bytes(int64_t rows, int64_t n) { return static_cast<size_t>(rows * n) * sizeof(uint32_t); }

void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, void* workspace,
                   int32_t* ids, cudaStream_t stream) {
  if (rows == 0) return;
  launch(sample_tokens_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, x, n, params,
         static_cast<uint32_t*>(workspace), ids);
}

}  // namespace tachyon::kernels::cuda
