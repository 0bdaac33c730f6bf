// Parsing of Ollama's POST /api/chat and /api/generate bodies (see ollama_request.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/ollama_request.h"
#include "server/request_fields.h"
#include "server/structured_output.h"

namespace tachyon::server {

namespace {

bool is_empty_list(const OrderedJson* v) { return !v || (v->is_array() && v->empty()); }

void refuse_images(const OrderedJson& obj, const std::string& path) {
  if (!is_empty_list(find_field(obj, "images"))) {
    const std::string name = field_path(path, "images");
    throw ApiError::invalid(fmt::format("'{}': images are not supported: no model this server runs reads them", name),
                            name);
  }
}

// An assistant message's tool_calls: [{"id"?, "function": {"index"?, "name", "arguments": {...}}}].
OrderedJson read_tool_calls(const OrderedJson& calls, const std::string& path) {
  if (!calls.is_array()) throw ApiError::invalid(fmt::format("'{}' must be an array", path), path);
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string cp = index_path(path, i);
    const OrderedJson& call = calls[i];
    if (!call.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", cp), cp);
    reject_unknown_fields(call, {"id", "type", "function"}, cp);
    const OrderedJson* fn = read_object(call, "function", cp);
    const std::string fp = field_path(cp, "function");
    if (!fn) throw ApiError::invalid(fmt::format("'{}' is required", fp), fp);
    reject_unknown_fields(*fn, {"index", "name", "arguments"}, fp);
    read_int(*fn, "index", 0, INT32_MAX, fp);
    OrderedJson arguments = OrderedJson::object();
    if (const OrderedJson* args = find_field(*fn, "arguments")) {
      if (args->is_object()) arguments = *args;
      else if (args->is_string()) arguments = template_arguments(args->get<std::string>());
      else throw ApiError::invalid(fmt::format("'{}.arguments' must be an object", fp), fp);
    }
    out.push_back({{"id", read_string(call, "id", cp).value_or("")},
                   {"type", "function"},
                   {"function", {{"name", require_string(*fn, "name", fp)}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

OrderedJson read_message(const OrderedJson& message, const std::string& path) {
  if (!message.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
  reject_unknown_fields(message, {"role", "content", "thinking", "images", "tool_calls", "tool_name", "tool_call_id"},
                        path);
  std::string role = require_string(message, "role", path);
  std::transform(role.begin(), role.end(), role.begin(), [](unsigned char c) { return std::tolower(c); });
  refuse_images(message, path);
  OrderedJson out = {{"role", role}, {"content", read_string(message, "content", path).value_or("")}};
  if (role == "assistant") {
    if (auto thinking = read_string(message, "thinking", path); thinking && !thinking->empty())
      out["reasoning_content"] = *thinking;
    if (const OrderedJson* calls = find_field(message, "tool_calls")) {
      OrderedJson tool_calls = read_tool_calls(*calls, field_path(path, "tool_calls"));
      if (!tool_calls.empty()) out["tool_calls"] = std::move(tool_calls);
    }
  } else if (role == "tool") {
    out["tool_call_id"] = read_string(message, "tool_call_id", path).value_or("");
    if (auto name = read_string(message, "tool_name", path)) out["name"] = *name;
  } else if (role != "system" && role != "user") {
    const std::string rpath = field_path(path, "role");
    throw ApiError::invalid(fmt::format("'{}' must be one of system, user, assistant, tool; got '{}'", rpath, role),
                            rpath);
  }
  return out;
}

// Refuses a sampler we do not implement unless it is set to its neutral value.
void refuse_unless(std::optional<double> value, double neutral, const char* key, const char* what) {
  if (value && *value != neutral)
    throw ApiError::invalid(fmt::format("'options.{}': {} is not supported (leave it out or set it to {})", key, what,
                                        neutral),
                            fmt::format("options.{}", key));
}

void read_options(const OrderedJson& body, ParsedRequest& out) {
  const OrderedJson* options = read_object(body, "options");
  if (!options) return;
  const std::string path = "options";
  reject_unknown_fields(*options,
                        {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "seed",
                         "repeat_penalty", "num_predict", "num_ctx", "stop", "mirostat", "mirostat_tau",
                         "mirostat_eta", "typical_p", "tfs_z", "repeat_last_n", "penalize_newline", "num_keep",
                         "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only",
                         "use_mmap", "use_mlock", "numa", "num_thread"},
                        path);
  read_openai_sampling(*options, out, path);
  if (auto r = read_number(*options, "repeat_penalty", 0, 10, path)) {
    if (*r <= 0) throw ApiError::invalid("'options.repeat_penalty' must be greater than 0", "options.repeat_penalty");
    out.sampling.repetition_penalty = static_cast<float>(*r);
    out.sampling_given.repetition_penalty = true;
  }
  // -1: no limit, -2: fill the context; both leave the output bounded by the context only.
  if (auto n = read_int(*options, "num_predict", -2, INT32_MAX, path)) {
    if (*n == 0)
      throw ApiError::invalid("'options.num_predict' must be at least 1, or -1 (no limit) or -2 (fill the context)",
                              "options.num_predict");
    if (*n > 0) out.max_tokens = static_cast<int32_t>(*n);
  }
  // The server's context is fixed at start-up: a smaller num_ctx bounds this request, a
  // larger one is capped to the server's (Generation), as Ollama caps it to the model's.
  if (auto n = read_int(*options, "num_ctx", 1, INT32_MAX, path)) out.max_context = static_cast<int32_t>(*n);
  out.stop = read_stop(*options, "stop");
  refuse_unless(read_number(*options, "mirostat", 0, 2, path), 0, "mirostat", "mirostat sampling");
  refuse_unless(read_number(*options, "typical_p", 0, 1, path), 1, "typical_p", "locally typical sampling");
  refuse_unless(read_number(*options, "tfs_z", 0, 1e9, path), 1, "tfs_z", "tail-free sampling");
}

// "json", or a JSON schema of an object: both enforce a JSON object (the schema's properties
// are not enforced, as with forced tool-call arguments).
void read_format(const OrderedJson& body, ParsedRequest& out) {
  const OrderedJson* format = find_field(body, "format");
  if (!format) return;
  if (format->is_string()) {
    const std::string f = format->get<std::string>();
    if (f == "json") out.json_object = true;
    else if (!f.empty())
      throw ApiError::invalid(fmt::format("'format' must be \"json\" or a JSON schema, got \"{}\"", f), "format");
  } else if (format->is_object()) {
    constrain_to_schema(*format, "format", out);  // the whole schema is enforced (structured_output.h)
  } else {
    throw ApiError::invalid("'format' must be \"json\" or a JSON schema", "format");
  }
}

// A boolean, or a level (low, medium, high, max) that also reaches templates that read
// reasoning_effort (gpt-oss).
void read_think(const OrderedJson& body, OllamaRequest& out) {
  const OrderedJson* think = find_field(body, "think");
  if (!think) return;
  if (think->is_boolean()) {
    out.think = think->get<bool>();
  } else if (think->is_string()) {
    const std::string level = think->get<std::string>();
    if (level != "low" && level != "medium" && level != "high" && level != "max")
      throw ApiError::invalid(
          fmt::format("'think' must be a boolean or one of low, medium, high, max; got '{}'", level), "think");
    out.think = true;
    out.request.template_kwargs["reasoning_effort"] = level == "max" ? "high" : level;
  } else {
    throw ApiError::invalid("'think' must be a boolean or a level (low, medium, high, max)", "think");
  }
  out.request.template_kwargs["enable_thinking"] = *out.think;
}

// keep_alive: a duration ("5m", "0s", "-1") or seconds. Zero asks for the model to unload.
bool read_keep_alive_is_zero(const OrderedJson& body) {
  const OrderedJson* v = find_field(body, "keep_alive");
  if (!v) return false;
  if (v->is_number()) return v->get<double>() == 0;
  if (!v->is_string()) throw ApiError::invalid("'keep_alive' must be a duration string or a number", "keep_alive");
  const std::string s = v->get<std::string>();
  const size_t unit = s.find_first_not_of("0.");  // zero digits, then a unit ("0s") or nothing ("0")
  if (s.empty() || unit == 0) return false;
  return unit == std::string::npos || std::isalpha(static_cast<unsigned char>(s[unit]));
}

// The fields /api/chat and /api/generate share.
OllamaRequest read_common(const OrderedJson& body, Endpoint endpoint) {
  OllamaRequest out;
  ParsedRequest& r = out.request;
  r.endpoint = endpoint;
  r.model = require_string(body, "model");
  r.stream = read_bool(body, "stream").value_or(true);
  out.unload = read_keep_alive_is_zero(body);
  read_options(body, r);
  read_format(body, r);
  read_think(body, out);
  const bool logprobs = read_bool(body, "logprobs").value_or(false);
  const auto top = read_int(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (logprobs) r.logprobs = static_cast<int32_t>(top.value_or(0));
  // The server never truncates or shifts a conversation: one over the context is a 400.
  read_bool(body, "truncate");
  read_bool(body, "shift");
  return out;
}

}  // namespace

std::string read_ollama_model_name(const OrderedJson& body) {
  if (auto model = read_string(body, "model"); model && !model->empty()) return *model;
  if (auto name = read_string(body, "name"); name && !name->empty()) return *name;
  throw ApiError::invalid("'model' is required", "model");
}

OllamaRequest parse_ollama_chat_request(std::string_view text) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "messages", "tools", "format", "options", "stream", "keep_alive", "think",
                               "truncate", "shift", "logprobs", "top_logprobs"});
  OllamaRequest out = read_common(body, Endpoint::OllamaChat);
  ParsedRequest& r = out.request;
  r.tools = read_openai_tools(body);
  const OrderedJson* messages = find_field(body, "messages");
  if (messages && !messages->is_array()) throw ApiError::invalid("'messages' must be an array", "messages");
  out.load_only = is_empty_list(messages);
  if (out.load_only) return out;
  r.messages = OrderedJson::array();
  for (size_t i = 0; i < messages->size(); ++i)
    r.messages.push_back(read_message((*messages)[i], index_path("messages", i)));
  // A final assistant message with text is continued, as Ollama does.
  const OrderedJson& last = r.messages.back();
  r.continue_final_message = last["role"] == "assistant" && !last.contains("tool_calls") &&
                             !last["content"].get<std::string>().empty();
  return out;
}

OllamaRequest parse_ollama_generate_request(std::string_view text) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "prompt", "suffix", "system", "template", "context", "stream", "raw", "format",
                               "images", "options", "keep_alive", "think", "truncate", "shift", "logprobs",
                               "top_logprobs"});
  OllamaRequest out = read_common(body, Endpoint::OllamaGenerate);
  ParsedRequest& r = out.request;
  if (auto suffix = read_string(body, "suffix"); suffix && !suffix->empty())
    throw ApiError::invalid("'suffix' is not supported: this server does not do fill-in-the-middle completions",
                            "suffix");
  if (auto tpl = read_string(body, "template"); tpl && !tpl->empty())
    throw ApiError::invalid("'template' is not supported: prompts are rendered with the checkpoint's own chat "
                            "template; send \"raw\": true with a formatted prompt instead",
                            "template");
  if (const OrderedJson* context = find_field(body, "context"); !is_empty_list(context))
    throw ApiError::invalid("'context' is not supported: send the conversation to /api/chat instead", "context");
  refuse_images(body, "");
  const std::string prompt = read_string(body, "prompt").value_or("");
  const std::string system = read_string(body, "system").value_or("");
  const bool raw = read_bool(body, "raw").value_or(false);
  out.load_only = prompt.empty();
  if (out.load_only) return out;
  if (raw) {
    r.prompt_text = prompt;
    return out;
  }
  r.messages = OrderedJson::array();
  if (!system.empty()) r.messages.push_back({{"role", "system"}, {"content", system}});
  r.messages.push_back({{"role", "user"}, {"content", prompt}});
  return out;
}

}  // namespace tachyon::server
