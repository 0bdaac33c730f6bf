#include "cli/kv_report.h"

#include "base/host_memory.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "engine/engine.h"
#include "engine/kv_sizing.h"
#include "kernels/kv_format.h"

namespace tachyon::cli {

namespace {

// Every KV storage format (kernels/kv_format.h), in the order `--kv-cache-dtype` lists them.
constexpr kernels::KvFormat kFormats[] = {kernels::KvFormat::BF16, kernels::KvFormat::F16,  kernels::KvFormat::F32,
                                          kernels::KvFormat::FP8,  kernels::KvFormat::Int8, kernels::KvFormat::Int4,
                                          kernels::KvFormat::Turbo};

}  // namespace

kv::KvLayout engine_kv_layout(const kv::KvLayout& layout, int64_t context) {
  return engine::with_sliding_pool(layout, engine::EngineConfig{}, static_cast<int32_t>(std::min<int64_t>(context, INT32_MAX)));
}

Json kv_memory_report(const kv::KvLayout& layout, int64_t context, int64_t available) {
  const kv::KvLayout engine_layout = engine_kv_layout(layout, context);
  const bool split = engine_layout.splits_sliding();
  Json formats = Json::object();
  for (const kernels::KvFormat f : kFormats) {
    kv::KvLayout in_format = engine_layout;  // bytes_per_block() is the one source of KV bytes
    in_format.format = f;
    const int64_t block_bytes = static_cast<int64_t>(in_format.bytes_per_block());
    const int64_t fixed = static_cast<int64_t>(in_format.sliding_pool_bytes());  // the sliding pool, if any
    const int64_t pool_tokens = engine::host_share_blocks(available - fixed, block_bytes) * layout.block_size;
    Json entry = {{"bytes_per_token", static_cast<double>(block_bytes) / layout.block_size},
                  {"longest_context", std::min(context, std::max<int64_t>(0, pool_tokens))}};
    if (split) {
      in_format.num_sliding_blocks = 0;  // every layer keeping every block
      entry["bytes_per_token_unreleased"] = static_cast<double>(in_format.bytes_per_block()) / layout.block_size;
      entry["sliding_pool_bytes"] = fixed;
    }
    formats[std::string(kernels::kv_format_name(f))] = entry;
  }
  Json report = {{"block_size", layout.block_size},
                 {"available_bytes", available},
                 {"host_share", engine::kHostKvShare},
                 {"formats", formats}};
  if (split)
    report["sliding_window"] = {{"layers", engine_layout.num_sliding_layers()},
                                {"of_layers", engine_layout.num_layers},
                                {"window", engine_layout.max_window()},
                                {"pool_blocks", engine_layout.num_sliding_blocks},
                                {"max_concurrent", engine::EngineConfig{}.max_concurrent}};
  return report;
}

std::string kv_memory_lines(const Json& report) {
  std::string per_token, longest;
  for (const auto& [name, f] : report["formats"].items()) {
    per_token += fmt::format("{}{} {:.0f} B", per_token.empty() ? "" : ", ", name, f["bytes_per_token"].get<double>());
    longest += fmt::format("{}{} {}", longest.empty() ? "" : ", ", name, f["longest_context"].get<int64_t>());
  }
  std::string out =
      fmt::format("KV per token     {}\nlongest context  {} tokens (CPU default pool: {:.0f}% of the {} available)\n",
                  per_token, longest, report["host_share"].get<double>() * 100,
                  format_byte_size(report["available_bytes"].get<int64_t>()));
  if (report.contains("sliding_window")) {
    const Json& s = report["sliding_window"];
    std::string pool;
    for (const auto& [name, f] : report["formats"].items())
      pool += fmt::format("{}{} {}", pool.empty() ? "" : ", ", name, format_byte_size(f["sliding_pool_bytes"].get<int64_t>()));
    out += fmt::format(
        "sliding layers   {} of {} attend to the last {} tokens: their blocks are released once out of the window, "
        "so KV per token above counts the other layers; the sliding layers keep a fixed pool of {} blocks ({} "
        "requests' windows and a step): {}\n",
        s["layers"].get<int64_t>(), s["of_layers"].get<int64_t>(), s["window"].get<int64_t>(),
        s["pool_blocks"].get<int64_t>(), s["max_concurrent"].get<int64_t>(), pool);
  }
  return out;
}

Json kv_swap_report(bool device_backend) {
  // The default's rule, stated for a pool of the largest auto size (the engine applies it to its pool).
  const engine::SwapSpace auto_space = engine::swap_space(-1, device_backend, engine::kAutoSwapCap, host_available_bytes());
  return {{"tier", device_backend ? "on by default on a GPU" : "off by default on the CPU"},
          {"default_bytes", auto_space.bytes},
          {"rule", fmt::format("{}; the tier holds blocks the KV pool evicts, preempted requests' among them, in {} "
                               "memory, copied out and back",
                               auto_space.why, device_backend ? "pinned host" : "host")}};
}

}  // namespace tachyon::cli
