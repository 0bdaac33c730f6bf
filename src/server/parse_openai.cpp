// Parsing of the OpenAI endpoints' bodies: /v1/chat/completions, /v1/completions, /v1/responses.
#include <fmt/format.h>

#include "server/reasoning_effort.h"
#include "server/request.h"
#include "server/request_fields.h"
#include "server/structured_output.h"

namespace tachyon::server {

namespace {

// Text of an OpenAI message `content`: a string or a list of {"type": "text", "text"} parts
// (joined). Images and audio are refused: no model here reads them.
std::string read_content_text(const OrderedJson& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw ApiError::invalid(fmt::format("'{}' must be a string or an array of content parts", path), path);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string ppath = index_path(path, i);
    const OrderedJson& part = content[i];
    if (!part.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", ppath), ppath);
    const std::string type = require_string(part, "type", ppath);
    if (type == "text" || type == "input_text" || type == "output_text") {
      text += require_string(part, "text", ppath);
    } else if (type == "image_url" || type == "input_image" || type == "input_audio" || type == "file" ||
               type == "input_file") {
      throw ApiError::invalid(fmt::format("'{}': content of type '{}' is not supported by this model", ppath, type),
                              ppath);
    } else {
      throw ApiError::invalid(fmt::format("'{}.type': unknown content part type '{}'", ppath, type), ppath);
    }
  }
  return text;
}

OrderedJson read_chat_message(const OrderedJson& message, const std::string& path) {
  if (!message.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
  reject_unknown_fields(message, {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
                                  "reasoning", "refusal", "function_call", "audio"},
                        path);
  std::string role = require_string(message, "role", path);
  if (role == "developer") role = "system";
  OrderedJson out = {{"role", role}};
  const OrderedJson* content = find_field(message, "content");
  const std::string cpath = field_path(path, "content");
  if (role == "system" || role == "user" || role == "tool") {
    if (!content) throw ApiError::invalid(fmt::format("'{}' is required", cpath), cpath);
    out["content"] = read_content_text(*content, cpath);
    if (role == "tool") out["tool_call_id"] = read_string(message, "tool_call_id", path).value_or("");
  } else if (role == "assistant") {
    out["content"] = content ? read_content_text(*content, cpath) : std::string();
    if (auto r = read_string(message, "reasoning_content", path)) out["reasoning_content"] = *r;
    else if (auto r2 = read_string(message, "reasoning", path)) out["reasoning_content"] = *r2;
    if (const OrderedJson* calls = find_field(message, "tool_calls")) {
      const std::string tpath = field_path(path, "tool_calls");
      if (!calls->is_array()) throw ApiError::invalid(fmt::format("'{}' must be an array", tpath), tpath);
      OrderedJson tool_calls = OrderedJson::array();
      for (size_t i = 0; i < calls->size(); ++i) {
        const std::string cp = index_path(tpath, i);
        const OrderedJson& call = (*calls)[i];
        if (!call.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", cp), cp);
        const OrderedJson* fn = read_object(call, "function", cp);
        if (!fn) throw ApiError::invalid(fmt::format("'{}.function' is required", cp), cp);
        const std::string fp = field_path(cp, "function");
        const std::string args = read_string(*fn, "arguments", fp).value_or("{}");
        tool_calls.push_back({{"id", read_string(call, "id", cp).value_or("")},
                              {"type", "function"},
                              {"function", {{"name", require_string(*fn, "name", fp)},
                                            {"arguments", template_arguments(args)}}}});
      }
      if (!tool_calls.empty()) out["tool_calls"] = std::move(tool_calls);
    } else if (!content) {
      throw ApiError::invalid(fmt::format("'{}' is required unless tool_calls is given", cpath), cpath);
    }
  } else {
    const std::string rpath = field_path(path, "role");
    throw ApiError::invalid(fmt::format("'{}' must be one of system, developer, user, assistant, tool; got '{}'",
                                        rpath, role),
                            rpath);
  }
  if (auto name = read_string(message, "name", path)) out["name"] = *name;
  return out;
}

// After `tools` are read: the forced choices need them, and a named one must be declared.
void read_tool_choice(const OrderedJson& body, ParsedRequest& out) {
  const OrderedJson* choice = find_field(body, "tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") out.tool_choice = ToolChoice::None;
    else if (c == "auto") out.tool_choice = ToolChoice::Auto;
    else if (c == "required") out.tool_choice = ToolChoice::Required;
    else throw ApiError::invalid(fmt::format("'tool_choice' must be 'none', 'auto' or 'required', got '{}'", c),
                                 "tool_choice");
  } else if (choice->is_object()) {
    // Chat: {"type": "function", "function": {"name": X}}; Responses: {"type": "function", "name": X}.
    const std::string type = require_string(*choice, "type", "tool_choice");
    if (type != "function")
      throw ApiError::invalid(fmt::format("'tool_choice.type' must be 'function', got '{}'", type), "tool_choice.type");
    if (const OrderedJson* fn = read_object(*choice, "function", "tool_choice"))
      out.tool_name = require_string(*fn, "name", "tool_choice.function");
    else
      out.tool_name = require_string(*choice, "name", "tool_choice");
    out.tool_choice = ToolChoice::Named;
  } else {
    throw ApiError::invalid("'tool_choice' must be a string or an object", "tool_choice");
  }
  check_forced_tool_choice(out);
}

void read_template_kwargs(const OrderedJson& body, ParsedRequest& out) {
  if (const OrderedJson* kwargs = read_object(body, "chat_template_kwargs")) out.template_kwargs = *kwargs;
}

void require_model(const OrderedJson& body, ParsedRequest& out) { out.model = require_string(body, "model"); }

void read_n(const OrderedJson& body, ParsedRequest& out) {
  out.n = static_cast<int32_t>(read_int(body, "n", 1, kMaxChoices).value_or(1));
}

void read_stream(const OrderedJson& body, ParsedRequest& out) {
  out.stream = read_bool(body, "stream").value_or(false);
  if (const OrderedJson* options = read_object(body, "stream_options")) {
    if (!out.stream)
      throw ApiError::invalid("'stream_options' is only allowed when 'stream' is true", "stream_options");
    reject_unknown_fields(*options, {"include_usage", "continuous_usage_stats", "include_obfuscation"},
                          "stream_options");
    out.include_usage = read_bool(*options, "include_usage", "stream_options").value_or(false);
  }
}

}  // namespace

ParsedRequest parse_chat_request(std::string_view text) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "messages", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
                               "max_tokens", "max_completion_tokens", "n", "presence_penalty", "response_format",
                               "seed", "stop", "stream", "stream_options", "temperature", "top_p", "tools",
                               "tool_choice", "parallel_tool_calls", "user", "metadata", "store", "service_tier",
                               "reasoning_effort", "top_k", "min_p", "repetition_penalty", "chat_template_kwargs",
                               "continue_final_message", "add_generation_prompt", "prompt_cache_key",
                               "safety_identifier", "speculative", "grammar", "json_schema", "guided_json",
                               "guided_regex", "guided_choice", "guided_grammar", "structured_outputs", "pflash"});
  ParsedRequest out;
  out.endpoint = Endpoint::ChatCompletions;
  require_model(body, out);
  const OrderedJson& messages = require_array(body, "messages");
  if (messages.empty()) throw ApiError::invalid("'messages' must contain at least one message", "messages");
  out.messages = OrderedJson::array();
  for (size_t i = 0; i < messages.size(); ++i) out.messages.push_back(read_chat_message(messages[i], index_path("messages", i)));
  out.tools = read_openai_tools(body);
  read_tool_choice(body, out);
  read_template_kwargs(body, out);
  read_openai_sampling(body, out);
  read_speculative(body, out);
  read_pflash(body, out);
  read_n(body, out);
  read_stream(body, out);
  out.stop = read_stop(body, "stop");
  if (auto m = read_int(body, "max_completion_tokens", 1, INT32_MAX)) out.max_tokens = static_cast<int32_t>(*m);
  else if (auto m2 = read_int(body, "max_tokens", 1, INT32_MAX)) out.max_tokens = static_cast<int32_t>(*m2);
  const bool logprobs = read_bool(body, "logprobs").value_or(false);
  const auto top = read_int(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (top && !logprobs) throw ApiError::invalid("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  if (logprobs) out.logprobs = static_cast<int32_t>(top.value_or(0));
  read_structured_output(body, out);
  if (auto effort = read_string(body, "reasoning_effort"))
    out.reasoning_effort = validate_reasoning_effort(*effort, "reasoning_effort");
  out.continue_final_message = read_bool(body, "continue_final_message").value_or(false);
  if (read_bool(body, "add_generation_prompt").value_or(true) == false) out.continue_final_message = true;
  if (out.continue_final_message && out.messages.back()["role"] != "assistant")
    throw ApiError::invalid("'continue_final_message' needs the last message to be the assistant's",
                            "continue_final_message");
  read_bool(body, "parallel_tool_calls");
  read_bool(body, "store");
  read_string(body, "user");
  return out;
}

ParsedRequest parse_completion_request(std::string_view text) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs",
                               "max_tokens", "n", "presence_penalty", "seed", "stop", "stream", "stream_options",
                               "suffix", "temperature", "top_p", "user", "top_k", "min_p", "repetition_penalty",
                               "speculative", "response_format", "grammar", "json_schema", "guided_json",
                               "guided_regex", "guided_choice", "guided_grammar", "structured_outputs", "pflash"});
  ParsedRequest out;
  out.endpoint = Endpoint::Completions;
  require_model(body, out);
  out.suffix = read_string(body, "suffix");
  const OrderedJson* prompt = find_field(body, "prompt");
  if (!prompt) throw ApiError::invalid("'prompt' is required", "prompt");
  // A string, a list of token ids, or a batch of one of either.
  const OrderedJson* single = prompt;
  if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1) throw ApiError::invalid("batched prompts are not supported; send one prompt", "prompt");
    single = &prompt->front();
  }
  if (single->is_string()) {
    if (single->get<std::string>().empty()) throw ApiError::invalid("'prompt' must not be empty", "prompt");
    out.prompt_text = single->get<std::string>();
  } else if (single->is_array()) {
    if (single->empty()) throw ApiError::invalid("'prompt' must not be empty", "prompt");
    std::vector<int32_t> ids;
    for (const OrderedJson& id : *single) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw ApiError::invalid("'prompt' token ids must be non-negative integers", "prompt");
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    out.prompt_ids = std::move(ids);
  } else {
    throw ApiError::invalid("'prompt' must be a string or an array of token ids", "prompt");
  }
  read_openai_sampling(body, out);
  read_speculative(body, out);
  read_pflash(body, out);
  read_n(body, out);
  // best_of = n returns every candidate, which is what n does; ranking more candidates than are
  // returned is not done.
  if (auto best_of = read_int(body, "best_of", 1, kMaxChoices); best_of && *best_of != out.n)
    throw ApiError::invalid(fmt::format("'best_of' is not supported (got {} with n={}): candidates are not ranked; "
                                        "use 'n' for several completions",
                                        *best_of, out.n),
                            "best_of");
  read_stream(body, out);
  out.stop = read_stop(body, "stop");
  out.max_tokens = static_cast<int32_t>(read_int(body, "max_tokens", 1, INT32_MAX).value_or(16));
  if (auto lp = read_int(body, "logprobs", 0, kMaxTopLogprobs)) out.logprobs = static_cast<int32_t>(*lp);
  out.echo = read_bool(body, "echo").value_or(false);
  read_structured_output(body, out);
  if (out.echo && out.suffix)
    throw ApiError::invalid("'echo' cannot be combined with 'suffix'", "echo");
  read_string(body, "user");
  return out;
}

namespace {

// One item of the Responses API `input` list, appended to `messages` as chat messages.
void read_response_item(const OrderedJson& item, const std::string& path, OrderedJson& messages) {
  if (!item.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
  const std::string type = read_string(item, "type", path).value_or("message");
  if (type == "message") {
    reject_unknown_fields(item, {"type", "role", "content", "id", "status"}, path);
    std::string role = require_string(item, "role", path);
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system")
      throw ApiError::invalid(fmt::format("'{}.role' must be user, assistant, system or developer", path), path);
    const OrderedJson* content = find_field(item, "content");
    if (!content) throw ApiError::invalid(fmt::format("'{}.content' is required", path), path);
    messages.push_back({{"role", role}, {"content", read_content_text(*content, field_path(path, "content"))}});
  } else if (type == "function_call") {
    reject_unknown_fields(item, {"type", "call_id", "name", "arguments", "id", "status"}, path);
    OrderedJson call = {{"id", require_string(item, "call_id", path)},
                        {"type", "function"},
                        {"function", {{"name", require_string(item, "name", path)},
                                      {"arguments", template_arguments(require_string(item, "arguments", path))}}}};
    // Consecutive calls belong to one assistant turn.
    if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls"))
      messages.back()["tool_calls"].push_back(std::move(call));
    else messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", OrderedJson::array({call})}});
  } else if (type == "function_call_output") {
    reject_unknown_fields(item, {"type", "call_id", "output", "id", "status"}, path);
    const OrderedJson* output = find_field(item, "output");
    if (!output) throw ApiError::invalid(fmt::format("'{}.output' is required", path), path);
    messages.push_back({{"role", "tool"},
                        {"tool_call_id", require_string(item, "call_id", path)},
                        {"content", read_content_text(*output, field_path(path, "output"))}});
  } else if (type == "reasoning") {
    // Earlier reasoning items carry nothing the templates re-read; skip them.
  } else {
    throw ApiError::invalid(fmt::format("'{}.type': input item type '{}' is not supported", path, type), path);
  }
}

// `include` (what to add to the output; message.output_text.logprobs is the one a text model
// has) and `top_logprobs`: either asks for the output text's logprobs.
void read_responses_logprobs(const OrderedJson& body, ParsedRequest& out) {
  bool logprobs = false;
  if (const OrderedJson* include = find_field(body, "include")) {
    if (!include->is_array()) throw ApiError::invalid("'include' must be an array of strings", "include");
    for (size_t i = 0; i < include->size(); ++i) {
      const std::string path = index_path("include", i);
      if (!(*include)[i].is_string()) throw ApiError::invalid(fmt::format("'{}' must be a string", path), path);
      const std::string item = (*include)[i].get<std::string>();
      if (item == "message.output_text.logprobs") logprobs = true;
      else if (item != "reasoning.encrypted_content" && item != "message.input_image.image_url" &&
               item != "computer_call_output.output.image_url" && item != "file_search_call.results" &&
               item != "code_interpreter_call.outputs" && item != "web_search_call.action.sources" &&
               item != "web_search_call.results")
        throw ApiError::invalid(fmt::format("'{}': unknown include value '{}'", path, item), path);
    }
  }
  const auto top = read_int(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (logprobs || top) out.logprobs = static_cast<int32_t>(top.value_or(0));
}

}  // namespace

ParsedRequest parse_responses_request(std::string_view text) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
                               "temperature", "top_p", "stream", "store", "metadata", "user", "previous_response_id",
                               "reasoning", "text", "parallel_tool_calls", "truncation", "include", "service_tier",
                               "background", "top_logprobs", "prompt_cache_key", "safety_identifier", "seed",
                               "top_k", "min_p", "speculative", "pflash"});
  ParsedRequest out;
  out.endpoint = Endpoint::Responses;
  require_model(body, out);
  read_speculative(body, out);
  out.previous_response_id = read_string(body, "previous_response_id");
  out.store = read_bool(body, "store").value_or(true);
  read_pflash(body, out);
  if (read_bool(body, "background").value_or(false))
    throw ApiError::invalid("background responses are not supported", "background");
  out.messages = OrderedJson::array();
  out.instructions = read_string(body, "instructions").value_or("");
  if (!out.instructions.empty()) out.messages.push_back({{"role", "system"}, {"content", out.instructions}});
  const OrderedJson* input = find_field(body, "input");
  if (!input) throw ApiError::invalid("'input' is required", "input");
  if (input->is_string()) {
    out.messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
  } else if (input->is_array()) {
    if (input->empty()) throw ApiError::invalid("'input' must not be empty", "input");
    for (size_t i = 0; i < input->size(); ++i) read_response_item((*input)[i], index_path("input", i), out.messages);
  } else {
    throw ApiError::invalid("'input' must be a string or an array of input items", "input");
  }
  if (const OrderedJson* tools = find_field(body, "tools")) {
    if (!tools->is_array()) throw ApiError::invalid("'tools' must be an array", "tools");
    OrderedJson converted = OrderedJson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string path = index_path("tools", i);
      const OrderedJson& tool = (*tools)[i];
      if (!tool.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
      const std::string type = require_string(tool, "type", path);
      if (type != "function")
        throw ApiError::invalid(fmt::format("'{}': tool type '{}' is not supported (only function tools)", path, type),
                                path);
      reject_unknown_fields(tool, {"type", "name", "description", "parameters", "strict"}, path);
      OrderedJson fn = {{"name", require_string(tool, "name", path)}};
      if (auto d = read_string(tool, "description", path)) fn["description"] = *d;
      if (const OrderedJson* p = read_object(tool, "parameters", path)) fn["parameters"] = *p;
      converted.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!converted.empty()) out.tools = std::move(converted);
  }
  read_tool_choice(body, out);
  read_openai_sampling(body, out);
  out.stream = read_bool(body, "stream").value_or(false);
  if (auto m = read_int(body, "max_output_tokens", 1, INT32_MAX)) out.max_tokens = static_cast<int32_t>(*m);
  read_responses_logprobs(body, out);
  if (const OrderedJson* textcfg = read_object(body, "text")) {
    if (const OrderedJson* format = read_object(*textcfg, "format", "text")) read_text_format(*format, out);
  }
  if (const OrderedJson* reasoning = read_object(body, "reasoning")) {
    reject_unknown_fields(*reasoning, {"effort", "summary", "generate_summary"}, "reasoning");
    if (auto effort = read_string(*reasoning, "effort", "reasoning"))
      out.reasoning_effort = validate_reasoning_effort(*effort, "reasoning.effort");
  }
  return out;
}

}  // namespace tachyon::server
