#include "cli/kv_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "engine/kv_sizing.h"
#include "kernels/kv_format.h"

namespace tachyon::cli {

namespace {

// Every KV storage format (kernels/kv_format.h), in the order `--kv-cache-dtype` lists them.
constexpr kernels::KvFormat kFormats[] = {kernels::KvFormat::BF16, kernels::KvFormat::F16,  kernels::KvFormat::F32,
                                          kernels::KvFormat::FP8,  kernels::KvFormat::Int8, kernels::KvFormat::Int4,
                                          kernels::KvFormat::Turbo};

}  // namespace

Json kv_memory_report(const kv::KvLayout& layout, int64_t context, int64_t available) {
  Json formats = Json::object();
  for (const kernels::KvFormat f : kFormats) {
    kv::KvLayout in_format = layout;  // bytes_per_block() is the one source of KV bytes
    in_format.format = f;
    const int64_t block_bytes = static_cast<int64_t>(in_format.bytes_per_block());
    const int64_t pool_tokens = engine::host_share_blocks(available, block_bytes) * layout.block_size;
    formats[std::string(kernels::kv_format_name(f))] = {
        {"bytes_per_token", static_cast<double>(block_bytes) / layout.block_size},
        {"longest_context", std::min(context, pool_tokens)}};
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
