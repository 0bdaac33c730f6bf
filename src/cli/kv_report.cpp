#include "cli/kv_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "engine/kv_sizing.h"

namespace tachyon::cli {

namespace {

// The storage formats and the bytes of one stored K/V element. Today the cache stores f32;
// bf16 is the format the KV-formats work makes the default. When kv::KvLayout carries the
// format, this list becomes that enum and bytes_per_block() answers for each.
struct Format {
  const char* name;
  int64_t element_bytes;
  const char* note;
};
constexpr Format kFormats[] = {{"f32", 4, "today's storage"}, {"bf16", 2, "half of f32"}};

// Bytes of one block when its K/V elements take `element_bytes` each; recurrent state (hybrid
// models) stays f32 in every format.
int64_t bytes_per_block(const kv::KvLayout& layout, int64_t element_bytes) {
  kv::KvLayout kv_only = layout;
  kv_only.num_state_layers = 0;
  const int64_t kv_f32 = static_cast<int64_t>(kv_only.bytes_per_block());
  const int64_t state = static_cast<int64_t>(layout.bytes_per_block()) - kv_f32;
  return kv_f32 / 4 * element_bytes + state;
}

}  // namespace

Json kv_memory_report(const kv::KvLayout& layout, int64_t context, int64_t available) {
  Json formats = Json::object();
  for (const Format& f : kFormats) {
    const int64_t block_bytes = bytes_per_block(layout, f.element_bytes);
    const int64_t pool_tokens = engine::host_share_blocks(available, block_bytes) * layout.block_size;
    formats[f.name] = {{"bytes_per_token", static_cast<double>(block_bytes) / layout.block_size},
                       {"longest_context", std::min(context, pool_tokens)},
                       {"note", f.note}};
  }
  return {{"block_size", layout.block_size},
          {"available_bytes", available},
          {"host_share", engine::kHostKvShare},
          {"formats", formats}};
}

std::string kv_memory_lines(const Json& report) {
  std::string per_token, longest;
  for (const auto& [name, f] : report["formats"].items()) {
    per_token += fmt::format("{}{} {:.0f} B", per_token.empty() ? "" : ", ", name, f["bytes_per_token"].get<double>());
    longest += fmt::format("{}{} {}", longest.empty() ? "" : ", ", name, f["longest_context"].get<int64_t>());
  }
  return fmt::format("KV per token     {}\nlongest context  {} tokens (CPU default pool: {:.0f}% of the {} available)\n",
                     per_token, longest, report["host_share"].get<double>() * 100,
                     format_byte_size(report["available_bytes"].get<int64_t>()));
}

}  // namespace tachyon::cli
