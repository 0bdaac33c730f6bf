// A model's own sampling defaults (its generation_config.json) and how they meet a request:
// a field the request sets wins; a field it leaves out takes the model's value; a field
// neither sets keeps the engine's neutral default (temperature 1, no truncation, no
// penalty). Like vLLM, `do_sample` is not read: a request that wants greedy decoding says
// temperature 0.
//
//   SamplingDefaults defaults{.temperature = 0.6f, .top_k = 20};
//   engine::SamplingParams p = apply_sampling_defaults(parsed, defaults);
#pragma once

#include <optional>

#include "server/request.h"

namespace tachyon::server {

struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;

  bool empty() const { return !temperature && !top_p && !min_p && !repetition_penalty && !top_k; }
};

// The request's sampling parameters with the model's defaults filled in where it gave none.
engine::SamplingParams apply_sampling_defaults(const ParsedRequest& request, const SamplingDefaults& defaults);

}  // namespace tachyon::server
