// Ollama's POST /api/chat and /api/generate: one generation answered as NDJSON lines
// ({"model", "created_at", "message" | "response", "done": false}, then a final line with
// done_reason and the counts and durations in nanoseconds) or, with "stream": false, as one
// object. The two endpoints differ only in where the text goes: chat writes
// message.{content, thinking, tool_calls}, generate writes response and thinking.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/ollama.h"
#include "server/ollama_request.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string created_at() { return ollama_time(std::chrono::system_clock::now()); }

// Where a generation's text goes in each endpoint's objects.
enum class Shape { Chat, Generate };

Json tool_calls_json(const std::vector<chat::ToolCall>& calls, int& index) {
  Json out = Json::array();
  for (const chat::ToolCall& call : calls)
    out.push_back({{"id", call.id},
                   {"function",
                    {{"index", index++}, {"name", call.name}, {"arguments", tool_arguments_object(call.arguments)}}}});
  return out;
}

// {"model", "created_at", "message": {...}} or {"model", "created_at", "response", "thinking"}.
Json fragment(Shape shape, const std::string& model, const std::string& content, const std::string& thinking,
              Json tool_calls) {
  Json out = {{"model", model}, {"created_at", created_at()}};
  Json text = {{"content", content}};
  if (!thinking.empty()) text["thinking"] = thinking;
  if (!tool_calls.empty()) text["tool_calls"] = std::move(tool_calls);
  if (shape == Shape::Chat) {
    Json message = {{"role", "assistant"}};
    message.update(text);
    out["message"] = std::move(message);
  } else {
    out["response"] = text["content"];
    text.erase("content");
    out.update(text);
  }
  return out;
}

// The final object's fields: done, done_reason, counts and durations (nanoseconds).
void finish(Json& out, const GenerationOutcome& outcome, Clock::time_point start) {
  const auto ns = [](std::chrono::nanoseconds d) { return static_cast<int64_t>(d.count()); };
  out["done"] = true;
  out["done_reason"] = outcome.finish == engine::FinishReason::Length    ? "length"
                       : outcome.finish == engine::FinishReason::Timeout ? "timeout"
                                                                         : "stop";
  out["total_duration"] = ns(Clock::now() - start);
  out["load_duration"] = 0;
  out["prompt_eval_count"] = outcome.prompt_tokens;
  out["prompt_eval_duration"] = ns(outcome.time_to_first_token);
  out["eval_count"] = outcome.completion_tokens;
  out["eval_duration"] = ns(outcome.total_time - outcome.time_to_first_token);
  if (outcome.cached_tokens > 0) out["prompt_cached_count"] = outcome.cached_tokens;  // tachyon extensions
  if (outcome.cached_response) out["cached_response"] = true;
}

// Ollama answers `think: true` for a model that cannot think with a 400.
void check_think(const ServedModel& model, const OllamaRequest& request) {
  if (request.think.value_or(false) && !ollama_can_think(model))
    throw ApiError::invalid(fmt::format("\"{}\" does not support thinking", model.id), "think");
}

void serve(Shape shape, HandlerContext ctx, const OllamaRequest& o, Clock::time_point start, httplib::Response& res) {
  check_model(ctx, o.request.model);
  check_think(ctx.model, o);
  const std::string& id = ctx.model.id;
  if (o.load_only) {  // the model is always loaded: say so, and generate nothing
    Json out = fragment(shape, id, "", "", Json::array());
    out["done"] = true;
    out["done_reason"] = o.unload ? "unload" : "load";
    res.set_content(dump_json(out), "application/json");
    return;
  }
  auto gen = std::make_shared<Generation>(ctx.model, o.request, ctx.admission);
  const bool want_logprobs = o.request.logprobs >= 0;
  auto logprobs_json = [tokenizer = ctx.model.tokenizer](std::span<const engine::TokenLogprob> lps) {
    return chat_logprobs(*tokenizer, lps);
  };

  if (!o.request.stream) {
    const GenerationOutcome outcome = gen->run(nullptr, ctx.client_gone);
    throw_if_failed(outcome);
    const chat::ParsedMessage parsed = chat::parse_output(gen->parser_options(), outcome.text);
    int index = 0;
    Json out = fragment(shape, id, parsed.content, parsed.reasoning_content, tool_calls_json(parsed.tool_calls, index));
    if (want_logprobs) out["logprobs"] = logprobs_json(outcome.logprobs);
    finish(out, outcome, start);
    res.set_content(dump_json(out), "application/json");
    return;
  }

  res.set_chunked_content_provider("application/x-ndjson", [gen, shape, id, want_logprobs, logprobs_json, start](
                                                                size_t, httplib::DataSink& sink) {
    NdjsonWriter ndjson(sink);
    auto parser = chat::make_output_parser(gen->parser_options());
    int index = 0;
    auto send = [&](const chat::ParseDelta& d, std::span<const engine::TokenLogprob> lps) {
      if (d.content.empty() && d.reasoning_content.empty() && d.tool_calls.empty() && lps.empty()) return ndjson.ok();
      Json line = fragment(shape, id, d.content, d.reasoning_content, tool_calls_json(d.tool_calls, index));
      if (want_logprobs && !lps.empty()) line["logprobs"] = logprobs_json(lps);
      line["done"] = false;
      return ndjson.line(line);
    };
    try {
      const GenerationOutcome outcome = gen->run([&](std::string_view text, std::span<const engine::TokenLogprob> lps) {
        return send(parser->feed(text), want_logprobs ? lps : std::span<const engine::TokenLogprob>());
      });
      if (outcome.finish == engine::FinishReason::Error) {
        const ApiError failed(ErrorKind::Internal, "generation failed: " + outcome.error);
        ndjson.line(error_body(failed, ApiFlavor::Ollama));
      } else if (outcome.finish != engine::FinishReason::Abort) {
        send(parser->finish(), {});
        Json last = fragment(shape, id, "", "", Json::array());
        finish(last, outcome, start);
        ndjson.line(last);
      }
    } catch (const std::exception& e) {
      ndjson.line(error_body(ApiError(ErrorKind::Internal, e.what()), ApiFlavor::Ollama));
    }
    sink.done();
    return true;
  });
}

}  // namespace

void handle_ollama_chat(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const Clock::time_point start = Clock::now();
  serve(Shape::Chat, ctx, parse_ollama_chat_request(body), start, res);
}

void handle_ollama_generate(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const Clock::time_point start = Clock::now();
  serve(Shape::Generate, ctx, parse_ollama_generate_request(body), start, res);
}

}  // namespace tachyon::server
