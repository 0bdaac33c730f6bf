// OpenAI's reasoning effort (chat `reasoning_effort`, Responses `reasoning.effort`) mapped onto
// the switch the model's chat template has, if any:
//   - a template that reads `reasoning_effort` (gpt-oss: "Reasoning: low|medium|high") gets the
//     level; it cannot switch reasoning off, so "none" and "minimal" become "low";
//   - a template that reads `enable_thinking` (Qwen3 style) gets false for "none" and
//     "minimal", true for the levels;
//   - a template with neither has no switch: the effort is accepted and changes nothing.
// Variables the request set itself in chat_template_kwargs win.
#pragma once

#include <string>
#include <string_view>

#include "server/request.h"

namespace tachyon::server {

// Throws ApiError (400, naming `path`) unless `effort` is none | minimal | low | medium | high.
std::string validate_reasoning_effort(std::string_view effort, const std::string& path);

// Adds to `kwargs` the variable the template `template_source` switches reasoning with.
void apply_reasoning_effort(const std::string& template_source, const std::string& effort, OrderedJson& kwargs);

}  // namespace tachyon::server
