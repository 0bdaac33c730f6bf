// DeepSeek V3 tool calls, in special tokens:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
//   ...<｜tool▁calls▁end｜>
// and the V3.1 variant <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>.
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\r' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<ToolCall> parse_call(std::string_view body) {
  size_t sep = body.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view head = trim(body.substr(0, sep));
  std::string_view rest = body.substr(sep + kSep.size());
  std::string name;
  std::string_view args;
  if (head == "function") {
    size_t nl = rest.find('\n');
    name = std::string(trim(rest.substr(0, nl)));
    args = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    args = trim(args);
    if (args.substr(0, 7) == "```json") args.remove_prefix(7);
    else if (args.substr(0, 3) == "```") args.remove_prefix(3);
    args = trim(args);
    if (args.size() >= 3 && args.substr(args.size() - 3) == "```") args.remove_suffix(3);
    args = trim(args);
  } else {
    name = std::string(head);
    args = trim(rest);
  }
  if (name.empty()) return std::nullopt;
  auto j = nlohmann::ordered_json::parse(args, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return tool_call_from_json(std::move(name), j);
}

class DeepseekV3Scanner : public ToolCallScanner {
 public:
  void feed(std::string_view text, ParseDelta& out) override {
    buf_.append(text);
    while (true) {
      if (!in_section_) {
        std::vector<std::string_view> markers = {kCallsBegin, kCallBegin, kEos};
        MarkerHit hit = find_marker(buf_, markers);
        if (hit.pos == std::string::npos) {
          size_t n = safe_length(buf_, markers);
          sink_.write(std::string_view(buf_).substr(0, n), out);
          buf_.erase(0, n);
          return;
        }
        sink_.write(std::string_view(buf_).substr(0, hit.pos), out);
        if (hit.index == 2) {
          buf_.erase(0, hit.pos + kEos.size());
          continue;
        }
        sink_.begin_tool_call();
        in_section_ = true;
        buf_.erase(0, hit.pos + (hit.index == 0 ? kCallsBegin.size() : 0));
      } else {
        // Inside the section: whole calls, then the section end.
        size_t i = 0;
        while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\n')) ++i;
        std::string_view rest = std::string_view(buf_).substr(i);
        if (rest.substr(0, kCallsEnd.size()) == kCallsEnd) {
          buf_.erase(0, i + kCallsEnd.size());
          in_section_ = false;
          sink_.end_tool_call();
          continue;
        }
        if (rest.substr(0, kCallBegin.size()) == kCallBegin) {
          size_t end = buf_.find(kCallEnd, i);
          if (end == std::string::npos) return;
          std::string body = buf_.substr(i + kCallBegin.size(), end - i - kCallBegin.size());
          if (auto call = parse_call(body)) {
            out.tool_calls.push_back(std::move(*call));
          } else {
            sink_.write(std::string(kCallBegin) + body + std::string(kCallEnd), out);
          }
          buf_.erase(0, end + kCallEnd.size());
          continue;
        }
        if (kCallsEnd.substr(0, rest.size()) == rest || kCallBegin.substr(0, rest.size()) == rest) return;
        // Something else inside the section: leave it and treat the rest as content.
        in_section_ = false;
        sink_.end_tool_call();
      }
    }
  }

  void finish(ParseDelta& out) override {
    if (in_section_) {
      size_t i = buf_.find(kCallBegin);
      if (i != std::string::npos) {
        if (auto call = parse_call(std::string_view(buf_).substr(i + kCallBegin.size()))) {
          out.tool_calls.push_back(std::move(*call));
          buf_.clear();
        }
      }
      sink_.end_tool_call();
    }
    sink_.write(buf_, out);
    buf_.clear();
    sink_.finish(out);
  }

 private:
  std::string buf_;
  bool in_section_ = false;
  ContentSink sink_;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_deepseek_v3_scanner() { return std::make_unique<DeepseekV3Scanner>(); }

}  // namespace tachyon::chat::parsers
