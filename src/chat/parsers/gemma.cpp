// Gemma function-call blocks: the model writes calls as Python in a fenced block,
//   ```tool_code\nget_weather(location="Paris")\n```
// (the convention of Google's Gemma 3 function-calling guide); the results go back as
// ```tool_output blocks in the next user turn.
#include "chat/parsers/python_call.h"
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kOpen = "```tool_code";
constexpr std::string_view kClose = "```";

class GemmaScanner : public ToolCallScanner {
 public:
  void feed(std::string_view text, ParseDelta& out) override {
    buf_.append(text);
    while (true) {
      if (!inside_) {
        MarkerHit hit = find_marker(buf_, {kOpen});
        if (hit.pos == std::string::npos) {
          size_t n = safe_length(buf_, {kOpen});
          sink_.write(std::string_view(buf_).substr(0, n), out);
          buf_.erase(0, n);
          return;
        }
        sink_.write(std::string_view(buf_).substr(0, hit.pos), out);
        sink_.begin_tool_call();
        buf_.erase(0, hit.pos + kOpen.size());
        inside_ = true;
      } else {
        size_t end = buf_.find(kClose);
        if (end == std::string::npos) return;
        emit(buf_.substr(0, end), true, out);
        buf_.erase(0, end + kClose.size());
        inside_ = false;
      }
    }
  }

  void finish(ParseDelta& out) override {
    if (inside_) {
      emit(buf_, false, out);
    } else {
      sink_.write(buf_, out);
    }
    buf_.clear();
    sink_.finish(out);
  }

 private:
  void emit(const std::string& code, bool closed, ParseDelta& out) {
    auto calls = parse_python_calls(code);
    if (calls) {
      for (auto& c : *calls) out.tool_calls.push_back(tool_call_from_json(c.name, c.arguments));
      sink_.end_tool_call();
      return;
    }
    sink_.write(std::string(kOpen) + code + (closed ? std::string(kClose) : ""), out);
  }

  std::string buf_;
  bool inside_ = false;
  ContentSink sink_;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_gemma_scanner() { return std::make_unique<GemmaScanner>(); }

}  // namespace tachyon::chat::parsers
