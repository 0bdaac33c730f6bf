#include "model/kv_format_choice.h"

#include "base/error.h"

namespace tachyon::model {

std::optional<kernels::KvFormat> parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto") return std::nullopt;
  if (auto f = kernels::kv_format_from_name(name)) return f;
  throw Error("unknown KV cache dtype '{}': expected auto, f32, bf16, f16, fp8, int8, int4 or turbo", name);
}

kernels::KvFormat resolve_kv_format(std::optional<kernels::KvFormat> requested, const io::ModelConfig& config,
                                    const kernels::Backend& backend) {
  if (requested) return *requested;
  const kernels::KvFormat preferred = config.dtype == "float16" ? kernels::KvFormat::F16 : kernels::KvFormat::BF16;
  return backend.supports_kv_format(preferred) ? preferred : kernels::KvFormat::F32;
}

std::string kv_format_rules() {
  return "auto = bf16 (f16 for float16 checkpoints; f32 where the backend stores no other format); MLA latent "
         "caches stay f32 under f32 and bf16 otherwise; recurrent (linear-attention) state is always f32";
}

}  // namespace tachyon::model
