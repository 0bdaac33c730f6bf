// A compiled Jinja template with Hugging Face's chat-template environment
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the
// `generation` tag, transformers' tojson, raise_exception, strftime_now).
// Compile once, render many times; rendering is const and thread-safe.
//
//   jinja::Template t("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
//   std::string s = t.render({{"messages", messages_json}});
//
// Errors are jinja::TemplateError with line and column: syntax errors (and unknown
// filters/tests, as Jinja2 reports them at compile time) from the constructor, runtime
// errors and exceeded limits from render().
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/json.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"

namespace tachyon::chat::jinja {

class Template {
 public:
  explicit Template(std::string_view source, Limits limits = {});
  // `context`: a JSON object; each key becomes a template variable.
  std::string render(const OrderedJson& context) const;

 private:
  std::shared_ptr<const Body> body_;
  Limits limits_;
};

}  // namespace tachyon::chat::jinja
