// Qwen / Hermes tool calls: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>.
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesScanner : public ToolCallScanner {
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
        if (end == std::string::npos) return;  // a call is released only when complete
        emit_call(buf_.substr(0, end), true, out);
        buf_.erase(0, end + kClose.size());
        inside_ = false;
      }
    }
  }

  void finish(ParseDelta& out) override {
    if (inside_) {
      emit_call(buf_, false, out);  // the model stopped before </tool_call>
    } else {
      sink_.write(buf_, out);
    }
    buf_.clear();
    sink_.finish(out);
  }

 private:
  void emit_call(const std::string& body, bool closed, ParseDelta& out) {
    if (auto call = tool_call_from_object_text(body)) {
      out.tool_calls.push_back(std::move(*call));
      sink_.end_tool_call();
      return;
    }
    std::string raw = std::string(kOpen) + body + (closed ? std::string(kClose) : "");
    sink_.write(raw, out);
  }

  std::string buf_;
  bool inside_ = false;
  ContentSink sink_;
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
