// KV pool sizing flags shared by the commands that start an engine:
//   --kv-cache-memory BYTES        the pool's bytes (8G, 512M, 1.5GiB, ...); any device
//   --gpu-memory-utilization F     a GPU's share the model may use, KV pool included (0.90)
//   --kv-blocks N                  exactly N blocks (tests, reproductions)
//   --kv-memory GiB                the older spelling of --kv-cache-memory, still accepted
// Left out: the pool is sized from the machine (engine/kv_sizing.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace tachyon::cli {

struct KvSizingOptions {
  int32_t* kv_blocks;
  int64_t* kv_cache_memory;
  double* gpu_memory_utilization;
};

void add_kv_sizing_options(CLI::App& command, KvSizingOptions options);

}  // namespace tachyon::cli
