#include "kernels/kv_format.h"

namespace tachyon::kernels {

namespace {
constexpr std::string_view kNames[] = {"f32", "bf16", "f16", "fp8", "int8", "int4", "turbo"};
}

std::string_view kv_format_name(KvFormat format) { return kNames[static_cast<int>(format)]; }

std::optional<KvFormat> kv_format_from_name(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i)
    if (name == kNames[i]) return static_cast<KvFormat>(i);
  return std::nullopt;
}

const char* kv_format_unsupported(KvFormat format, int64_t head_dim) {
  if (head_dim <= 0) return "the head dimension must be positive";
  if ((format == KvFormat::Int4 || format == KvFormat::Turbo) && head_dim % 2 != 0)
    return "4-bit KV formats pack two elements per byte and need an even head dimension";
  if (format == KvFormat::Turbo && ((head_dim & (head_dim - 1)) != 0 || head_dim > 1024))
    return "the turbo KV format rotates keys with a Walsh-Hadamard transform and needs a power-of-two head "
           "dimension of at most 1024";
  return nullptr;
}

}  // namespace tachyon::kernels
