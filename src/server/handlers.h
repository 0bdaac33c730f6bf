// The endpoint handlers. Each parses the body, validates it against the served model,
// submits the generation and answers in its API's JSON or SSE shape. Errors before the
// first byte of output are thrown as ApiError (the HTTP glue renders them); errors during a
// stream are sent as that API's error event.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

#include "server/generation.h"
#include "server/model_registry.h"
#include "server/response_store.h"

namespace tachyon::server {

struct HandlerContext {
  const ServedModel& model;  // the one the request's "model" picked (the server holds its lease)
  Admission& admission;
  // Non-streaming handlers pass it to Generation::run: true once the client disconnected.
  std::function<bool()> client_gone;
  const ModelRegistry* models = nullptr;  // every served model; null: `model` alone
  ResponseStore* responses = nullptr;     // the Responses API's stored responses; null: none kept
};

void handle_chat_completions(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_completions(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_responses(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_messages(HandlerContext ctx, const std::string& body, httplib::Response& res);
// Anthropic POST /v1/messages/count_tokens: the prompt's token count, nothing generated.
void handle_count_tokens(HandlerContext ctx, const std::string& body, httplib::Response& res);

// POST /v1/embeddings (embedding models; server/embeddings.cpp).
void handle_embeddings(HandlerContext ctx, const std::string& body, httplib::Response& res);
// POST /tokenize and /detokenize (llama-server and vLLM shapes; server/tokenize_endpoints.cpp).
void handle_tokenize(HandlerContext ctx, const std::string& body, httplib::Response& res);
void handle_detokenize(HandlerContext ctx, const std::string& body, httplib::Response& res);

// Checks that the request's "model" names ctx.model: its name, or an alias of it the registry
// resolves (404 with the served names otherwise).
void check_model(const HandlerContext& ctx, const std::string& requested);

// OpenAI finish_reason for an outcome: stop | length | tool_calls.
const char* openai_finish_reason(const GenerationOutcome& outcome, bool has_tool_calls);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}.
Json openai_usage(const GenerationOutcome& outcome);
// A generation that failed in the engine becomes a 500.
void throw_if_failed(const GenerationOutcome& outcome);

// A parsed tool call's arguments as a JSON object (Anthropic's tool_use.input, Ollama's
// function.arguments); {} when the model wrote something else.
Json tool_arguments_object(const std::string& arguments);

// Chat-style logprobs content entries: [{token, logprob, bytes, top_logprobs}].
Json chat_logprobs(const tokenizer::Tokenizer& tokenizer, std::span<const engine::TokenLogprob> logprobs);

}  // namespace tachyon::server
