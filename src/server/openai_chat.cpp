// POST /v1/chat/completions.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/choices.h"
#include "server/handlers.h"
#include "server/sse.h"

namespace tachyon::server {

void check_model(const HandlerContext& ctx, const std::string& requested) {
  const ServedModel& model = ctx.model;
  if (requested == model.id) return;
  if (ctx.models && ctx.models->find(requested).name == model.id) return;  // find throws 404 with the list
  if (requested != model.id)
    throw ApiError(ErrorKind::NotFound, fmt::format("The model '{}' does not exist; this server serves '{}'", requested,
                                                    model.id),
                   "model", "model_not_found");
}

const char* openai_finish_reason(const GenerationOutcome& outcome, bool has_tool_calls) {
  if (outcome.finish == engine::FinishReason::Length) return "length";
  if (outcome.finish == engine::FinishReason::Timeout) return "timeout";
  return has_tool_calls ? "tool_calls" : "stop";
}

namespace {

Json token_entry(const tokenizer::Tokenizer& tokenizer, int32_t token, float logprob) {
  const std::string text = tokenizer.decode(std::span<const int32_t>(&token, 1), false);
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

}  // namespace

// prompt_tokens is the prompt as sent (logical); tachyon adds how much of it the model computed
// (neither served by the prefix cache nor dropped by PFlash) and what PFlash dropped.
Json prompt_tokens_details(const GenerationOutcome& outcome) {
  return {{"cached_tokens", outcome.cached_tokens},
          {"computed_tokens", outcome.prompt_tokens - outcome.cached_tokens - outcome.dropped_tokens},
          {"dropped_tokens", outcome.dropped_tokens}};
}

Json openai_usage(const GenerationOutcome& outcome) {
  Json usage = {{"prompt_tokens", outcome.prompt_tokens},
                {"completion_tokens", outcome.completion_tokens},
                {"total_tokens", outcome.prompt_tokens + outcome.completion_tokens},
                {"prompt_tokens_details", prompt_tokens_details(outcome)}};
  if (outcome.cached_response) usage["cached_response"] = true;  // tachyon extension: the response cache answered
  if (!outcome.spec.method.empty())  // tachyon extension: the request's speculation
    usage["speculation"] = {{"method", outcome.spec.method},
                            {"drafted_tokens", outcome.spec.num_drafted},
                            {"accepted_tokens", outcome.spec.num_accepted},
                            {"mean_accepted_length", outcome.spec.mean_accepted_length()},
                            {"stopped_by", outcome.spec.stopped_by}};
  if (!outcome.spec.method.empty() && !outcome.spec.choice.empty()) {  // several drafters: which kind, and why this one
    usage["speculation"]["kind"] = outcome.spec.kind;
    usage["speculation"]["chosen"] = outcome.spec.choice;
  }
  return usage;
}

void throw_if_failed(const GenerationOutcome& outcome) {
  if (outcome.finish == engine::FinishReason::Error)
    throw ApiError(ErrorKind::Internal, fmt::format("generation failed: {}", outcome.error));
}

Json tool_arguments_object(const std::string& arguments) {
  Json input = Json::parse(arguments, nullptr, false);
  return input.is_object() ? input : Json::object();
}

Json chat_logprobs(const tokenizer::Tokenizer& tokenizer, std::span<const engine::TokenLogprob> logprobs) {
  Json content = Json::array();
  for (const engine::TokenLogprob& lp : logprobs) {
    Json entry = token_entry(tokenizer, lp.token, lp.logprob);
    Json top = Json::array();
    for (const auto& [id, p] : lp.top) top.push_back(token_entry(tokenizer, id, p));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return content;
}

void handle_chat_completions(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const ParsedRequest request = parse_chat_request(body);
  check_model(ctx, request.model);
  auto choices = std::make_shared<Choices>(ctx.model, request, ctx.admission);
  const std::string id = random_id("chatcmpl-");
  const int64_t created = unix_time();
  const bool want_logprobs = request.logprobs >= 0;

  if (!request.stream) {
    const std::vector<GenerationOutcome> outcomes = choices->run(nullptr, nullptr, ctx.client_gone);
    Json choice_list = Json::array();
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const GenerationOutcome& outcome = outcomes[i];
      throw_if_failed(outcome);
      const chat::ParsedMessage parsed = chat::parse_output((*choices)[i].parser_options(), outcome.text);
      Json message = {{"role", "assistant"}, {"content", parsed.content.empty() && !parsed.tool_calls.empty()
                                                             ? Json() : Json(parsed.content)}};
      if (!parsed.reasoning_content.empty()) message["reasoning_content"] = parsed.reasoning_content;
      if (!parsed.tool_calls.empty()) {
        Json calls = Json::array();
        for (const chat::ToolCall& call : parsed.tool_calls) calls.push_back(call.to_json());
        message["tool_calls"] = std::move(calls);
      }
      choice_list.push_back(
          {{"index", i},
           {"message", std::move(message)},
           {"logprobs", want_logprobs ? Json{{"content", chat_logprobs(*ctx.model.tokenizer, outcome.logprobs)}}
                                      : Json()},
           {"finish_reason", openai_finish_reason(outcome, !parsed.tool_calls.empty())}});
    }
    const Json response = {{"id", id},
                           {"object", "chat.completion"},
                           {"created", created},
                           {"model", ctx.model.id},
                           {"choices", std::move(choice_list)},
                           {"usage", openai_usage(combined_usage(outcomes))}};
    res.set_content(dump_json(response), "application/json");
    return;
  }

  const bool include_usage = request.include_usage;
  const HandlerContext c = ctx;
  res.set_chunked_content_provider("text/event-stream", [choices, c, id, created, include_usage, want_logprobs](
                                                            size_t, httplib::DataSink& sink) {
    SseWriter sse(sink);
    auto chunk = [&](size_t index, Json delta, Json finish, Json logprobs) {
      Json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                     {"finish_reason", std::move(finish)}};
      Json out = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", c.model.id},
                  {"choices", Json::array({std::move(choice)})}};
      if (include_usage) out["usage"] = nullptr;
      return sse.data(out);
    };
    // Each choice has its own output parser and tool-call count.
    std::vector<std::unique_ptr<chat::OutputParser>> parsers;
    std::vector<int> num_tool_calls(choices->size(), 0);
    for (size_t i = 0; i < choices->size(); ++i) parsers.push_back(chat::make_output_parser((*choices)[i].parser_options()));
    auto send_delta = [&](size_t index, chat::ParseDelta d, Json logprobs) {
      if (!d.reasoning_content.empty()) chunk(index, {{"reasoning_content", d.reasoning_content}}, nullptr, nullptr);
      if (!d.content.empty() || !logprobs.is_null()) chunk(index, {{"content", d.content}}, nullptr, std::move(logprobs));
      for (const chat::ToolCall& call : d.tool_calls) {
        Json tc = {{"index", num_tool_calls[index]++}, {"id", call.id}, {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
        chunk(index, {{"tool_calls", Json::array({std::move(tc)})}}, nullptr, nullptr);
      }
      return sse.ok();
    };
    stream_openai_choices(
        *choices, sse, {id, "chat.completion.chunk", created, c.model.id, include_usage},
        [&] {
          for (size_t i = 0; i < choices->size(); ++i) chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
        },
        [&](size_t i, std::string_view text, std::span<const engine::TokenLogprob> lps) {
          Json logprobs =
              want_logprobs && !lps.empty() ? Json{{"content", chat_logprobs(*c.model.tokenizer, lps)}} : Json();
          return send_delta(i, parsers[i]->feed(text), std::move(logprobs));
        },
        [&](size_t i, const GenerationOutcome& outcome) {
          send_delta(i, parsers[i]->finish(), nullptr);
          chunk(i, Json::object(), openai_finish_reason(outcome, num_tool_calls[i] > 0), nullptr);
        });
    sink.done();
    return true;
  });
}

}  // namespace tachyon::server
