// Request parsing and validation for the generation endpoints (OpenAI, Anthropic; Ollama's in
// ollama_request.h). Each parser takes the
// raw body and returns one `ParsedRequest`, the API-neutral description of the generation,
// or throws ApiError (400) naming the offending field. Parsing needs no model, engine or
// tokenizer, so it is unit-tested and fuzzed on its own (tests/unit/server,
// tests/fuzz/server); limits that depend on the model (context length, vocabulary) are
// checked later, by the handler, once the prompt is tokenized.
//
// Conversations from every API are converted to OpenAI-style chat messages, which is what
// Hugging Face chat templates read: Anthropic content blocks, tool_use / tool_result and the
// Responses API's function_call / function_call_output items all become
// {"role": "assistant", "tool_calls": [...]} and {"role": "tool", ...} messages.
//
//   ParsedRequest r = parse_chat_request(body);
//   std::string prompt = tpl.render(r.messages, r.tools, true, r.template_kwargs);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "engine/pflash.h"
#include "engine/request.h"

namespace tachyon::server {

using OrderedJson = nlohmann::ordered_json;

struct OutputConstraint;  // structured_output.h

enum class Endpoint { ChatCompletions, Completions, Responses, Messages, OllamaChat, OllamaGenerate };

// Required and Named force a tool call through constrained decoding (Generation builds the
// grammar of the model's tool-call syntax).
enum class ToolChoice { Auto, None, Required, Named };

// The sampling fields a model's generation_config.json may default, and whether the request
// set each itself: those it left out take the model's values (sampling_defaults.h).
struct SamplingGiven {
  bool temperature = false, top_p = false, top_k = false, min_p = false, repetition_penalty = false;
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  std::string model;

  // The prompt: chat messages for the template (chat, responses, messages) or, for
  // completions, raw text or token ids.
  OrderedJson messages;                // array of OpenAI-style messages, or null
  OrderedJson tools;                   // array of {"type": "function", "function": {...}}, or null
  OrderedJson template_kwargs = OrderedJson::object();  // e.g. {"enable_thinking": false}
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_name;               // ToolChoice::Named: a function declared in `tools`
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  // completions: fill-in-the-middle, the prompt is the text before the gap and this the text
  // after it (server/fill_in_middle.h).
  std::optional<std::string> suffix;
  bool continue_final_message = false;  // render without a generation prompt

  engine::SamplingParams sampling;
  SamplingGiven sampling_given;
  std::optional<int32_t> max_tokens;   // absent: up to the context length
  std::optional<int32_t> max_context;  // prompt + output at most this (Ollama num_ctx); absent: the model's
  std::vector<std::string> stop;       // stop strings, never empty strings
  int32_t n = 1;                       // independent choices of one prompt (server/choices.h)
  bool stream = false;
  bool include_usage = false;          // OpenAI stream_options.include_usage
  int32_t logprobs = -1;               // -1 none; 0 the chosen token; k top alternatives too
  bool echo = false;                   // completions: prepend the prompt
  bool json_object = false;            // response_format {"type": "json_object"}: enforced by a grammar
  // response_format json_schema, llama-server's grammar / json_schema, vLLM's guided_*:
  // the compiled grammar of the answer (structured_output.h); null: none.
  std::shared_ptr<const OutputConstraint> output_constraint;
  std::string instructions;            // responses: echoed back in the response object
  // none | minimal | low | medium | high, mapped onto the template's switch (server/reasoning_effort.h).
  std::optional<std::string> reasoning_effort;
  // responses: the stored response this one continues (server/response_store.h), and whether
  // this one is stored (`store`, default true).
  std::optional<std::string> previous_response_id;
  bool store = true;
  // tachyon extension, chat and completions: "speculative": {"enabled": bool,
  // "num_speculative_tokens": 1..16} overrides the server's speculative decoding for this request.
  std::optional<bool> speculate;
  std::optional<int32_t> num_speculative_tokens;
  // tachyon extension, every API: "pflash": "off" | "auto" | "always" overrides the server's
  // --pflash prompt compression for this request. A request with tools is compressed only when
  // it asks ("auto" or "always"); one with response_format json_object never.
  std::optional<engine::PflashMode> pflash;
};

// Body limits that do not depend on the model.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 512;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int32_t kMaxChoices = 128;  // `n` at most, as OpenAI

ParsedRequest parse_chat_request(std::string_view body);         // POST /v1/chat/completions
ParsedRequest parse_completion_request(std::string_view body);   // POST /v1/completions
ParsedRequest parse_responses_request(std::string_view body);    // POST /v1/responses
ParsedRequest parse_messages_request(std::string_view body);     // POST /v1/messages (Anthropic)
ParsedRequest parse_count_tokens_request(std::string_view body); // POST /v1/messages/count_tokens

}  // namespace tachyon::server
