#include "cli/kv_options.h"

#include <cmath>
#include <string>

#include "base/byte_size.h"
#include "base/error.h"

namespace tachyon::cli {

void add_kv_sizing_options(CLI::App& command, KvSizingOptions o) {
  auto* blocks = command.add_option("--kv-blocks", *o.kv_blocks, "KV cache blocks (16 tokens each); overrides the sizing")
                     ->check(CLI::PositiveNumber);
  auto* bytes = command
                    .add_option_function<std::string>(
                        "--kv-cache-memory",
                        [o](const std::string& text) { *o.kv_cache_memory = parse_byte_size(text); },
                        "KV cache memory: 8G, 512M, 1.5GiB or bytes (default: sized from the machine: on a GPU "
                        "--gpu-memory-utilization of its memory after the weights; on the CPU half the available "
                        "memory after the weights, at most what --max-concurrent full contexts need)")
                    ->type_name("BYTES")
                    ->check(CLI::Validator(
                        [](std::string& text) -> std::string {
                          try {
                            if (parse_byte_size(text) <= 0) return "--kv-cache-memory must be more than 0 bytes";
                            return {};
                          } catch (const Error& e) {
                            return e.what();
                          }
                        },
                        ""))
                    ->excludes(blocks);
  // The flag of earlier releases, in GiB: kept so that existing command lines work.
  command
      .add_option_function<double>(
          "--kv-memory",
          [o](double gib) { *o.kv_cache_memory = static_cast<int64_t>(std::llround(gib * double(int64_t{1} << 30))); },
          "KV cache memory in GiB (older spelling of --kv-cache-memory)")
      ->check(CLI::PositiveNumber)
      ->excludes(blocks)
      ->excludes(bytes);
  command.add_option("--gpu-memory-utilization", *o.gpu_memory_utilization,
                     "Share of the GPU's memory this model may use, weights, workspaces and KV pool together "
                     "(the pool gets the rest after a warm-up step)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
}

}  // namespace tachyon::cli
