// Fuzz target for the Ollama request parsers: the first byte picks /api/chat, /api/generate
// or the model name of /api/show and /api/pull, the rest is the body. A parse either succeeds
// with a well-formed OllamaRequest or throws ApiError (400); any other exception, crash or
// broken invariant is a finding.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/ollama_request.h"
#include "server/request_fields.h"

using namespace tachyon::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    OllamaRequest o;
    switch (data[0] % 3) {
      case 0: o = parse_ollama_chat_request(body); break;
      case 1: o = parse_ollama_generate_request(body); break;
      default:
        if (read_ollama_model_name(parse_body(body)).empty()) std::abort();
        return 0;
    }
    const ParsedRequest& r = o.request;
    // Invariants of a successful parse.
    const bool chat = !r.messages.is_null();
    if (o.load_only == (chat || r.prompt_text.has_value())) std::abort();
    if (chat && (!r.messages.is_array() || r.messages.empty())) std::abort();
    if (r.prompt_text && r.prompt_text->empty()) std::abort();
    if (r.prompt_ids) std::abort();
    if (r.max_tokens && *r.max_tokens < 1) std::abort();
    if (r.max_context && *r.max_context < 1) std::abort();
    if (r.stop.size() > kMaxStopStrings) std::abort();
    for (const auto& s : r.stop)
      if (s.empty() || s.size() > kMaxStopBytes) std::abort();
    if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs) std::abort();
    if (!(r.sampling.temperature >= 0.f) || !(r.sampling.top_p > 0.f && r.sampling.top_p <= 1.f)) std::abort();
    if (!(r.sampling.repetition_penalty > 0.f) || r.sampling.top_k < 0) std::abort();
    if (!r.tools.is_null() && (!r.tools.is_array() || r.tools.empty())) std::abort();
    if (o.think.has_value() != r.template_kwargs.contains("enable_thinking")) std::abort();
    if (chat)
      for (const auto& m : r.messages)
        if (!m.is_object() || !m["role"].is_string() || !m["content"].is_string()) std::abort();
  } catch (const ApiError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
