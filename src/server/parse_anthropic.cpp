// Parsing of Anthropic's POST /v1/messages body into chat messages for the template:
// system → a system message; text blocks → content; assistant tool_use blocks → tool_calls;
// user tool_result blocks → "tool" messages; thinking blocks → reasoning_content. A final
// assistant message is a prefill: generation continues it.
#include <fmt/format.h>

#include "server/request.h"
#include "server/request_fields.h"

namespace tachyon::server {

namespace {

std::string block_text(const OrderedJson& block, const std::string& path) {
  return require_string(block, "text", path);
}

// tool_result content: a string or a list of text blocks.
std::string tool_result_text(const OrderedJson& block, const std::string& path) {
  const OrderedJson* content = find_field(block, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  const std::string cpath = field_path(path, "content");
  if (!content->is_array()) throw ApiError::invalid(fmt::format("'{}' must be a string or an array", cpath), cpath);
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string bp = index_path(cpath, i);
    const OrderedJson& b = (*content)[i];
    if (!b.is_object() || read_string(b, "type", bp).value_or("") != "text")
      throw ApiError::invalid(fmt::format("'{}': only text blocks are supported in tool results", bp), bp);
    text += block_text(b, bp);
  }
  return text;
}

void read_message(const OrderedJson& message, const std::string& path, OrderedJson& out) {
  if (!message.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
  reject_unknown_fields(message, {"role", "content"}, path);
  const std::string role = require_string(message, "role", path);
  if (role != "user" && role != "assistant")
    throw ApiError::invalid(fmt::format("'{}.role' must be 'user' or 'assistant', got '{}'", path, role), path);
  const OrderedJson* content = find_field(message, "content");
  const std::string cpath = field_path(path, "content");
  if (!content) throw ApiError::invalid(fmt::format("'{}' is required", cpath), cpath);
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array())
    throw ApiError::invalid(fmt::format("'{}' must be a string or an array of content blocks", cpath), cpath);
  std::string text, reasoning;
  OrderedJson tool_calls = OrderedJson::array();
  auto flush_text = [&] {
    if (!text.empty()) out.push_back({{"role", role}, {"content", text}});
    text.clear();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string bp = index_path(cpath, i);
    const OrderedJson& block = (*content)[i];
    if (!block.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", bp), bp);
    const std::string type = require_string(block, "type", bp);
    if (type == "text") {
      reject_unknown_fields(block, {"type", "text", "cache_control", "citations"}, bp);
      text += block_text(block, bp);
    } else if (type == "tool_use" && role == "assistant") {
      reject_unknown_fields(block, {"type", "id", "name", "input", "cache_control"}, bp);
      const OrderedJson* input = read_object(block, "input", bp);
      tool_calls.push_back({{"id", require_string(block, "id", bp)},
                            {"type", "function"},
                            {"function", {{"name", require_string(block, "name", bp)},
                                          {"arguments", input ? *input : OrderedJson::object()}}}});
    } else if (type == "tool_result" && role == "user") {
      reject_unknown_fields(block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, bp);
      flush_text();
      read_bool(block, "is_error", bp);
      out.push_back({{"role", "tool"},
                     {"tool_call_id", require_string(block, "tool_use_id", bp)},
                     {"content", tool_result_text(block, bp)}});
    } else if (type == "thinking" && role == "assistant") {
      reject_unknown_fields(block, {"type", "thinking", "signature"}, bp);
      reasoning += require_string(block, "thinking", bp);
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Opaque to us; nothing to render.
    } else if (type == "image" || type == "document") {
      throw ApiError::invalid(fmt::format("'{}': content of type '{}' is not supported by this model", bp, type), bp);
    } else {
      throw ApiError::invalid(fmt::format("'{}': content block type '{}' is not allowed in a {} message", bp, type, role),
                              bp);
    }
  }
  if (role == "assistant") {
    OrderedJson msg = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
    out.push_back(std::move(msg));
  } else {
    flush_text();
  }
}

std::string read_system(const OrderedJson& body) {
  const OrderedJson* system = find_field(body, "system");
  if (!system) return "";
  if (system->is_string()) return system->get<std::string>();
  if (!system->is_array()) throw ApiError::invalid("'system' must be a string or an array of text blocks", "system");
  std::string text;
  for (size_t i = 0; i < system->size(); ++i) {
    const std::string bp = index_path("system", i);
    const OrderedJson& block = (*system)[i];
    if (!block.is_object() || read_string(block, "type", bp).value_or("") != "text")
      throw ApiError::invalid(fmt::format("'{}' must be a text block", bp), bp);
    reject_unknown_fields(block, {"type", "text", "cache_control", "citations"}, bp);
    if (!text.empty()) text += "\n";
    text += block_text(block, bp);
  }
  return text;
}

OrderedJson read_tools(const OrderedJson& body) {
  const OrderedJson* tools = find_field(body, "tools");
  if (!tools) return OrderedJson();
  if (!tools->is_array()) throw ApiError::invalid("'tools' must be an array", "tools");
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string path = index_path("tools", i);
    const OrderedJson& tool = (*tools)[i];
    if (!tool.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
    if (auto type = read_string(tool, "type", path); type && *type != "custom")
      throw ApiError::invalid(fmt::format("'{}': server tool '{}' is not supported", path, *type), path);
    reject_unknown_fields(tool, {"type", "name", "description", "input_schema", "cache_control"}, path);
    OrderedJson fn = {{"name", require_string(tool, "name", path)}};
    if (auto d = read_string(tool, "description", path)) fn["description"] = *d;
    const OrderedJson* schema = read_object(tool, "input_schema", path);
    if (!schema) throw ApiError::invalid(fmt::format("'{}.input_schema' is required", path), path);
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out.empty() ? OrderedJson() : out;
}

}  // namespace

namespace {

ParsedRequest parse_anthropic(std::string_view text, bool count_tokens) {
  const OrderedJson body = parse_body(text);
  if (count_tokens)
    reject_unknown_fields(body, {"model", "messages", "system", "tools", "tool_choice", "thinking"});
  else
    reject_unknown_fields(body, {"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature",
                                 "top_p", "top_k", "tools", "tool_choice", "metadata", "thinking", "service_tier",
                                 "speculative", "pflash"});
  ParsedRequest out;
  out.endpoint = Endpoint::Messages;
  out.model = require_string(body, "model");
  if (!count_tokens) {
    read_speculative(body, out);
  read_pflash(body, out);  // tachyon extension, as in the OpenAI bodies
    const auto max_tokens = read_int(body, "max_tokens", 1, INT32_MAX);
    if (!max_tokens) throw ApiError::invalid("'max_tokens' is required", "max_tokens");
    out.max_tokens = static_cast<int32_t>(*max_tokens);
  }
  const OrderedJson& messages = require_array(body, "messages");
  if (messages.empty()) throw ApiError::invalid("'messages' must contain at least one message", "messages");
  out.messages = OrderedJson::array();
  const std::string system = read_system(body);
  if (!system.empty()) out.messages.push_back({{"role", "system"}, {"content", system}});
  for (size_t i = 0; i < messages.size(); ++i) read_message(messages[i], index_path("messages", i), out.messages);
  if (out.messages.empty() || (out.messages.size() == 1 && out.messages[0]["role"] == "system"))
    throw ApiError::invalid("'messages' must contain at least one message with content", "messages");
  out.continue_final_message = messages.back().is_object() && messages.back().value("role", "") == "assistant";
  out.tools = read_tools(body);
  if (const OrderedJson* choice = read_object(body, "tool_choice")) {
    const std::string type = require_string(*choice, "type", "tool_choice");
    if (type == "none") out.tool_choice = ToolChoice::None;
    else if (type == "any") out.tool_choice = ToolChoice::Required;
    else if (type == "tool") {
      out.tool_choice = ToolChoice::Named;
      out.tool_name = require_string(*choice, "name", "tool_choice");
    } else if (type != "auto") throw ApiError::invalid(fmt::format("unknown tool_choice type '{}'", type), "tool_choice");
    check_forced_tool_choice(out);
  }
  if (auto t = read_number(body, "temperature", 0, 1)) {
    out.sampling.temperature = static_cast<float>(*t);
    out.sampling_given.temperature = true;
  }
  if (auto p = read_number(body, "top_p", 0, 1)) {
    if (*p <= 0) throw ApiError::invalid("'top_p' must be greater than 0", "top_p");
    out.sampling.top_p = static_cast<float>(*p);
    out.sampling_given.top_p = true;
  }
  if (auto k = read_int(body, "top_k", 0, 1 << 30)) {
    out.sampling.top_k = static_cast<int32_t>(*k);
    out.sampling_given.top_k = true;
  }
  out.stop = read_stop(body, "stop_sequences");
  out.stream = read_bool(body, "stream").value_or(false);
  if (const OrderedJson* thinking = read_object(body, "thinking")) {
    const std::string type = require_string(*thinking, "type", "thinking");
    if (type != "enabled" && type != "disabled")
      throw ApiError::invalid("'thinking.type' must be 'enabled' or 'disabled'", "thinking");
    out.template_kwargs["enable_thinking"] = type == "enabled";
  }
  read_object(body, "metadata");
  return out;
}

}  // namespace

ParsedRequest parse_messages_request(std::string_view body) { return parse_anthropic(body, false); }
ParsedRequest parse_count_tokens_request(std::string_view body) { return parse_anthropic(body, true); }

}  // namespace tachyon::server
