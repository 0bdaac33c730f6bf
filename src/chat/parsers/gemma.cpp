// Gemma function-call blocks: the model writes calls as Python in a fenced block,
//   ```tool_code\nget_weather(location="Paris")\n```
// (the convention of Google's Gemma 3 function-calling guide); the results go back as
// ```tool_output blocks in the next user turn.
#include "chat/parsers/python_call.h"
#include "chat/parsers/scanner.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kOpen = "```tool_code";
constexpr std::string_view kClose = "```";

class GemmaScanner final : public DelimitedCallScanner {
 public:
  GemmaScanner() : DelimitedCallScanner(kOpen, kClose) {}

 private:
  bool parse_calls(const std::string& code, ParseDelta& out) override {
    auto calls = parse_python_calls(code);
    if (!calls) return false;
    for (auto& c : *calls) out.tool_calls.push_back(tool_call_from_json(c.name, c.arguments));
    return true;
  }
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_gemma_scanner() { return std::make_unique<GemmaScanner>(); }

}  // namespace tachyon::chat::parsers
