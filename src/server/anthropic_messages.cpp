// POST /v1/messages (Anthropic). Output blocks in order: thinking, text, tool_use.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/handlers.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

const char* stop_reason(const GenerationOutcome& outcome, bool tool_use) {
  if (outcome.finish == engine::FinishReason::Length) return "max_tokens";
  if (outcome.finish == engine::FinishReason::Timeout) return "timeout";
  if (outcome.stop_sequence) return "stop_sequence";
  return tool_use ? "tool_use" : "end_turn";
}

std::string tool_use_id(const chat::ToolCall& call) {
  return call.id.rfind("call_", 0) == 0 ? "toolu_" + call.id.substr(5) : call.id;
}

Json usage(const GenerationOutcome& outcome, bool final) {
  Json u = {{"input_tokens", outcome.prompt_tokens - outcome.cached_tokens},
            {"output_tokens", final ? outcome.completion_tokens : 0},
            {"cache_read_input_tokens", outcome.cached_tokens},
            {"cache_creation_input_tokens", 0}};
  if (outcome.cached_response) u["cached_response"] = true;  // tachyon extension: the response cache answered
  return u;
}

}  // namespace

void handle_messages(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const ParsedRequest request = parse_messages_request(body);
  check_model(ctx, request.model);
  auto gen = std::make_shared<Generation>(ctx.model, request, ctx.admission);
  const std::string id = random_id("msg_");

  if (!request.stream) {
    const GenerationOutcome outcome = gen->run(nullptr, ctx.client_gone);
    throw_if_failed(outcome);
    const chat::ParsedMessage parsed = chat::parse_output(gen->parser_options(), outcome.text);
    Json content = Json::array();
    if (!parsed.reasoning_content.empty())
      content.push_back({{"type", "thinking"}, {"thinking", parsed.reasoning_content}, {"signature", ""}});
    if (!parsed.content.empty()) content.push_back({{"type", "text"}, {"text", parsed.content}});
    for (const chat::ToolCall& call : parsed.tool_calls)
      content.push_back({{"type", "tool_use"}, {"id", tool_use_id(call)}, {"name", call.name},
                         {"input", tool_arguments_object(call.arguments)}});
    const Json response = {{"id", id},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"model", ctx.model.id},
                           {"content", std::move(content)},
                           {"stop_reason", stop_reason(outcome, !parsed.tool_calls.empty())},
                           {"stop_sequence", outcome.stop_sequence ? Json(*outcome.stop_sequence) : Json()},
                           {"usage", usage(outcome, true)}};
    res.set_content(dump_json(response), "application/json");
    return;
  }

  const HandlerContext c = ctx;
  res.set_chunked_content_provider("text/event-stream", [gen, c, id](size_t, httplib::DataSink& sink) {
    SseWriter sse(sink);
    int index = -1;
    std::string open_type;  // "thinking" | "text" | "" (none open)
    bool tool_use = false;
    auto close_block = [&] {
      if (open_type.empty()) return;
      if (open_type == "thinking")
        sse.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                          {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
      sse.event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
      open_type.clear();
    };
    auto text_delta = [&](const std::string& type, const std::string& text) {
      if (text.empty()) return;
      if (open_type != type) {
        close_block();
        open_type = type;
        Json block = type == "thinking" ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                        : Json{{"type", "text"}, {"text", ""}};
        sse.event("content_block_start", {{"type", "content_block_start"}, {"index", ++index}, {"content_block", block}});
      }
      Json delta = type == "thinking" ? Json{{"type", "thinking_delta"}, {"thinking", text}}
                                      : Json{{"type", "text_delta"}, {"text", text}};
      sse.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
    };
    auto send = [&](const chat::ParseDelta& d) {
      text_delta("thinking", d.reasoning_content);
      text_delta("text", d.content);
      for (const chat::ToolCall& call : d.tool_calls) {
        close_block();
        tool_use = true;
        sse.event("content_block_start", {{"type", "content_block_start"}, {"index", ++index},
                                          {"content_block", {{"type", "tool_use"}, {"id", tool_use_id(call)},
                                                             {"name", call.name}, {"input", Json::object()}}}});
        sse.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index},
                                          {"delta", {{"type", "input_json_delta"},
                                                     {"partial_json", tool_arguments_object(call.arguments).dump()}}}});
        sse.event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
      }
      return sse.ok();
    };
    try {
      GenerationOutcome start;
      start.prompt_tokens = static_cast<int32_t>(gen->prompt_ids().size());
      sse.event("message_start", {{"type", "message_start"},
                                  {"message", {{"id", id}, {"type", "message"}, {"role", "assistant"},
                                               {"model", c.model.id}, {"content", Json::array()},
                                               {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                               {"usage", usage(start, false)}}}});
      auto parser = chat::make_output_parser(gen->parser_options());
      const GenerationOutcome outcome =
          gen->run([&](std::string_view text, std::span<const engine::TokenLogprob>) { return send(parser->feed(text)); });
      if (outcome.finish == engine::FinishReason::Error) {
        sse.event("error", error_body(ApiError(ErrorKind::Internal, "generation failed: " + outcome.error),
                                      ApiFlavor::Anthropic));
      } else if (outcome.finish != engine::FinishReason::Abort) {
        send(parser->finish());
        close_block();
        sse.event("message_delta",
                  {{"type", "message_delta"},
                   {"delta", {{"stop_reason", stop_reason(outcome, tool_use)},
                              {"stop_sequence", outcome.stop_sequence ? Json(*outcome.stop_sequence) : Json()}}},
                   {"usage", usage(outcome, true)}});
        sse.event("message_stop", {{"type", "message_stop"}});
      }
    } catch (const std::exception& e) {
      sse.event("error", error_body(ApiError(ErrorKind::Internal, e.what()), ApiFlavor::Anthropic));
    }
    sink.done();
    return true;
  });
}

void handle_count_tokens(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const ParsedRequest request = parse_count_tokens_request(body);
  check_model(ctx, request.model);
  const Prompt prompt = build_prompt(ctx.model, request);
  res.set_content(dump_json({{"input_tokens", prompt.ids.size()}}), "application/json");
}

}  // namespace tachyon::server
