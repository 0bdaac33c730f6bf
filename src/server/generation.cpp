#include "server/generation.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <random>
#include <utility>

#include "base/error.h"
#include "server/api_error.h"
#include "server/fill_in_middle.h"
#include "server/reasoning_effort.h"
#include "server/structured_output.h"
#include "tokenizer/streaming_decoder.h"

namespace tachyon::server {

std::string random_id(std::string_view prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(prefix);
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

// The chat prompt. A final assistant message that is to be continued (Anthropic prefill,
// continue_final_message) is rendered as a finished turn and cut right after its content.
std::string render_chat(const ServedModel& model, const ParsedRequest& request) {
  if (!model.chat_template)
    throw ApiError::invalid(fmt::format("model '{}' has no chat template; use /v1/completions", model.id));
  const OrderedJson& last = request.messages.back();
  const std::string last_content = last.value("content", std::string());
  const bool prefill = request.continue_final_message && !last_content.empty();
  OrderedJson kwargs = request.template_kwargs;
  if (request.reasoning_effort) apply_reasoning_effort(model.chat_template->source(), *request.reasoning_effort, kwargs);
  try {
    std::string text = model.chat_template->render(request.messages, request.tools, !prefill, kwargs);
    if (prefill) {
      const size_t pos = text.rfind(last_content);
      if (pos == std::string::npos)
        throw ApiError::invalid("the chat template does not reproduce the final assistant message, so it cannot be "
                                "continued");
      text.resize(pos + last_content.size());
    }
    return text;
  } catch (const chat::TemplateError& e) {
    throw ApiError::invalid(fmt::format("the chat template rejected the conversation: {}", e.what()), "messages");
  }
}

}  // namespace

Prompt build_prompt(const ServedModel& model, const ParsedRequest& request) {
  Prompt prompt;
  if (!request.messages.is_null()) {
    prompt.text = render_chat(model, request);
    prompt.ids = model.tokenizer->encode(prompt.text, /*add_special_tokens=*/false);
  } else if (request.suffix) {
    prompt = fill_in_middle_prompt(*model.tokenizer, request, model.id, model.vocab_size);
  } else if (request.prompt_ids) {
    prompt.ids = *request.prompt_ids;
    for (int32_t id : prompt.ids)
      if (id >= model.vocab_size)
        throw ApiError::invalid(fmt::format("token id {} in 'prompt' is outside the vocabulary of {} tokens", id,
                                            model.vocab_size),
                                "prompt");
    prompt.text = model.tokenizer->decode(prompt.ids, /*skip_special_tokens=*/false);
  } else {
    prompt.text = request.prompt_text.value_or("");
    prompt.ids = model.tokenizer->encode(prompt.text, /*add_special_tokens=*/true);
  }
  return prompt;
}

Generation::Generation(const ServedModel& model, const ParsedRequest& request, Admission& admission, bool submit_now)
    : model_(model), admission_(admission), stop_(request.stop) {
  if (model.embedder)
    throw ApiError::invalid(fmt::format("model '{}' is an embedding model; use /v1/embeddings", model.id), "model");
  Prompt prompt = build_prompt(model, request);
  prompt_text_ = std::move(prompt.text);
  prompt_ids_ = std::move(prompt.ids);
  const auto num_prompt = static_cast<int64_t>(prompt_ids_.size());
  if (num_prompt == 0) throw ApiError::invalid("the prompt is empty after tokenization", "messages");
  // A request may ask for less context than the model has (Ollama's num_ctx), never more.
  const int64_t max_context = std::min<int64_t>(model.max_context, request.max_context.value_or(model.max_context));
  if (num_prompt >= max_context)
    throw ApiError::invalid(fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens",
                                        max_context, num_prompt),
                            "messages", "context_length_exceeded");
  int64_t max_tokens = request.max_tokens.value_or(static_cast<int32_t>(max_context - num_prompt));
  if (num_prompt + max_tokens > max_context)
    throw ApiError::invalid(fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                                        "tokens ({} in the prompt, {} for the completion)",
                                        max_context, num_prompt + max_tokens, num_prompt, max_tokens),
                            "max_tokens", "context_length_exceeded");

  parser_options_ = model.parser;
  const bool tools = !request.tools.is_null() && request.tool_choice != ToolChoice::None;
  if (!tools && parser_options_.family != chat::ParserFamily::kHarmony) parser_options_.family = chat::ParserFamily::kPlain;
  parser_options_.starts_in_reasoning = chat::prompt_opens_reasoning(prompt_text_);

  engine::GenerationRequest req;
  req.prompt = prompt_ids_;
  req.sampling = apply_sampling_defaults(request, model.sampling_defaults);
  req.max_tokens = static_cast<int32_t>(max_tokens);
  req.stop_token_ids = model.eos_ids;
  req.logprobs = request.logprobs;
  req.prompt_logprobs = request.echo && request.logprobs >= 0;
  req.speculate = request.speculate;
  req.num_speculative_tokens = request.num_speculative_tokens;
  ConstrainedOutput constrained = build_output_grammar(request, parser_options_);
  req.grammar = std::move(constrained.grammar);
  if (!constrained.prefix.empty()) {
    // The answer starts with special tokens no grammar can allow: they go at the end of the
    // prompt, and to the client as the start of the output (run() sends them first).
    answer_prefix_ = std::move(constrained.prefix);
    const std::vector<int32_t> ids = model.tokenizer->encode(answer_prefix_, /*add_special_tokens=*/false);
    req.prompt.insert(req.prompt.end(), ids.begin(), ids.end());
    if (static_cast<int64_t>(req.prompt.size()) + req.max_tokens > max_context) req.max_tokens -= static_cast<int32_t>(ids.size());
    if (req.max_tokens < 1)
      throw ApiError::invalid("the prompt leaves no room for a forced tool call", "max_tokens", "context_length_exceeded");
  }
  req.pflash = request.pflash;
  // Tool definitions are compressed only when the request asks; a constrained output never
  // (the engine leaves a request with a grammar whole).
  req.prompt_intact = req.grammar != nullptr || (!request.tools.is_null() && !request.pflash);
  try {
    req.sampling.validate(model.vocab_size);
  } catch (const Error& e) {
    throw ApiError::invalid(e.what());
  }
  if (model.response_cache && model.fingerprint != 0) {
    cache_key_ = ResponseCache::key_of(model.fingerprint, req, stop_);
    if (cache_key_) cached_ = model.response_cache->find(*cache_key_);
    if (cached_) {  // nothing for the engine to do, so nothing to admit
      submitted_ = std::chrono::steady_clock::now();
      return;
    }
  }
  if (!admission_.try_enter())
    throw ApiError(ErrorKind::RateLimit, "the server is at capacity; retry shortly", "", "rate_limit_exceeded");
  admitted_ = true;
  pending_ = std::move(req);
  if (submit_now) submit();
}

void Generation::submit() {
  if (!pending_) return;
  engine::GenerationRequest req = std::move(*pending_);
  pending_.reset();
  try {
    stream_ = model_.engine->submit(std::move(req));
    submitted_ = std::chrono::steady_clock::now();
  } catch (const Error& e) {
    throw ApiError::invalid(e.what());
  }
}

Generation::~Generation() {
  if (stream_) stream_->cancel();
  if (admitted_) admission_.leave();
}

std::optional<engine::RequestOutput> Generation::next_output(std::chrono::milliseconds timeout) {
  if (!cached_) return stream_->next(timeout);
  if (replayed_ < cached_->deliveries.size()) return cached_->deliveries[replayed_++];
  engine::RequestOutput end;  // never reached: a kept answer ends with its finish reason
  end.finish = engine::FinishReason::Stop;
  return end;
}

void Generation::cancel() {
  if (stream_) stream_->cancel();
}

GenerationOutcome Generation::run(const TextSink& sink, const std::function<bool()>& client_gone) {
  submit();
  GenerationOutcome outcome;
  outcome.prompt_tokens = static_cast<int32_t>(prompt_ids_.size());
  tokenizer::StreamingDecoder decoder(*model_.tokenizer, /*skip_special_tokens=*/true);
  StopMatcher stop(stop_);
  std::vector<engine::TokenLogprob> pending_logprobs;
  auto is_eos = [&](int32_t token) {
    return std::find(model_.eos_ids.begin(), model_.eos_ids.end(), token) != model_.eos_ids.end();
  };
  auto next_check = std::chrono::steady_clock::now();
  if (!answer_prefix_.empty()) {
    outcome.text += answer_prefix_;
    if (sink) sink(answer_prefix_, {});
  }
  std::optional<CachedResponse> recording;  // a live answer the response cache may keep
  if (cache_key_ && !cached_) recording.emplace();
  while (outcome.finish == engine::FinishReason::None) {
    if (std::chrono::steady_clock::now() >= admission_.deadline(submitted_)) {
      // Out of time: the engine frees the request's slot and blocks; the client gets what was
      // generated, with the text the detokenizer and stop matcher still held.
      cancel();
      outcome.finish = engine::FinishReason::Timeout;
      std::string rest = stop.push(decoder.flush());
      rest += stop.flush();
      outcome.text += rest;
      if (sink && !rest.empty()) sink(rest, {});
      break;
    }
    std::optional<engine::RequestOutput> out = next_output(std::chrono::milliseconds(50));
    // A replay holds nothing to free (and finding the connection costs a /proc scan).
    if (client_gone && !cached_ && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      if (client_gone()) {  // nobody will read the answer: free the engine's slot and KV blocks
        cancel();
        outcome.finish = engine::FinishReason::Abort;
        break;
      }
    }
    if (!out) continue;
    if (on_prefilled_) std::exchange(on_prefilled_, nullptr)();
    if (recording) recording->deliveries.push_back(*out);
    if (outcome.completion_tokens == 0 && !out->tokens.empty())
      outcome.time_to_first_token = std::chrono::steady_clock::now() - submitted_;
    outcome.cached_tokens = std::max(outcome.cached_tokens, out->num_cached_prompt_tokens);
    outcome.dropped_tokens = std::max(outcome.dropped_tokens, out->num_dropped_prompt_tokens);
    outcome.spec = out->spec;
    if (!out->prompt_logprobs.empty()) outcome.prompt_logprobs = std::move(out->prompt_logprobs);
    std::string released;
    // Tokens count up to the one that completes a stop string: those the engine delivered after it
    // (a speculative run, an overlapped step) are not part of the answer, and how many there are
    // depends on timing.
    size_t consumed = 0;
    for (size_t i = 0; i < out->tokens.size() && !stop.matched(); ++i) {
      const int32_t token = out->tokens[i];
      ++consumed;
      if (out->finish == engine::FinishReason::Stop && i + 1 == out->tokens.size() && is_eos(token)) break;
      released += stop.push(decoder.push(token));
      if (i < out->logprobs.size()) pending_logprobs.push_back(std::move(out->logprobs[i]));
    }
    outcome.completion_tokens += static_cast<int32_t>(consumed);
    if (stop.matched()) {
      if (out->finish == engine::FinishReason::None) cancel();
      outcome.finish = engine::FinishReason::Stop;
      outcome.stop_sequence = stop.matched();
    } else if (out->finish != engine::FinishReason::None) {
      released += stop.push(decoder.flush());
      released += stop.flush();
      if (stop.matched()) outcome.stop_sequence = stop.matched();
      outcome.finish = stop.matched() ? engine::FinishReason::Stop : out->finish;
      outcome.error = out->error;
    }
    if (released.empty() && pending_logprobs.empty()) continue;
    outcome.text += released;
    if (sink && !sink(released, pending_logprobs)) {
      cancel();
      outcome.finish = engine::FinishReason::Abort;
    }
    for (auto& lp : pending_logprobs) outcome.logprobs.push_back(std::move(lp));
    pending_logprobs.clear();
  }
  outcome.total_time = std::chrono::steady_clock::now() - submitted_;
  if (cached_) {
    outcome.cached_response = true;
    outcome.cached_tokens = outcome.prompt_tokens;
    outcome.spec = {};  // no speculation ran for this answer
  } else if (recording && !recording->deliveries.empty() && ResponseCache::keeps(outcome.finish)) {
    // A stop string cancels the engine mid-answer; the deliveries up to it replay to the same
    // match, with the same stop strings (they are in the key).
    recording->deliveries.back().finish = outcome.finish;
    model_.response_cache->insert(*cache_key_, std::move(*recording));
  }
  return outcome;
}

}  // namespace tachyon::server
