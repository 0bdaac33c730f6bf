// A model's chat template: loads it from the checkpoint and renders OpenAI-style
// messages into the exact prompt text the model was trained on, as transformers'
// `tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
// add_generation_prompt=..., **extra)` does.
//
//   auto tpl = chat::ChatTemplate::from_model_dir("models/tachyon-demo");
//   std::string prompt = tpl.render(request["messages"], request.value("tools", Json()),
//                                   /*add_generation_prompt=*/true, {{"enable_thinking", false}});
//
// Template variables: messages, tools (None when absent or null), documents (None),
// add_generation_prompt, the special tokens of tokenizer_config.json (bos_token,
// eos_token, pad_token, unk_token, ... as strings; absent ones stay undefined), then
// `extra`, which overrides any of them. Errors are jinja::TemplateError (a tachyon::Error)
// carrying the Python exception class Jinja2 would raise, the message and the template
// line/column; `raise_exception("...")` in a template gives kind kRaised with that message,
// which a server should report as a 400 to the client.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "chat/jinja/template.h"

namespace tachyon::chat {

using jinja::TemplateError;
using OrderedJson = nlohmann::ordered_json;

class ChatTemplate {
 public:
  // Reads `dir`/tokenizer_config.json ("chat_template": a string, or a list of
  // {name, template} of which "default" is used, "tool_use" when tools are given) or,
  // if that has none, `dir`/chat_template.jinja, then `dir`/chat_template.json
  // ({"chat_template": "..."}). `dir` may also name a
  // tokenizer_config.json file directly. Throws Error if no template is found.
  static ChatTemplate from_model_dir(const std::string& dir);
  static ChatTemplate from_string(std::string source, std::string bos_token = "", std::string eos_token = "");
  // Special tokens passed as template variables (name → string), e.g. {"pad_token": "<pad>"}.
  ChatTemplate& set_special_tokens(const Json& tokens);
  // The template used when tools are given (tokenizer_config.json's "tool_use" entry, or a GGUF
  // file's tokenizer.chat_template.tool_use).
  ChatTemplate& set_tool_use_template(const std::string& source);

  // With tachyon::Json (keys sorted) every object renders with sorted keys, which
  // changes what `tojson` prints for tool schemas; parse request bodies as OrderedJson
  // (nlohmann::ordered_json) and use the second overload to keep the client's key order,
  // as transformers does.
  std::string render(const Json& messages, const Json& tools, bool add_generation_prompt,
                     const Json& extra = Json::object()) const;
  std::string render(const OrderedJson& messages, const OrderedJson& tools, bool add_generation_prompt,
                     const OrderedJson& extra = OrderedJson::object()) const;

  // The template source used when no tools are given (for family detection).
  const std::string& source() const { return source_; }
  const OrderedJson& special_tokens() const { return special_tokens_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> default_;
  std::shared_ptr<const jinja::Template> tool_use_;  // null: use default_
  OrderedJson special_tokens_ = OrderedJson::object();
};

// A token field of tokenizer_config.json as a string: "<s>" or {"content": "<s>", ...}.
std::string token_string(const Json& field);

}  // namespace tachyon::chat
