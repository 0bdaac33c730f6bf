// Internal building blocks of the output parsers: a tool-call scanner per family reads
// the content stream (after the <think> split) and writes content deltas and complete
// tool calls into a ParseDelta.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat/parsers/output_parser.h"

namespace tachyon::chat::parsers {

// Emits content, keeping whitespace that touches a tool call out of the content: trailing
// whitespace is held until more text follows, dropped when a tool call starts, and
// whitespace right after a tool call is skipped.
class ContentSink {
 public:
  void write(std::string_view text, ParseDelta& out);
  void begin_tool_call() { pending_ws_.clear(); }
  void end_tool_call() { after_call_ = true; }
  void finish(ParseDelta& out);

 private:
  std::string pending_ws_;
  bool after_call_ = false;
};

class ToolCallScanner {
 public:
  virtual ~ToolCallScanner() = default;
  virtual void feed(std::string_view text, ParseDelta& out) = 0;
  virtual void finish(ParseDelta& out) = 0;
};

// Tool calls written between an opening and a closing marker (Hermes' <tool_call> ... </tool_call>,
// Gemma's ```tool_code ... ```): text outside the markers streams as content, a call is released
// only once closed (or at the end of the output), and a body that parse_calls does not read as
// calls goes back to the content as written, markers included.
class DelimitedCallScanner : public ToolCallScanner {
 public:
  DelimitedCallScanner(std::string_view open, std::string_view close) : open_(open), close_(close) {}
  void feed(std::string_view text, ParseDelta& out) override;
  void finish(ParseDelta& out) override;

 protected:
  // Appends the calls `body` holds to out.tool_calls; false where it is not calls.
  virtual bool parse_calls(const std::string& body, ParseDelta& out) = 0;

 private:
  void emit(const std::string& body, bool closed, ParseDelta& out);

  std::string_view open_, close_;
  std::string buf_;
  bool inside_ = false;
  ContentSink sink_;
};

std::unique_ptr<ToolCallScanner> make_plain_scanner();
std::unique_ptr<ToolCallScanner> make_hermes_scanner();
std::unique_ptr<ToolCallScanner> make_llama3_scanner();
std::unique_ptr<ToolCallScanner> make_deepseek_v3_scanner();
std::unique_ptr<ToolCallScanner> make_gemma_scanner();
std::unique_ptr<OutputParser> make_harmony_parser();

// A tool call with `arguments` normalized to JSON text: an object becomes its compact
// dump (keys in the model's order); a string is taken as already-serialized arguments.
ToolCall tool_call_from_json(std::string name, const nlohmann::ordered_json& arguments);
// Same from text the model wrote as arguments: valid JSON is normalized as above,
// anything else is kept verbatim.
ToolCall tool_call_from_text(std::string name, std::string_view arguments);
// Parses `{"name": ..., "arguments"|"parameters": ...}`; nullopt if `text` is not that.
std::optional<ToolCall> tool_call_from_object_text(std::string_view text);

}  // namespace tachyon::chat::parsers
