// Fuzz target for the template lexer, parser and interpreter: the input is a template,
// rendered against a fixed conversation under small limits. Any TemplateError is a valid
// outcome; a crash, hang, sanitizer report or other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/jinja/template.h"

namespace {

const tachyon::chat::jinja::OrderedJson& context() {
  static const auto* ctx = new tachyon::chat::jinja::OrderedJson(tachyon::chat::jinja::OrderedJson::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Héllo 東京"},
                 {"role": "assistant", "content": null, "reasoning_content": "think",
                  "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5]}}}]},
                 {"role": "tool", "content": "{\"ok\": true}"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})"));
  return *ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon::chat::jinja;
  Limits limits;
  limits.max_loop_iterations = 20000;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 32;
  limits.max_render_ms = 1000;  // slow inputs end as errors, not as libFuzzer timeouts
  try {
    Template tpl(std::string(reinterpret_cast<const char*>(data), size), limits);
    std::string out = tpl.render(context());
    (void)out;
  } catch (const TemplateError&) {
  }
  return 0;
}
