// How many KV blocks the pool gets, decided once when an engine starts (counts and bytes only:
// the engine measures the machine and passes the numbers in, so these rules test on counts).
//
//   explicit blocks (--kv-blocks)      that many
//   explicit bytes (--kv-cache-memory) as many blocks as fit in them
//   a GPU                              utilization × its memory, minus what weights and the
//                                      warmed-up workspaces already use (vLLM's rule); the
//                                      pool is not capped: spare blocks keep prefixes cached
//   the host (CPU)                     kHostKvShare of the memory available after the weights
//                                      were loaded, capped at what max_concurrent sequences of
//                                      the full context need (a small model does not reserve
//                                      gigabytes). Pool pages are only touched once written,
//                                      so resident memory grows with use, not with the pool.
//
//   KvDemand d{.bytes_per_block = layout.bytes_per_block(), .block_size = 16, .max_context = 40960,
//              .max_concurrent = 16};
//   KvPoolSize size = kv_pool_on_host(host_available_bytes(), d);
//   log::info("KV pool: {}", size.why);
#pragma once

#include <cstdint>
#include <string>

namespace tachyon::engine {

// The share of the host's available memory a CPU engine's KV pool may take by default: half,
// so that the page cache, the server's buffers and a second model keep room.
inline constexpr double kHostKvShare = 0.5;
inline constexpr double kDefaultGpuMemoryUtilization = 0.90;


struct KvDemand {
  int64_t bytes_per_block = 0;  // kv::KvLayout::bytes_per_block() of the storage format
  int32_t block_size = 16;
  int32_t max_context = 0;      // tokens one sequence may reach
  int32_t max_concurrent = 1;   // sequences at once
  int64_t blocks_for_full_use() const;  // max_concurrent sequences of max_context tokens
};

struct KvPoolSize {
  int32_t num_blocks = 0;
  int32_t num_sliding_blocks = 0;  // the sliding-window layers' own pool (kv::KvLayout::splits_sliding), if any
  int64_t bytes = 0;
  std::string why;  // one line for the start-up log: the rule and its numbers
};

KvPoolSize kv_pool_from_blocks(int32_t num_blocks, const KvDemand& demand);
// Throws tachyon::Error when `bytes` cannot hold a single block.
KvPoolSize kv_pool_from_bytes(int64_t bytes, const KvDemand& demand);
// `available`: host memory available now (after the weights), see base/host_memory.h.
KvPoolSize kv_pool_on_host(int64_t available, const KvDemand& demand);
// The blocks kHostKvShare of `available` holds (before the full-use cap): what bounds the
// longest context on a CPU.
int64_t host_share_blocks(int64_t available, int64_t bytes_per_block);
// The blocks the sliding-window layers get when they keep their K/V apart (kv::KvLayout::
// splits_sliding): what max_concurrent sequences hold at most in one step of max_tokens_per_step
// tokens (each the window behind its first row plus a partial block at both ends and one ahead
// for an overlapped step; the chunks' tokens shared), and a quarter more, so blocks that left the
// window stay cached a while for prefix hits. A fixed amount: it does not grow with the context.
int32_t sliding_pool_blocks(int32_t window, int32_t block_size, int32_t max_concurrent, int32_t max_tokens_per_step);
// Splits `whole` (a pool sized with every layer in every block, `whole_block_bytes` each) between
// the full layers' blocks (`full_block_bytes`) and the sliding layers' (`sliding_block_bytes`):
// the sliding pool gets `sliding_blocks` but at most half of the bytes, never less than
// `min_sliding_blocks` (one request's biggest step); the full layers the rest, at most
// `max_full_blocks` (0: no cap). Explicit block counts (kv_pool_from_blocks) are the full
// layers' and keep `sliding_blocks`.
KvPoolSize split_kv_pool(const KvPoolSize& whole, int64_t whole_block_bytes, int64_t full_block_bytes,
                         int64_t sliding_block_bytes, int32_t sliding_blocks, int32_t min_sliding_blocks,
                         int64_t max_full_blocks);
// `free`/`total`: the device's memory after the weights and a warm-up step's workspaces.
// Throws tachyon::Error when `utilization` leaves no room for a block.
KvPoolSize kv_pool_on_device(int64_t free, int64_t total, double utilization, const KvDemand& demand);

// The KV swap space (EngineConfig::swap_space_bytes, the prefix cache's host tier): `requested` > 0
// is taken as it is and 0 is off (a preempted request recomputes). -1, the default, is on for a
// GPU backend: as many bytes as the device KV pool (`pool_bytes`), at most kAutoSwapCap and a
// quarter of the host memory still available (`host_available`), pinned. Measured on an H100
// with the demo model, the smallest model and so the cheapest to recompute: 1.016x recompute's
// throughput and 0.94x its mean TTFT under preemption (bench/results/cuda-h100-a2b1add.md).
// On the CPU the pool already lives in host memory, so -1 is off there.
constexpr int64_t kAutoSwapCap = int64_t{4} << 30;
struct SwapSpace {
  int64_t bytes = 0;  // 0: no host tier
  std::string why;    // one line for the start-up log and `info`
  bool automatic = false;  // sized by the default rule, not by --swap-space
};
SwapSpace swap_space(int64_t requested, bool device_backend, int64_t pool_bytes, int64_t host_available);

}  // namespace tachyon::engine
