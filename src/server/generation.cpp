#include "server/generation.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <random>

#include "base/error.h"
#include "server/api_error.h"
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
  try {
    std::string text = model.chat_template->render(request.messages, request.tools, !prefill, request.template_kwargs);
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

// Constrained decoding: response_format json_object, or a forced tool call written in the
// model's own tool-call syntax (the name one of the allowed tools, the arguments a JSON
// object). Null when the request constrains nothing.
std::shared_ptr<const engine::Grammar> build_grammar(const ParsedRequest& request, const chat::ParserOptions& parser) {
  const bool forced = request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named;
  if (!forced && !request.json_object) return nullptr;
  auto grammar = std::make_shared<engine::Grammar>();
  // A prompt that opened <think> gets it closed first: the constrained part is the answer.
  if (parser.starts_in_reasoning && parser.family != chat::ParserFamily::kHarmony) grammar->then_literal("</think>\n\n");
  if (!forced) {
    grammar->then_json_object();
    return grammar;
  }
  std::vector<std::string> names;
  for (const OrderedJson& tool : request.tools) {
    const std::string name = tool["function"].value("name", std::string());
    if (request.tool_choice == ToolChoice::Required || name == request.tool_name) names.push_back(name);
  }
  auto quoted = [](const std::string& name) {  // the name as a JSON string, without the opening quote
    return OrderedJson(name).dump().substr(1);
  };
  std::vector<std::string> alternatives;
  switch (parser.family) {
    case chat::ParserFamily::kHermes:  // <tool_call>\n{"name": "X", "arguments": {...}}\n</tool_call>
      for (const auto& name : names) alternatives.push_back(quoted(name) + ", \"arguments\": ");
      grammar->then_literal("<tool_call>\n{\"name\": \"").then_choice(std::move(alternatives));
      grammar->then_json_object().then_literal("}\n</tool_call>");
      break;
    case chat::ParserFamily::kLlama3:  // {"name": "X", "parameters": {...}}
      for (const auto& name : names) alternatives.push_back(quoted(name) + ", \"parameters\": ");
      grammar->then_literal("{\"name\": \"").then_choice(std::move(alternatives));
      grammar->then_json_object().then_literal("}");
      break;
    default:
      throw ApiError::invalid(fmt::format("a forced 'tool_choice' is supported for the hermes and llama3 tool-call "
                                          "formats; this model writes tool calls in the '{}' format",
                                          chat::parser_family_name(parser.family)),
                              "tool_choice");
  }
  return grammar;
}

}  // namespace

Prompt build_prompt(const ServedModel& model, const ParsedRequest& request) {
  Prompt prompt;
  if (!request.messages.is_null()) {
    prompt.text = render_chat(model, request);
    prompt.ids = model.tokenizer->encode(prompt.text, /*add_special_tokens=*/false);
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

Generation::Generation(const ServedModel& model, const ParsedRequest& request, Admission& admission)
    : model_(model), admission_(admission), stop_(request.stop) {
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
  req.grammar = build_grammar(request, parser_options_);
  req.pflash = request.pflash;
  // Tool definitions are compressed only when the request asks; a constrained output never
  // (the engine leaves a request with a grammar whole).
  req.prompt_intact = request.json_object || (!request.tools.is_null() && !request.pflash);
  try {
    req.sampling.validate(model.vocab_size);
  } catch (const Error& e) {
    throw ApiError::invalid(e.what());
  }
  if (!admission_.try_enter())
    throw ApiError(ErrorKind::RateLimit, "the server is at capacity; retry shortly", "", "rate_limit_exceeded");
  try {
    stream_ = model.engine->submit(std::move(req));
    submitted_ = std::chrono::steady_clock::now();
  } catch (const Error& e) {
    admission_.leave();
    throw ApiError::invalid(e.what());
  }
}

Generation::~Generation() {
  if (stream_) {
    stream_->cancel();
    admission_.leave();
  }
}

GenerationOutcome Generation::run(const TextSink& sink, const std::function<bool()>& client_gone) {
  GenerationOutcome outcome;
  outcome.prompt_tokens = static_cast<int32_t>(prompt_ids_.size());
  tokenizer::StreamingDecoder decoder(*model_.tokenizer, /*skip_special_tokens=*/true);
  StopMatcher stop(stop_);
  std::vector<engine::TokenLogprob> pending_logprobs;
  auto is_eos = [&](int32_t token) {
    return std::find(model_.eos_ids.begin(), model_.eos_ids.end(), token) != model_.eos_ids.end();
  };
  auto next_check = std::chrono::steady_clock::now();
  while (outcome.finish == engine::FinishReason::None) {
    if (std::chrono::steady_clock::now() >= admission_.deadline(submitted_)) {
      // Out of time: the engine frees the request's slot and blocks; the client gets what was
      // generated, with the text the detokenizer and stop matcher still held.
      stream_->cancel();
      outcome.finish = engine::FinishReason::Timeout;
      std::string rest = stop.push(decoder.flush());
      rest += stop.flush();
      outcome.text += rest;
      if (sink && !rest.empty()) sink(rest, {});
      break;
    }
    std::optional<engine::RequestOutput> out = stream_->next(std::chrono::milliseconds(50));
    if (client_gone && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      if (client_gone()) {  // nobody will read the answer: free the engine's slot and KV blocks
        stream_->cancel();
        outcome.finish = engine::FinishReason::Abort;
        break;
      }
    }
    if (!out) continue;
    if (outcome.completion_tokens == 0 && !out->tokens.empty())
      outcome.time_to_first_token = std::chrono::steady_clock::now() - submitted_;
    outcome.completion_tokens += static_cast<int32_t>(out->tokens.size());
    outcome.cached_tokens = std::max(outcome.cached_tokens, out->num_cached_prompt_tokens);
    outcome.dropped_tokens = std::max(outcome.dropped_tokens, out->num_dropped_prompt_tokens);
    outcome.spec = out->spec;
    if (!out->prompt_logprobs.empty()) outcome.prompt_logprobs = std::move(out->prompt_logprobs);
    std::string released;
    for (size_t i = 0; i < out->tokens.size() && !stop.matched(); ++i) {
      const int32_t token = out->tokens[i];
      if (out->finish == engine::FinishReason::Stop && i + 1 == out->tokens.size() && is_eos(token)) break;
      released += stop.push(decoder.push(token));
      if (i < out->logprobs.size()) pending_logprobs.push_back(std::move(out->logprobs[i]));
    }
    if (stop.matched()) {
      if (out->finish == engine::FinishReason::None) stream_->cancel();
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
      stream_->cancel();
      outcome.finish = engine::FinishReason::Abort;
    }
    for (auto& lp : pending_logprobs) outcome.logprobs.push_back(std::move(lp));
    pending_logprobs.clear();
  }
  outcome.total_time = std::chrono::steady_clock::now() - submitted_;
  return outcome;
}

}  // namespace tachyon::server
