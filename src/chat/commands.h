// The chat parts of the command line, for src/cli to call:
//
//   tachyon template MODEL_OR_TOKENIZER_CONFIG --request FILE.json
//     std::cout << chat::render_request(model, read_file(request_path));   // no newline added
//   tachyon parse MODEL --text FILE [--parser NAME] [--request FILE.json]
//     std::cout << chat::parse_model_output(model, read_file(text_path), parser, request).dump(2);
//
// A request file is {"messages": [...], "tools": [...], "add_generation_prompt": bool, ...};
// every other key is an extra template variable (enable_thinking, reasoning_effort, ...).
#pragma once

#include <string>

#include "base/json.h"
#include "chat/parsers/output_parser.h"

namespace tachyon::chat {

// Renders the request with the model's chat template, exactly (key order of the request
// is kept). Throws Error for a bad request or model, jinja::TemplateError from the template.
std::string render_request(const std::string& model_or_config, const std::string& request_json);

// The parser for a model directory: detected from its chat template and config.json's
// model_type, unless `parser_override` names a family (see parser_family_from_name).
// With a request, the rendered prompt decides whether output starts inside <think>.
ParserOptions parser_options_for_model(const std::string& model_dir, const std::string& parser_override = "",
                                       const std::string& request_json = "");

// {"content", "reasoning_content", "tool_calls"} for generated text.
Json parse_model_output(const std::string& model_dir, const std::string& text,
                        const std::string& parser_override = "", const std::string& request_json = "");

}  // namespace tachyon::chat
