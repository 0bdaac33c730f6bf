#include "server/request_fields.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include <vector>

namespace tachyon::server {

namespace {

const char* type_name(const OrderedJson& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

[[noreturn]] void wrong_type(const std::string& path, const char* expected, const OrderedJson& got) {
  throw ApiError::invalid(fmt::format("'{}' must be {}, got {}", path, expected, type_name(got)), path);
}

}  // namespace

std::string field_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string index_path(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

size_t json_longest_array(std::string_view text) {
  struct Open {
    bool array;
    size_t items;
  };
  std::vector<Open> open;
  size_t longest = 0;
  bool in_string = false, escaped = false;
  auto value_starts = [&] {
    // The first value of an array counts one item; each comma after it one more.
    if (!open.empty() && open.back().array && open.back().items == 0) {
      open.back().items = 1;
      longest = std::max<size_t>(longest, 1);
    }
  };
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      value_starts();
      in_string = true;
    } else if (c == '[' || c == '{') {
      value_starts();
      open.push_back({c == '[', 0});
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',') {
      if (!open.empty() && open.back().array) longest = std::max(longest, ++open.back().items);
    } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != ':') {
      value_starts();
    }
  }
  return longest;
}

OrderedJson parse_body(std::string_view body) {
  // Everything downstream (templates, tojson, dumps) recurses over the structure; bound it
  // before anything else sees it.
  if (json_nesting_depth(body) > kMaxJsonDepth)
    throw ApiError::invalid(fmt::format("the request body nests JSON deeper than {} levels", kMaxJsonDepth));
  // Parsed JSON takes several times the bytes of its text per array item; bound the item count
  // before the parser allocates them.
  if (json_longest_array(body) > kMaxJsonArrayItems)
    throw ApiError::invalid(fmt::format("a JSON array in the request body has more than {} items", kMaxJsonArrayItems));
  OrderedJson json = OrderedJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw ApiError::invalid("the request body is not valid JSON");
  if (!json.is_object()) throw ApiError::invalid("the request body must be a JSON object");
  return json;
}

const OrderedJson* find_field(const OrderedJson& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

void reject_unknown_fields(const OrderedJson& obj, std::initializer_list<std::string_view> known,
                           const std::string& path) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == it.key();
    if (!ok) {
      const std::string name = field_path(path, it.key());
      throw ApiError::invalid(fmt::format("Unrecognized request argument supplied: {}", name), name);
    }
  }
}

std::optional<std::string> read_string(const OrderedJson& obj, std::string_view key, const std::string& path) {
  const OrderedJson* v = find_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(field_path(path, key), "a string", *v);
  return v->get<std::string>();
}

std::string require_string(const OrderedJson& obj, std::string_view key, const std::string& path) {
  auto v = read_string(obj, key, path);
  if (!v) {
    const std::string name = field_path(path, key);
    throw ApiError::invalid(fmt::format("'{}' is required", name), name);
  }
  return *v;
}

std::optional<bool> read_bool(const OrderedJson& obj, std::string_view key, const std::string& path) {
  const OrderedJson* v = find_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(field_path(path, key), "a boolean", *v);
  return v->get<bool>();
}

std::optional<double> read_number(const OrderedJson& obj, std::string_view key, double lo, double hi,
                                  const std::string& path) {
  const OrderedJson* v = find_field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(field_path(path, key), "a number", *v);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    const std::string name = field_path(path, key);
    throw ApiError::invalid(fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x), name);
  }
  return x;
}

std::optional<int64_t> read_int(const OrderedJson& obj, std::string_view key, int64_t lo, int64_t hi,
                                const std::string& path) {
  const OrderedJson* v = find_field(obj, key);
  if (!v) return std::nullopt;
  const std::string name = field_path(path, key);
  if (!v->is_number()) wrong_type(name, "an integer", *v);
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw ApiError::invalid(fmt::format("'{}' is out of range", name), name);
    x = v->get<int64_t>();
  } else {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15)
      throw ApiError::invalid(fmt::format("'{}' must be an integer, got {}", name, d), name);
    x = static_cast<int64_t>(d);
  }
  if (x < lo || x > hi)
    throw ApiError::invalid(fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x), name);
  return x;
}

const OrderedJson& require_array(const OrderedJson& obj, std::string_view key, std::string_view path) {
  const std::string name = field_path(std::string(path), key);
  const OrderedJson* v = find_field(obj, key);
  if (!v) throw ApiError::invalid(fmt::format("'{}' is required", name), name);
  if (!v->is_array()) wrong_type(name, "an array", *v);
  return *v;
}

const OrderedJson* read_object(const OrderedJson& obj, std::string_view key, const std::string& path) {
  const OrderedJson* v = find_field(obj, key);
  if (v && !v->is_object()) wrong_type(field_path(path, key), "an object", *v);
  return v;
}

OrderedJson template_arguments(const std::string& arguments) {
  OrderedJson parsed = OrderedJson::parse(arguments, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object()) return parsed;
  return arguments;
}

void read_speculative(const OrderedJson& body, ParsedRequest& out) {
  const OrderedJson* spec = read_object(body, "speculative");
  if (!spec) return;
  for (auto it = spec->begin(); it != spec->end(); ++it)
    if (it.key() != "enabled" && it.key() != "num_speculative_tokens")
      throw ApiError::invalid(fmt::format("'speculative.{}' is not a known field (enabled, num_speculative_tokens)",
                                          it.key()),
                              "speculative");
  out.speculate = read_bool(*spec, "enabled", "speculative");
  if (auto k = read_int(*spec, "num_speculative_tokens", 1, 16, "speculative"))
    out.num_speculative_tokens = static_cast<int32_t>(*k);
}

void read_pflash(const OrderedJson& body, ParsedRequest& out) {
  auto it = body.find("pflash");
  if (it == body.end() || it->is_null()) return;
  // (Parsed here: this library links no engine code.)
  const std::string mode = it->is_string() ? it->get<std::string>() : "";
  if (mode == "off") out.pflash = engine::PflashMode::Off;
  else if (mode == "auto") out.pflash = engine::PflashMode::Auto;
  else if (mode == "always") out.pflash = engine::PflashMode::Always;
  else
    throw ApiError::invalid(fmt::format("'pflash' must be \"off\", \"auto\" or \"always\", got {}", it->dump()),
                            "pflash");
}

void read_openai_sampling(const OrderedJson& body, ParsedRequest& request, const std::string& path) {
  engine::SamplingParams& out = request.sampling;
  SamplingGiven& given = request.sampling_given;
  if (auto t = read_number(body, "temperature", 0, 2, path)) {
    out.temperature = static_cast<float>(*t);
    given.temperature = true;
  }
  if (auto p = read_number(body, "top_p", 0, 1, path)) {
    if (*p <= 0) {
      const std::string name = field_path(path, "top_p");
      throw ApiError::invalid(fmt::format("'{}' must be greater than 0", name), name);
    }
    out.top_p = static_cast<float>(*p);
    given.top_p = true;
  }
  if (auto k = read_int(body, "top_k", -1, 1 << 30, path)) {
    out.top_k = *k < 0 ? 0 : static_cast<int32_t>(*k);
    given.top_k = true;
  }
  if (auto m = read_number(body, "min_p", 0, 1, path)) {
    out.min_p = static_cast<float>(*m);
    given.min_p = true;
  }
  if (auto p = read_number(body, "presence_penalty", -2, 2, path)) out.presence_penalty = static_cast<float>(*p);
  if (auto f = read_number(body, "frequency_penalty", -2, 2, path)) out.frequency_penalty = static_cast<float>(*f);
  if (auto r = read_number(body, "repetition_penalty", 0, 10, path)) {
    if (*r <= 0) {
      const std::string name = field_path(path, "repetition_penalty");
      throw ApiError::invalid(fmt::format("'{}' must be greater than 0", name), name);
    }
    out.repetition_penalty = static_cast<float>(*r);
    given.repetition_penalty = true;
  }
  if (auto s = read_int(body, "seed", INT64_MIN, INT64_MAX, path)) out.seed = static_cast<uint64_t>(*s);
  if (const OrderedJson* bias = read_object(body, "logit_bias", path)) {
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string name = fmt::format("logit_bias.{}", it.key());
      int64_t id = -1;
      const std::string& key = it.key();
      if (!key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos)
        id = std::stoll(key);
      if (id < 0) throw ApiError::invalid(fmt::format("'{}': keys of logit_bias must be token ids", name), "logit_bias");
      if (!it.value().is_number())
        throw ApiError::invalid(fmt::format("'{}' must be a number", name), "logit_bias");
      const double b = it.value().get<double>();
      if (!(b >= -100 && b <= 100))
        throw ApiError::invalid(fmt::format("'{}' must be between -100 and 100", name), "logit_bias");
      out.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
    }
  }
}

std::vector<std::string> read_stop(const OrderedJson& body, std::string_view key) {
  std::vector<std::string> stop;
  const OrderedJson* v = find_field(body, key);
  if (!v) return stop;
  const std::string name(key);
  auto check_length = [&](const std::string& s) {
    if (s.size() > kMaxStopBytes)
      throw ApiError::invalid(fmt::format("'{}': stop strings are limited to {} bytes", name, kMaxStopBytes), name);
  };
  if (v->is_string()) {
    check_length(v->get<std::string>());
    if (!v->get<std::string>().empty()) stop.push_back(v->get<std::string>());
    return stop;
  }
  if (!v->is_array()) wrong_type(name, "a string or an array of strings", *v);
  if (v->size() > kMaxStopStrings)
    throw ApiError::invalid(fmt::format("'{}' may hold at most {} strings", name, kMaxStopStrings), name);
  for (size_t i = 0; i < v->size(); ++i) {
    const OrderedJson& s = (*v)[i];
    if (!s.is_string()) wrong_type(index_path(name, i), "a string", s);
    if (s.get<std::string>().empty())
      throw ApiError::invalid(fmt::format("'{}' must not be empty", index_path(name, i)), name);
    check_length(s.get<std::string>());
    stop.push_back(s.get<std::string>());
  }
  return stop;
}

OrderedJson read_openai_tools(const OrderedJson& body) {
  const OrderedJson* v = find_field(body, "tools");
  if (!v) return OrderedJson();
  if (!v->is_array()) wrong_type("tools", "an array", *v);
  OrderedJson tools = OrderedJson::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = index_path("tools", i);
    const OrderedJson& tool = (*v)[i];
    if (!tool.is_object()) wrong_type(path, "an object", tool);
    reject_unknown_fields(tool, {"type", "function"}, path);
    if (require_string(tool, "type", path) != "function")
      throw ApiError::invalid(fmt::format("'{}.type' must be \"function\"", path), path);
    const OrderedJson* fn = read_object(tool, "function", path);
    if (!fn) throw ApiError::invalid(fmt::format("'{}.function' is required", path), path);
    const std::string fpath = field_path(path, "function");
    reject_unknown_fields(*fn, {"name", "description", "parameters", "strict"}, fpath);
    const std::string tool_name = require_string(*fn, "name", fpath);
    if (tool_name.empty()) throw ApiError::invalid(fmt::format("'{}.name' must not be empty", fpath), fpath);
    read_string(*fn, "description", fpath);
    read_object(*fn, "parameters", fpath);
    read_bool(*fn, "strict", fpath);
    tools.push_back(tool);
  }
  return tools.empty() ? OrderedJson() : tools;
}

void check_forced_tool_choice(const ParsedRequest& request) {
  if (request.tool_choice != ToolChoice::Required && request.tool_choice != ToolChoice::Named) return;
  if (!request.tools.is_array() || request.tools.empty())
    throw ApiError::invalid("a forced 'tool_choice' needs at least one tool in 'tools'", "tool_choice");
  if (request.tool_choice != ToolChoice::Named) return;
  for (const OrderedJson& tool : request.tools)
    if (tool["function"].value("name", std::string()) == request.tool_name) return;
  throw ApiError::invalid(fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", request.tool_name),
                          "tool_choice");
}

}  // namespace tachyon::server
