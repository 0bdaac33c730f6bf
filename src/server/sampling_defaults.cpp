#include "server/sampling_defaults.h"

namespace tachyon::server {

engine::SamplingParams apply_sampling_defaults(const ParsedRequest& request, const SamplingDefaults& defaults) {
  engine::SamplingParams out = request.sampling;
  const SamplingGiven& given = request.sampling_given;
  if (!given.temperature && defaults.temperature) out.temperature = *defaults.temperature;
  if (!given.top_p && defaults.top_p) out.top_p = *defaults.top_p;
  if (!given.top_k && defaults.top_k) out.top_k = *defaults.top_k;
  if (!given.min_p && defaults.min_p) out.min_p = *defaults.min_p;
  if (!given.repetition_penalty && defaults.repetition_penalty) out.repetition_penalty = *defaults.repetition_penalty;
  return out;
}

}  // namespace tachyon::server
