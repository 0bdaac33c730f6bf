#include "server/response_conversation.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace tachyon::server {

namespace {
// The parser puts the instructions first, as a system message.
size_t instructions_count(const ParsedRequest& request) { return request.instructions.empty() ? 0 : 1; }
}  // namespace

void continue_stored_conversation(ResponseStore& store, ParsedRequest& request) {
  if (!request.previous_response_id) return;
  const std::optional<OrderedJson> earlier = store.get(*request.previous_response_id);
  if (!earlier)
    throw ApiError(ErrorKind::NotFound,
                   fmt::format("Previous response with id '{}' not found.", *request.previous_response_id),
                   "previous_response_id", "previous_response_not_found");
  OrderedJson messages = OrderedJson::array();
  const size_t skip = instructions_count(request);
  for (size_t i = 0; i < skip; ++i) messages.push_back(request.messages[i]);
  for (const OrderedJson& m : *earlier) messages.push_back(m);
  for (size_t i = skip; i < request.messages.size(); ++i) messages.push_back(request.messages[i]);
  request.messages = std::move(messages);
}

void store_conversation(ResponseStore& store, const std::string& id, const ParsedRequest& request,
                        const chat::ParsedMessage& output) {
  if (!request.store) return;
  OrderedJson messages = OrderedJson::array();
  for (size_t i = instructions_count(request); i < request.messages.size(); ++i) messages.push_back(request.messages[i]);
  OrderedJson turn = {{"role", "assistant"}, {"content", output.content}};
  if (!output.reasoning_content.empty()) turn["reasoning_content"] = output.reasoning_content;
  if (!output.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const chat::ToolCall& call : output.tool_calls)
      calls.push_back({{"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", template_arguments(call.arguments)}}}});
    turn["tool_calls"] = std::move(calls);
  }
  messages.push_back(std::move(turn));
  store.put(id, std::move(messages));
}

}  // namespace tachyon::server
