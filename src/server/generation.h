// One generation as the HTTP handlers see it: the prompt rendered and tokenized, checked
// against the context, submitted to the engine, then pulled token batch by token batch and
// turned into text (incremental detokenization, stop strings) until it finishes.
//
//   Generation gen(model, parsed, admission);        // throws ApiError (400/429) before any output
//   GenerationOutcome out = gen.run([&](std::string_view text, auto logprobs) {
//     return send(text);                             // false: the client is gone, cancel
//   });
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/parsers/output_parser.h"
#include "engine/embedder.h"
#include "engine/engine.h"
#include "server/request.h"
#include "server/response_cache.h"
#include "server/sampling_defaults.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::server {

// The checkpoint as Ollama's model listings describe it.
struct ModelDetails {
  std::string family;              // config.json model_type ("qwen3")
  std::string dtype;               // weights' dtype ("bfloat16"; GGUF: the type holding the most bytes, "Q4_K")
  std::string format = "safetensors";  // the weights' file format: safetensors | gguf
  std::string chat_template;       // the Jinja source, empty without one
  int64_t num_parameters = 0;
  int64_t size_bytes = 0;          // the weight files on disk
  int64_t hidden_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0;
  bool on_device = false;          // weights in GPU memory (Ollama's size_vram)
};

// Everything the handlers know about one served model. Immutable once built.
struct ServedModel {
  std::string id;                                  // the name clients pass as "model"
  engine::Engine* engine = nullptr;
  // An embedding model (sentence-transformers pooling config): /v1/embeddings computes with it,
  // and generation is refused. Null for generation models.
  engine::Embedder* embedder = nullptr;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::shared_ptr<const chat::ChatTemplate> chat_template;  // null: no chat endpoints
  chat::ParserOptions parser;                      // tool-call / reasoning syntax of the family
  std::vector<int32_t> eos_ids;
  int32_t max_context = 0;
  int64_t vocab_size = 0;
  int64_t created = 0;                             // unix time the server started
  SamplingDefaults sampling_defaults;              // generation_config.json's, for fields a request omits
  // What the model's outputs depend on besides the request (weights, quantization, KV format,
  // backend): the response cache's first key field. 0: unknown (then nothing is cached).
  uint64_t fingerprint = 0;
  std::shared_ptr<ResponseCache> response_cache;   // --response-cache; null: off
  ModelDetails details;                            // what Ollama's /api/tags, /api/show and /api/ps describe
  // What `engine` runs on (backend, weights, drafter, the engine itself), freed with the model
  // when the registry unloads it; null when the caller owns them.
  std::shared_ptr<const void> owner;
};

// What a generation may take: one of `limit` slots for requests waiting in or running on the
// engine (beyond it, 429), and time: a generation ends at its deadline, the earlier of
// submission + `request_timeout` (zero: none) and the drain deadline a shutdown sets.
class Admission {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Admission(int32_t limit, std::chrono::milliseconds request_timeout = {})
      : limit_(limit), request_timeout_(request_timeout) {}
  bool try_enter() {
    if (in_flight_.fetch_add(1) >= limit_) {
      in_flight_.fetch_sub(1);
      return false;
    }
    return true;
  }
  void leave() { in_flight_.fetch_sub(1); }
  int32_t in_flight() const { return in_flight_.load(); }

  Clock::time_point deadline(Clock::time_point submitted) const {
    const Clock::time_point drain{Clock::duration(drain_deadline_.load())};
    return request_timeout_.count() > 0 ? std::min(submitted + request_timeout_, drain) : drain;
  }
  // Every generation, running or to come, ends by `when` (a shutdown's grace period).
  void set_drain_deadline(Clock::time_point when) { drain_deadline_.store(when.time_since_epoch().count()); }

 private:
  int32_t limit_;
  std::chrono::milliseconds request_timeout_;
  std::atomic<int32_t> in_flight_{0};
  std::atomic<Clock::rep> drain_deadline_{Clock::time_point::max().time_since_epoch().count()};
};

struct GenerationOutcome {
  std::string text;                         // everything released, after stop-string trimming
  engine::FinishReason finish = engine::FinishReason::None;
  std::optional<std::string> stop_sequence; // the stop string that ended it
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;            // tokens the engine generated (EOS included)
  int32_t cached_tokens = 0;                // prompt tokens served from the prefix cache (all, for a cached response)
  bool cached_response = false;             // answered from the response cache, not the engine
  int32_t dropped_tokens = 0;               // prompt tokens PFlash dropped (no KV, never computed)
  engine::SpecUsage spec;                   // speculative decoding stats of the request
  std::vector<engine::TokenLogprob> logprobs;
  std::vector<engine::TokenLogprob> prompt_logprobs;
  std::string error;                        // finish == Error
  // Wall time from submission to the first generated token (prefill, queueing included), and
  // to the end.
  std::chrono::nanoseconds time_to_first_token{0}, total_time{0};
};

// The prompt as rendered (chat template) or given (completions), and its token ids.
struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
};
// Throws ApiError (400) when the template rejects the conversation or an id is out of range.
Prompt build_prompt(const ServedModel& model, const ParsedRequest& request);

// Text released since the last call, and the logprobs of the tokens that produced it.
// Returning false cancels the request (the client went away).
using TextSink = std::function<bool(std::string_view text, std::span<const engine::TokenLogprob> logprobs)>;

class Generation {
 public:
  // Renders the chat template (or takes the completion prompt), tokenizes, validates
  // max_tokens against the context, takes an admission slot and submits (with `submit_now`
  // false: later, by submit()). Throws ApiError.
  Generation(const ServedModel& model, const ParsedRequest& request, Admission& admission, bool submit_now = true);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  const std::string& prompt_text() const { return prompt_text_; }
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  // Answered from the response cache: run() replays it, the engine never sees the request.
  bool cached_response() const { return cached_ != nullptr; }
  // Options for chat::make_output_parser: the model's family, reasoning opened by the prompt,
  // tool calls only when the request offered tools and did not say tool_choice "none".
  const chat::ParserOptions& parser_options() const { return parser_options_; }

  // Hands the request to the engine (once; the constructor did unless told not to). Throws ApiError.
  void submit();
  // Called once, on the thread of run(), when the engine's first output arrives: the prompt is
  // prefilled and its full KV blocks are in the prefix cache (server/choices.h forks then).
  void on_prefilled(std::function<void()> callback) { on_prefilled_ = std::move(callback); }

  // Pulls the engine's output to the end. Call once. `client_gone` (polled every 50 ms while
  // waiting) says the client disconnected: the request is cancelled and the outcome is Abort.
  GenerationOutcome run(const TextSink& sink, const std::function<bool()>& client_gone = nullptr);

 private:
  const ServedModel& model_;
  Admission& admission_;
  std::string prompt_text_;
  std::vector<int32_t> prompt_ids_;
  chat::ParserOptions parser_options_;
  std::vector<std::string> stop_;
  std::string answer_prefix_;  // written by the server as the answer's start (forced tool calls)
  std::optional<engine::GenerationRequest> pending_;  // until submit()
  bool admitted_ = false;
  std::function<void()> on_prefilled_;
  std::shared_ptr<engine::RequestStream> stream_;
  std::chrono::steady_clock::time_point submitted_;
  // The response cache: the request's key (absent when its output is not reproducible or the
  // cache is off), the answer a hit replays, and where run() records a live answer.
  std::optional<std::string> cache_key_;
  std::shared_ptr<const CachedResponse> cached_;
  size_t replayed_ = 0;

  std::optional<engine::RequestOutput> next_output(std::chrono::milliseconds timeout);
  void cancel();
};

// "chatcmpl-" + 24 random alphanumerics, and the like.
std::string random_id(std::string_view prefix);
int64_t unix_time();

}  // namespace tachyon::server
