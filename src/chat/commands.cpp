#include "chat/commands.h"

#include <filesystem>
#include <optional>

#include "base/error.h"
#include "chat/chat_template.h"

namespace tachyon::chat {

namespace {

struct Request {
  OrderedJson messages;
  OrderedJson tools;
  bool add_generation_prompt = false;
  OrderedJson extra = OrderedJson::object();
};

Request read_request(const std::string& text) {
  auto j = OrderedJson::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("request: expected a JSON object");
  if (!j.contains("messages") || !j["messages"].is_array()) throw Error("request: \"messages\" must be an array");
  Request r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "messages") {
      r.messages = it.value();
    } else if (it.key() == "tools") {
      if (!it.value().is_null() && !it.value().is_array()) throw Error("request: \"tools\" must be an array or null");
      r.tools = it.value();
    } else if (it.key() == "add_generation_prompt") {
      if (!it.value().is_boolean()) throw Error("request: \"add_generation_prompt\" must be a boolean");
      r.add_generation_prompt = it.value().get<bool>();
    } else {
      r.extra[it.key()] = it.value();
    }
  }
  return r;
}

std::string model_type_of(const std::string& model_dir) {
  auto path = std::filesystem::path(model_dir) / "config.json";
  if (!std::filesystem::exists(path)) return "";
  Json config = parse_json(read_file(path.string()), path.string());
  return config.value("model_type", "");
}

}  // namespace

std::string render_request(const std::string& model_or_config, const std::string& request_json) {
  Request r = read_request(request_json);
  return ChatTemplate::from_model_dir(model_or_config).render(r.messages, r.tools, r.add_generation_prompt, r.extra);
}

ParserOptions parser_options_for_model(const std::string& model_dir, const std::string& parser_override,
                                       const std::string& request_json) {
  std::string source;
  std::optional<ChatTemplate> tpl;
  try {
    tpl = ChatTemplate::from_model_dir(model_dir);
    source = tpl->source();
  } catch (const TemplateError&) {
    throw;
  } catch (const Error&) {
    // no template: detection falls back to model_type
  }
  std::string dir = std::filesystem::is_directory(model_dir) ? model_dir
                                                             : std::filesystem::path(model_dir).parent_path().string();
  ParserOptions options = detect_parser(source, model_type_of(dir));
  if (!parser_override.empty()) {
    options.family = parser_family_from_name(parser_override);
    options.reasoning = options.family != ParserFamily::kHarmony;
  }
  if (!request_json.empty() && tpl) {
    Request r = read_request(request_json);
    options.starts_in_reasoning =
        options.reasoning && prompt_opens_reasoning(tpl->render(r.messages, r.tools, r.add_generation_prompt, r.extra));
  }
  return options;
}

Json parse_model_output(const std::string& model_dir, const std::string& text, const std::string& parser_override,
                        const std::string& request_json) {
  return parse_output(parser_options_for_model(model_dir, parser_override, request_json), text).to_json();
}

}  // namespace tachyon::chat
