// Qwen / Hermes tool calls: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>.
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesScanner final : public DelimitedCallScanner {
 public:
  HermesScanner() : DelimitedCallScanner(kOpen, kClose) {}

 private:
  bool parse_calls(const std::string& body, ParseDelta& out) override {
    auto call = tool_call_from_object_text(body);
    if (!call) return false;
    out.tool_calls.push_back(std::move(*call));
    return true;
  }
};

class PlainScanner : public ToolCallScanner {
 public:
  void feed(std::string_view text, ParseDelta& out) override {
    buf_.append(text);
    size_t n = utf8_complete_length(buf_);
    out.content.append(buf_, 0, n);
    buf_.erase(0, n);
  }
  void finish(ParseDelta& out) override {
    out.content += buf_;
    buf_.clear();
  }

 private:
  std::string buf_;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_hermes_scanner() { return std::make_unique<HermesScanner>(); }
std::unique_ptr<ToolCallScanner> make_plain_scanner() { return std::make_unique<PlainScanner>(); }

}  // namespace tachyon::chat::parsers
