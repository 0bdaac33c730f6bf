// POST /v1/responses (OpenAI Responses API). Output items in order: reasoning, message,
// function_call. Stored responses (store, the default) can be continued with
// previous_response_id (server/response_conversation.h).
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/handlers.h"
#include "server/message_logprobs.h"
#include "server/response_conversation.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

struct ResponseShell {
  std::string id;
  int64_t created_at = 0;
  const ParsedRequest* request = nullptr;
  std::string model;
};

Json response_object(const ResponseShell& shell, const char* status, Json output, const GenerationOutcome* outcome) {
  const ParsedRequest& r = *shell.request;
  Json tools = Json::array();
  if (!r.tools.is_null())
    for (const auto& t : r.tools) {
      Json fn = Json::parse(t["function"].dump());
      fn["type"] = "function";
      tools.push_back(std::move(fn));
    }
  Json response = {{"id", shell.id},
                   {"object", "response"},
                   {"created_at", shell.created_at},
                   {"status", status},
                   {"error", nullptr},
                   {"incomplete_details", nullptr},
                   {"instructions", r.instructions.empty() ? Json() : Json(r.instructions)},
                   {"max_output_tokens", r.max_tokens ? Json(*r.max_tokens) : Json()},
                   {"model", shell.model},
                   {"output", std::move(output)},
                   {"parallel_tool_calls", true},
                   {"previous_response_id", r.previous_response_id ? Json(*r.previous_response_id) : Json()},
                   {"temperature", r.sampling.temperature},
                   {"top_p", r.sampling.top_p},
                   {"tool_choice", r.tool_choice == ToolChoice::None ? "none" : "auto"},
                   {"tools", std::move(tools)},
                   {"text", {{"format", {{"type", r.output_constraint ? "json_schema" : r.json_object ? "json_object" : "text"}}}}},
                   {"store", r.store},
                   {"top_logprobs", r.logprobs >= 0 ? Json(r.logprobs) : Json()},
                   {"metadata", Json::object()},
                   {"usage", nullptr}};
  if (outcome) {
    if (outcome->finish == engine::FinishReason::Length)
      response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (outcome->finish == engine::FinishReason::Timeout) response["incomplete_details"] = {{"reason", "timeout"}};
    response["usage"] = {{"input_tokens", outcome->prompt_tokens},
                         {"input_tokens_details", {{"cached_tokens", outcome->cached_tokens}}},
                         {"output_tokens", outcome->completion_tokens},
                         {"output_tokens_details", {{"reasoning_tokens", 0}}},
                         {"total_tokens", outcome->prompt_tokens + outcome->completion_tokens}};
    if (outcome->cached_response) response["usage"]["cached_response"] = true;  // tachyon extension
  }
  return response;
}

const char* final_status(const GenerationOutcome& outcome) {
  const bool cut = outcome.finish == engine::FinishReason::Length || outcome.finish == engine::FinishReason::Timeout;
  return cut ? "incomplete" : "completed";
}

Json message_item(const std::string& id, const std::string& text, const char* status, Json logprobs = Json::array()) {
  Json content = Json::array();
  if (std::string_view(status) == "completed" || !text.empty())
    content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", std::move(logprobs)}});
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

Json reasoning_item(const std::string& id, const std::string& text) {
  return {{"type", "reasoning"}, {"id", id}, {"summary", Json::array()},
          {"content", Json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

Json function_call_item(const std::string& id, const chat::ToolCall& call, const char* status) {
  return {{"type", "function_call"}, {"id", id}, {"call_id", call.id}, {"name", call.name},
          {"arguments", call.arguments}, {"status", status}};
}

}  // namespace

void handle_responses(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  ParsedRequest parsed_request = parse_responses_request(body);
  check_model(ctx, parsed_request.model);
  if (ctx.responses) continue_stored_conversation(*ctx.responses, parsed_request);
  else if (parsed_request.previous_response_id)
    throw ApiError(ErrorKind::NotFound, "this server stores no responses", "previous_response_id",
                   "previous_response_not_found");
  auto request = std::make_shared<const ParsedRequest>(std::move(parsed_request));
  auto gen = std::make_shared<Generation>(ctx.model, *request, ctx.admission);
  ResponseShell shell{random_id("resp_"), unix_time(), request.get(), ctx.model.id};
  ResponseStore* store = ctx.responses;
  const bool want_logprobs = request->logprobs >= 0;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer = ctx.model.tokenizer;

  if (!request->stream) {
    // The message's logprobs: the text goes through the streaming parser to tell message
    // tokens from reasoning and tool-call tokens.
    auto parser = chat::make_output_parser(gen->parser_options());
    MessageLogprobs tracker(*tokenizer);
    std::vector<engine::TokenLogprob> message_lps;
    auto keep = [&](const chat::ParseDelta& d, std::span<const engine::TokenLogprob> lps) {
      for (auto& lp : tracker.take(d, lps)) message_lps.push_back(std::move(lp));
    };
    TextSink sink;
    if (want_logprobs)
      sink = [&](std::string_view text, std::span<const engine::TokenLogprob> lps) {
        keep(parser->feed(text), lps);
        return true;
      };
    const GenerationOutcome outcome = gen->run(sink, ctx.client_gone);
    throw_if_failed(outcome);
    if (want_logprobs) keep(parser->finish(), {});
    const chat::ParsedMessage parsed = chat::parse_output(gen->parser_options(), outcome.text);
    Json output = Json::array();
    if (!parsed.reasoning_content.empty()) output.push_back(reasoning_item(random_id("rs_"), parsed.reasoning_content));
    if (!parsed.content.empty() || parsed.tool_calls.empty())
      output.push_back(message_item(random_id("msg_"), parsed.content, "completed",
                                    want_logprobs ? chat_logprobs(*tokenizer, message_lps) : Json::array()));
    for (const chat::ToolCall& call : parsed.tool_calls) output.push_back(function_call_item(random_id("fc_"), call, "completed"));
    if (store) store_conversation(*store, shell.id, *request, parsed);
    res.set_content(dump_json(response_object(shell, final_status(outcome), std::move(output), &outcome)),
                    "application/json");
    return;
  }

  res.set_chunked_content_provider("text/event-stream", [gen, request, shell, store, want_logprobs, tokenizer](
                                                            size_t, httplib::DataSink& sink) {
    SseWriter sse(sink);
    int64_t sequence = 0;
    auto emit = [&](const char* type, Json payload) {
      payload["type"] = type;
      payload["sequence_number"] = sequence++;
      return sse.event(type, payload);
    };
    Json done_items = Json::array();
    // The item being streamed: a reasoning or message item, text so far.
    std::string open_kind, open_id, open_text;
    Json open_logprobs = Json::array();  // the open message's, when asked for
    MessageLogprobs tracker(*tokenizer);
    chat::ParsedMessage streamed;        // what the stored conversation keeps
    auto close_item = [&] {
      if (open_kind.empty()) return;
      const int64_t index = static_cast<int64_t>(done_items.size());
      Json item;
      if (open_kind == "message") {
        emit("response.output_text.done", {{"item_id", open_id}, {"output_index", index}, {"content_index", 0},
                                           {"text", open_text}, {"logprobs", open_logprobs}});
        item = message_item(open_id, open_text, "completed", std::move(open_logprobs));
        open_logprobs = Json::array();
        emit("response.content_part.done", {{"item_id", open_id}, {"output_index", index}, {"content_index", 0},
                                            {"part", item["content"][0]}});
      } else {
        emit("response.reasoning_text.done", {{"item_id", open_id}, {"output_index", index}, {"content_index", 0},
                                              {"text", open_text}});
        item = reasoning_item(open_id, open_text);
      }
      emit("response.output_item.done", {{"output_index", index}, {"item", item}});
      done_items.push_back(std::move(item));
      open_kind.clear();
      open_text.clear();
    };
    auto text_delta = [&](const std::string& kind, const std::string& text, Json logprobs = Json::array()) {
      if (text.empty()) return;
      if (open_kind != kind) {
        close_item();
        const int64_t index = static_cast<int64_t>(done_items.size());
        open_kind = kind;
        open_id = random_id(kind == "message" ? "msg_" : "rs_");
        if (kind == "message") {
          emit("response.output_item.added", {{"output_index", index}, {"item", message_item(open_id, "", "in_progress")}});
          emit("response.content_part.added",
               {{"item_id", open_id}, {"output_index", index}, {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}, {"logprobs", Json::array()}}}});
        } else {
          emit("response.output_item.added",
               {{"output_index", index},
                {"item", {{"type", "reasoning"}, {"id", open_id}, {"summary", Json::array()}, {"content", Json::array()}}}});
        }
      }
      open_text += text;
      const int64_t at = static_cast<int64_t>(done_items.size());
      if (kind == "message") {
        for (const Json& lp : logprobs) open_logprobs.push_back(lp);
        emit("response.output_text.delta", {{"item_id", open_id}, {"output_index", at}, {"content_index", 0},
                                            {"delta", text}, {"logprobs", std::move(logprobs)}});
      } else {
        emit("response.reasoning_text.delta", {{"item_id", open_id}, {"output_index", at}, {"content_index", 0},
                                               {"delta", text}});
      }
    };
    auto send = [&](const chat::ParseDelta& d, std::span<const engine::TokenLogprob> lps) {
      std::vector<engine::TokenLogprob> mine = tracker.take(d, lps);
      streamed.content += d.content;
      streamed.reasoning_content += d.reasoning_content;
      streamed.tool_calls.insert(streamed.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
      text_delta("reasoning", d.reasoning_content);
      text_delta("message", d.content, want_logprobs ? chat_logprobs(*tokenizer, mine) : Json::array());
      for (const chat::ToolCall& call : d.tool_calls) {
        close_item();
        const int64_t index = static_cast<int64_t>(done_items.size());
        const std::string fc_id = random_id("fc_");
        Json item = function_call_item(fc_id, call, "in_progress");
        item["arguments"] = "";
        emit("response.output_item.added", {{"output_index", index}, {"item", item}});
        emit("response.function_call_arguments.delta", {{"item_id", fc_id}, {"output_index", index}, {"delta", call.arguments}});
        emit("response.function_call_arguments.done", {{"item_id", fc_id}, {"output_index", index}, {"arguments", call.arguments}});
        Json done = function_call_item(fc_id, call, "completed");
        emit("response.output_item.done", {{"output_index", index}, {"item", done}});
        done_items.push_back(std::move(done));
      }
      return sse.ok();
    };
    try {
      emit("response.created", {{"response", response_object(shell, "in_progress", Json::array(), nullptr)}});
      emit("response.in_progress", {{"response", response_object(shell, "in_progress", Json::array(), nullptr)}});
      auto parser = chat::make_output_parser(gen->parser_options());
      const GenerationOutcome outcome = gen->run([&](std::string_view text, std::span<const engine::TokenLogprob> lps) {
        return send(parser->feed(text), lps);
      });
      if (outcome.finish == engine::FinishReason::Error) {
        Json failed = response_object(shell, "failed", done_items, &outcome);
        failed["error"] = {{"code", "server_error"}, {"message", "generation failed: " + outcome.error}};
        emit("response.failed", {{"response", std::move(failed)}});
      } else if (outcome.finish != engine::FinishReason::Abort) {
        send(parser->finish(), {});
        if (done_items.empty() && open_kind.empty()) {
          // No text at all: still report one (empty) message item, as the non-streamed form does.
          open_kind = "message";
          open_id = random_id("msg_");
          emit("response.output_item.added", {{"output_index", 0}, {"item", message_item(open_id, "", "in_progress")}});
          emit("response.content_part.added",
               {{"item_id", open_id}, {"output_index", 0}, {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}, {"logprobs", Json::array()}}}});
        }
        close_item();
        if (store) store_conversation(*store, shell.id, *request, streamed);
        const char* status = final_status(outcome);
        emit(std::string_view(status) == "completed" ? "response.completed" : "response.incomplete",
             {{"response", response_object(shell, status, done_items, &outcome)}});
      }
    } catch (const std::exception& e) {
      sse.event("error", {{"type", "error"}, {"code", "server_error"}, {"message", e.what()}, {"param", nullptr},
                          {"sequence_number", sequence++}});
    }
    sink.done();
    return true;
  });
}

}  // namespace tachyon::server
