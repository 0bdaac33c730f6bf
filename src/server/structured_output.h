// Structured outputs: the request fields that constrain what a model may write, compiled to
// grammars (engine/grammars.h), and the grammar Generation hands the engine.
//
// Fields (at most one per request):
//   response_format {type: json_schema, json_schema: {name, schema, strict}}   chat, completions
//   response_format {type: json_object, schema: {...}}                        (llama-server)
//   text.format {type: json_schema, name, schema, strict}                       Responses
//   json_schema: {...}, grammar: "GBNF"                                         (llama-server)
//   guided_json, guided_regex, guided_choice, guided_grammar, and
//   structured_outputs {json | regex | choice | grammar}                        (vLLM)
// Compiling happens while parsing (cached by canonical text), so an unsupported schema
// keyword or a bad grammar is a 400 naming it, before anything is queued.
//
// Tool calls: tool_choice required / named (Anthropic any / tool) force one call in the
// model's own syntax with the tool's `parameters` schema enforced on the arguments, for every
// tool-call family (hermes, llama3, deepseek_v3, gemma, harmony). Forced calls that start
// with special tokens (deepseek_v3, harmony) get those tokens written into the prompt as the
// start of the answer (ConstrainedOutput::prefix). With tool_choice auto (Anthropic auto),
// every family lets the model answer in text but holds any call it starts to the call
// syntax and its tool's schema; the special tokens of deepseek_v3's and harmony's formats
// are grammar token references (<|channel|>, sampling/cfg.h), which only the special token
// itself matches (engine/grammar_vocabulary.h gives special tokens their grammar bytes).
#pragma once

#include <memory>
#include <string>

#include "chat/parsers/output_parser.h"
#include "engine/grammars.h"
#include "server/request.h"

namespace tachyon::server {

struct OutputConstraint {
  std::string field;                       // the request field it came from
  std::shared_ptr<const engine::Cfg> cfg;  // the compiled grammar of the whole answer
};

// Reads the structured-output fields of a chat or completions body (and llama-server's /
// vLLM's extensions) into out.output_constraint / out.json_object. Throws ApiError (400).
void read_structured_output(const OrderedJson& body, ParsedRequest& out);
// Responses: text.format.
void read_text_format(const OrderedJson& format, ParsedRequest& out);
// A JSON Schema from `field` (Ollama's `format`) as the answer's constraint.
void constrain_to_schema(const OrderedJson& schema, const std::string& field, ParsedRequest& out);

struct ConstrainedOutput {
  std::shared_ptr<const engine::Grammar> grammar;  // null: the request constrains nothing
  std::string prefix;  // the answer's start, written by the server (appended to the prompt)
};

// The grammar for a request given its model's tool-call family. Throws ApiError (400).
ConstrainedOutput build_output_grammar(const ParsedRequest& request, const chat::ParserOptions& parser);

}  // namespace tachyon::server
