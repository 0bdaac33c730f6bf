#include "chat/chat_template.h"

#include <filesystem>

#include "base/error.h"

namespace tachyon::chat {

std::string token_string(const Json& field) {
  if (field.is_string()) return field.get<std::string>();
  if (field.is_object() && field.contains("content") && field["content"].is_string())
    return field["content"].get<std::string>();
  return "";
}

ChatTemplate ChatTemplate::from_string(std::string source, std::string bos_token, std::string eos_token) {
  ChatTemplate t;
  t.default_ = std::make_shared<const jinja::Template>(source);
  t.source_ = std::move(source);
  if (!bos_token.empty()) t.special_tokens_["bos_token"] = bos_token;
  if (!eos_token.empty()) t.special_tokens_["eos_token"] = eos_token;
  return t;
}

ChatTemplate& ChatTemplate::set_special_tokens(const Json& tokens) {
  for (auto it = tokens.begin(); it != tokens.end(); ++it) {
    std::string s = token_string(it.value());
    if (!s.empty()) special_tokens_[it.key()] = s;
  }
  return *this;
}

ChatTemplate& ChatTemplate::set_tool_use_template(const std::string& source) {
  tool_use_ = std::make_shared<const jinja::Template>(source);
  return *this;
}

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path config_path = fs::is_directory(dir) ? fs::path(dir) / "tokenizer_config.json" : fs::path(dir);
  fs::path model_dir = fs::is_directory(dir) ? fs::path(dir) : config_path.parent_path();
  Json config = Json::object();
  if (fs::exists(config_path)) config = parse_json(read_file(config_path.string()), config_path.string());

  std::string source, tool_use;
  if (config.contains("chat_template")) {
    const Json& ct = config["chat_template"];
    if (ct.is_string()) {
      source = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (auto& entry : ct) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
        if (!entry["template"].is_string()) continue;
        if (entry["name"] == "default") source = entry["template"].get<std::string>();
        if (entry["name"] == "tool_use") tool_use = entry["template"].get<std::string>();
      }
      if (source.empty() && !ct.empty() && ct[0].is_object() && ct[0].contains("template") &&
          ct[0]["template"].is_string())
        source = ct[0]["template"].get<std::string>();
    }
  }
  if (source.empty() && fs::exists(model_dir / "chat_template.jinja"))
    source = read_file((model_dir / "chat_template.jinja").string());
  if (source.empty() && fs::exists(model_dir / "chat_template.json")) {
    Json j = parse_json(read_file((model_dir / "chat_template.json").string()), "chat_template.json");
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      source = j["chat_template"].get<std::string>();
  }
  if (source.empty()) throw Error("{}: no chat template (tokenizer_config.json chat_template or chat_template.jinja)", dir);

  ChatTemplate t = from_string(source);
  if (!tool_use.empty()) t.set_tool_use_template(tool_use);
  Json tokens = Json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"})
    if (config.contains(key)) tokens[key] = config[key];
  t.set_special_tokens(tokens);
  return t;
}

std::string ChatTemplate::render(const Json& messages, const Json& tools, bool add_generation_prompt,
                                 const Json& extra) const {
  return render(OrderedJson(messages), OrderedJson(tools), add_generation_prompt, OrderedJson(extra));
}

std::string ChatTemplate::render(const OrderedJson& messages, const OrderedJson& tools, bool add_generation_prompt,
                                 const OrderedJson& extra) const {
  OrderedJson context = special_tokens_;
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) context[it.key()] = it.value();
  const auto& tpl = (tool_use_ && !tools.is_null()) ? *tool_use_ : *default_;
  return tpl.render(context);
}

}  // namespace tachyon::chat
