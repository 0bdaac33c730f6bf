// Fuzz target for the request parsers: the first byte picks the endpoint, the rest is the
// body. A parse either succeeds with a well-formed ParsedRequest or throws ApiError (400);
// any other exception, crash or broken invariant is a finding.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/request.h"

using namespace tachyon::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    ParsedRequest r;
    switch (data[0] % 5) {
      case 0: r = parse_chat_request(body); break;
      case 1: r = parse_completion_request(body); break;
      case 2: r = parse_responses_request(body); break;
      case 3: r = parse_messages_request(body); break;
      default: r = parse_count_tokens_request(body); break;
    }
    // Invariants of a successful parse.
    const bool chat = !r.messages.is_null();
    if (chat == (r.prompt_text.has_value() || r.prompt_ids.has_value())) std::abort();
    if (chat && (!r.messages.is_array() || r.messages.empty())) std::abort();
    if (r.max_tokens && *r.max_tokens < 1) std::abort();
    if (r.stop.size() > kMaxStopStrings) std::abort();
    for (const auto& s : r.stop)
      if (s.size() > kMaxStopBytes) std::abort();
    for (const auto& s : r.stop)
      if (s.empty()) std::abort();
    if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs) std::abort();
    if (!(r.sampling.temperature >= 0.f) || !(r.sampling.top_p > 0.f && r.sampling.top_p <= 1.f)) std::abort();
    if (!r.tools.is_null() && (!r.tools.is_array() || r.tools.empty())) std::abort();
  } catch (const ApiError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
