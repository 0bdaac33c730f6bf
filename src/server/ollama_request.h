// Parsing of Ollama's generation bodies (POST /api/chat, /api/generate) into the same
// `ParsedRequest` the OpenAI and Anthropic endpoints produce, following Ollama's docs/api.md:
//
//   - messages {role, content, thinking, images, tool_calls, tool_name, tool_call_id} become
//     OpenAI-style chat messages (tool-call arguments are objects, as Ollama sends them);
//   - `options` maps num_predict, temperature, top_k, top_p, min_p, repeat_penalty,
//     presence/frequency_penalty, seed, stop and num_ctx; hardware options (num_gpu,
//     num_thread, ...) and repeat_last_n are accepted and have no effect; sampling we do not
//     implement (mirostat, typical_p, tfs_z) is refused unless it is set to its neutral value;
//   - `think` (a boolean or a level) sets the chat template's enable_thinking;
//   - `format: "json"` and a JSON schema of an object enforce a JSON object by the grammar
//     (the schema's properties are not enforced);
//   - `stream` defaults to true; `keep_alive` is accepted (the model stays loaded);
//   - /api/generate: `system` becomes a system message, `raw` sends the prompt untemplated;
//     `suffix`, `template`, `context` and `images` are refused with a 400 that says why.
//
// A chat with no messages, or a generate with an empty prompt, is Ollama's way to load
// (keep_alive 0: unload) a model: `load_only` is set and nothing is to be generated.
//
//   OllamaRequest r = parse_ollama_chat_request(body);
//   if (!r.load_only) Generation gen(model, r.request, admission);
#pragma once

#include <optional>
#include <string_view>

#include "server/request.h"

namespace tachyon::server {

struct OllamaRequest {
  ParsedRequest request;
  bool load_only = false;     // nothing to generate: answer with done_reason "load" (or "unload")
  bool unload = false;        // load_only with keep_alive 0
  std::optional<bool> think;  // the request's `think`, absent: the template's default
};

OllamaRequest parse_ollama_chat_request(std::string_view body);      // POST /api/chat
OllamaRequest parse_ollama_generate_request(std::string_view body);  // POST /api/generate

// The model a /api/show, /api/pull or /api/embed body names: "model", or the older "name".
std::string read_ollama_model_name(const OrderedJson& body);

}  // namespace tachyon::server
