// The KV cache format a model runs with (`--kv-cache-dtype auto|f32|bf16|f16|fp8|int8|int4|turbo`).
//
//   auto requested = model::parse_kv_cache_dtype("auto");                    // nullopt: auto
//   layout.format = model::resolve_kv_format(requested, model.config(), backend);
//
// auto: bf16 (f16 for float16 checkpoints, whose values may not fit bf16's mantissa as well),
// or f32 where the backend stores nothing else yet. An explicit format is taken as asked; the
// KV cache refuses one the backend or the head dimension cannot store, naming why. MLA latent
// caches keep f32 or bf16, recurrent state stays f32 (kernels/kv_format.h kv_storage_format).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "io/config.h"
#include "kernels/backend.h"

namespace tachyon::model {

// nullopt for "auto"; throws tachyon::Error naming the accepted values for anything else.
std::optional<kernels::KvFormat> parse_kv_cache_dtype(std::string_view name);

kernels::KvFormat resolve_kv_format(std::optional<kernels::KvFormat> requested, const io::ModelConfig& config,
                                    const kernels::Backend& backend);

// One line per rule, for `tachyon info`.
std::string kv_format_rules();

}  // namespace tachyon::model
