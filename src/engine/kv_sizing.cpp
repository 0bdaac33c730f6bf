#include "engine/kv_sizing.h"

#include <algorithm>
#include <limits>

#include "base/byte_size.h"
#include "base/error.h"

namespace tachyon::engine {

namespace {

// Block ids are int32: a pool is at most that many blocks, whatever the memory.
int32_t clamp_blocks(int64_t blocks) {
  return static_cast<int32_t>(std::clamp<int64_t>(blocks, 0, std::numeric_limits<int32_t>::max()));
}

KvPoolSize sized(int64_t blocks, const KvDemand& demand, std::string why) {
  KvPoolSize s;
  s.num_blocks = clamp_blocks(blocks);
  s.bytes = static_cast<int64_t>(s.num_blocks) * demand.bytes_per_block;
  s.why = fmt::format("{} blocks of {} tokens ({}, {} tokens): {}", s.num_blocks, demand.block_size,
                      format_byte_size(s.bytes), static_cast<int64_t>(s.num_blocks) * demand.block_size, why);
  return s;
}

}  // namespace

int64_t KvDemand::blocks_for_full_use() const {
  const int64_t per_sequence = (static_cast<int64_t>(max_context) + block_size - 1) / block_size;
  return std::max<int64_t>(1, per_sequence * std::max(1, max_concurrent));
}

KvPoolSize kv_pool_from_blocks(int32_t num_blocks, const KvDemand& demand) {
  TACHYON_CHECK(num_blocks > 0, "a KV pool needs at least one block");
  return sized(num_blocks, demand, "as configured");
}

KvPoolSize kv_pool_from_bytes(int64_t bytes, const KvDemand& demand) {
  TACHYON_CHECK(demand.bytes_per_block > 0, "KV blocks have no size");
  const int64_t blocks = bytes / demand.bytes_per_block;
  if (blocks < 1)
    throw Error("a KV cache of {} holds no block: one block of {} tokens takes {}", format_byte_size(bytes),
                demand.block_size, format_byte_size(demand.bytes_per_block));
  return sized(blocks, demand, fmt::format("the configured {}", format_byte_size(bytes)));
}

int64_t host_share_blocks(int64_t available, int64_t bytes_per_block) {
  const double share = static_cast<double>(std::max<int64_t>(0, available)) * kHostKvShare;
  return static_cast<int64_t>(share / static_cast<double>(bytes_per_block));
}

KvPoolSize kv_pool_on_host(int64_t available, const KvDemand& demand) {
  TACHYON_CHECK(demand.bytes_per_block > 0, "KV blocks have no size");
  const int64_t by_memory = std::max<int64_t>(1, host_share_blocks(available, demand.bytes_per_block));
  const int64_t full_use = demand.blocks_for_full_use();
  if (full_use <= by_memory)
    return sized(full_use, demand,
                 fmt::format("{} sequences of the full {}-token context (under {:.0f}% of the {} available)",
                             demand.max_concurrent, demand.max_context, kHostKvShare * 100, format_byte_size(available)));
  return sized(by_memory, demand,
               fmt::format("{:.0f}% of the {} of host memory available after the weights", kHostKvShare * 100,
                           format_byte_size(available)));
}

int32_t sliding_pool_blocks(int32_t window, int32_t block_size, int32_t max_concurrent, int32_t max_tokens_per_step) {
  TACHYON_CHECK(window > 0 && block_size > 0, "sliding pool of a window of {} in blocks of {}", window, block_size);
  const int64_t per_sequence = (window - 1 + block_size - 1) / block_size + 3;
  const int64_t chunks = (std::max(1, max_tokens_per_step) + block_size - 1) / block_size;
  const int64_t need = std::max(1, max_concurrent) * per_sequence + chunks;
  return clamp_blocks(need + need / 4);
}

KvPoolSize split_kv_pool(const KvPoolSize& whole, int64_t whole_block_bytes, int64_t full_block_bytes,
                         int64_t sliding_block_bytes, int32_t sliding_blocks, int32_t min_sliding_blocks,
                         int64_t max_full_blocks) {
  TACHYON_CHECK(full_block_bytes > 0 && sliding_block_bytes > 0, "KV blocks have no size");
  const int64_t bytes = static_cast<int64_t>(whole.num_blocks) * whole_block_bytes;
  const int64_t sliding = std::max<int64_t>(min_sliding_blocks, std::min<int64_t>(sliding_blocks, bytes / 2 / sliding_block_bytes));
  int64_t full = std::max<int64_t>(1, (bytes - sliding * sliding_block_bytes) / full_block_bytes);
  if (max_full_blocks > 0) full = std::min(full, max_full_blocks);
  KvPoolSize s;
  s.num_blocks = clamp_blocks(full);
  s.num_sliding_blocks = clamp_blocks(sliding);
  s.bytes = s.num_blocks * full_block_bytes + s.num_sliding_blocks * sliding_block_bytes;
  s.why = fmt::format("{} blocks of the full-attention layers ({}) and {} of the sliding-window layers ({}) from {}",
                      s.num_blocks, format_byte_size(s.num_blocks * full_block_bytes), s.num_sliding_blocks,
                      format_byte_size(s.num_sliding_blocks * sliding_block_bytes), whole.why);
  return s;
}

KvPoolSize kv_pool_on_device(int64_t free, int64_t total, double utilization, const KvDemand& demand) {
  TACHYON_CHECK(demand.bytes_per_block > 0, "KV blocks have no size");
  if (!(utilization > 0 && utilization <= 1))
    throw Error("--gpu-memory-utilization must be in (0, 1], got {}", utilization);
  const int64_t used = total - free;  // weights, workspaces, the CUDA context, other processes
  const int64_t budget = static_cast<int64_t>(static_cast<double>(total) * utilization) - used;
  if (budget < demand.bytes_per_block)
    throw Error("--gpu-memory-utilization {:.2f} of the GPU's {} leaves no room for the KV cache: {} are in use after "
                "the weights and a warm-up step; raise it, or give --kv-cache-memory",
                utilization, format_byte_size(total), format_byte_size(used));
  return sized(budget / demand.bytes_per_block, demand,
               fmt::format("{:.2f} of the GPU's {} less the {} in use after the weights and a warm-up step",
                           utilization, format_byte_size(total), format_byte_size(used)));
}

SwapSpace swap_space(int64_t requested, bool device_backend, int64_t pool_bytes, int64_t host_available) {
  if (requested > 0) return {requested, fmt::format("{} (--swap-space)", format_byte_size(requested))};
  if (requested == 0) return {0, "off (--swap-space 0): preempted requests recompute"};
  if (!device_backend) return {0, "off on the CPU, where the KV pool is host memory already: preempted requests recompute"};
  const int64_t bytes = std::min({pool_bytes, kAutoSwapCap, host_available / 4});
  if (bytes <= 0) return {0, "off: no host memory to spare for it; preempted requests recompute"};
  return {bytes,
          fmt::format("{} pinned (auto on a GPU: the KV pool's size, at most {} and a quarter of free host "
                      "memory; --swap-space BYTES sets it, 0 turns it off)",
                      format_byte_size(bytes), format_byte_size(kAutoSwapCap)),
          true};
}

}  // namespace tachyon::engine

