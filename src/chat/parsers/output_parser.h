// Output parsing: splits what a model generates into the API's fields — content,
// reasoning_content and tool calls — per model family, incrementally for streaming.
//
// Families (ParserFamily) and what they recognise:
//   kHermes      Qwen 2.5/3, Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//   kLlama3      Llama 3.x: a bare JSON call {"name": ..., "parameters": {...}} (several
//                separated by ';'), optionally after <|python_tag|>; <|python_tag|>name.call(k=v)
//                for built-in tools, other python_tag text as a "python" call {"code": ...}
//   kDeepseekV3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//                <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   kGemma       ```tool_code\nNAME(k=v, ...)\n``` function-call blocks (Python call syntax)
//   kHarmony     gpt-oss channels: analysis → reasoning, final → content, commentary to=functions.NAME
//                → tool call, other commentary → content
//   kPlain       everything is content
// Every family except kHarmony also splits <think>...</think> into reasoning_content when
// ParserOptions::reasoning is set; `starts_in_reasoning` says the prompt already opened
// <think> (templates that end the generation prompt with it), so output starts as reasoning.
//
// Streaming contract: feed() takes any split of the text (token pieces, single bytes) and
// returns only what is final: content and reasoning deltas never contain a partial tag or
// a fragment of a tool call's JSON (text that may still become a tag is held back), and a
// tool call is returned once, complete. The concatenation of all deltas and finish() is
// the same for every split of the same text. Text that looks like a tool call but does not
// parse is returned as content at the end, never dropped.
//
//   auto options = chat::detect_parser(tpl.source(), model_type);  // --parser override:
//   // options.family = chat::parser_family_from_name(flag);
//   options.starts_in_reasoning = chat::prompt_opens_reasoning(prompt);
//   auto parser = chat::make_output_parser(options);
//   for (const std::string& piece : detokenized_pieces) {
//     chat::ParseDelta d = parser->feed(piece);
//     send(d.reasoning_content, d.content, d.tool_calls);       // SSE deltas
//   }
//   chat::ParseDelta last = parser->finish();
//   // or, non-streaming: chat::ParsedMessage m = chat::parse_output(options, full_text);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace tachyon::chat {

struct ToolCall {
  std::string id;         // "call_" + 24 random alphanumerics
  std::string name;
  std::string arguments;  // a JSON object as text (OpenAI's `function.arguments`)
  Json to_json() const;   // {"id", "type": "function", "function": {"name", "arguments"}}
};

// What one feed()/finish() call made final.
struct ParseDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
  void append(ParseDelta&& other);
};

struct ParsedMessage {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  // {"content": str|null, "reasoning_content": str|null, "tool_calls": [...]} (nulls when empty).
  Json to_json() const;
};

enum class ParserFamily { kPlain, kHermes, kLlama3, kDeepseekV3, kGemma, kHarmony };

struct ParserOptions {
  ParserFamily family = ParserFamily::kPlain;
  bool reasoning = true;             // split <think>...</think>
  bool starts_in_reasoning = false;  // the prompt ends inside <think>
};

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  // Consumes the next piece of generated text; returns what is now final.
  virtual ParseDelta feed(std::string_view text) = 0;
  // End of generation: returns everything still held back. Call once, last.
  virtual ParseDelta finish() = 0;
};

std::unique_ptr<OutputParser> make_output_parser(const ParserOptions& options);
ParsedMessage parse_output(const ParserOptions& options, std::string_view text);

// Detection from the model's files: the chat template text (tool-call syntax, <think>,
// harmony tokens) and, as a fallback, config.json's model_type ("qwen3", "llama",
// "gemma3", "deepseek_v3", "gpt_oss", ...). starts_in_reasoning is a property of each
// rendered prompt: set it with prompt_opens_reasoning(prompt).
ParserOptions detect_parser(const std::string& template_source, const std::string& model_type = "");
// True when the prompt ends inside an open <think> (DeepSeek-R1 and Qwen3-thinking style
// templates end the generation prompt with "<think>\n"; Qwen3 with enable_thinking=false
// closes it again with "</think>").
bool prompt_opens_reasoning(std::string_view prompt);
// The override flag: "plain", "hermes" (alias "qwen"), "llama3", "deepseek_v3", "gemma", "harmony"
// (alias "gpt_oss"); throws Error for other names.
ParserFamily parser_family_from_name(const std::string& name);
const char* parser_family_name(ParserFamily family);

}  // namespace tachyon::chat
