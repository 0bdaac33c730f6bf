// What `tachyon info` says about KV memory: bytes per token in each storage format, and the
// longest context that fits with the default sizing of this machine's CPU (engine/kv_sizing.h:
// kHostKvShare of the memory available now). A GPU's pool depends on its memory and is
// reported by `tachyon serve` at start-up. Sliding-window models (Gemma 3, gpt-oss) are counted as
// the engine keeps them: per token, the full-attention layers only; the sliding layers a fixed
// pool of their own (engine::with_sliding_pool under the default limits), taken off first.
#pragma once

#include "base/json.h"
#include "kv/kv_cache.h"

namespace tachyon::cli {

// The layout an engine with the default limits builds from the model's (sliding-window layers in
// a pool of their own where it releases their blocks): what its bytes per token are.
kv::KvLayout engine_kv_layout(const kv::KvLayout& layout, int64_t context);
// `layout`: the model's KV layout (any block count); `context`: max_position_embeddings;
// `available`: host bytes available now.
Json kv_memory_report(const kv::KvLayout& layout, int64_t context, int64_t available);
// The report as the lines of `info`'s text form.
std::string kv_memory_lines(const Json& report);
// The KV swap space (engine/kv_sizing.h swap_space) a server gets by default (none: --swap-space
// turns it on) and where its blocks would live, in words.
Json kv_swap_report(bool device_backend);

}  // namespace tachyon::cli
