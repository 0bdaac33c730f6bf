// Llama 3.x tool calls. With JSON tool calling the whole reply is the call:
// {"name": "f", "parameters": {...}} (several separated by ';'), possibly after
// <|python_tag|>. Built-in tools come as <|python_tag|>brave_search.call(query="...") and
// code for the interpreter as <|python_tag|>print(1). A reply that starts like a call is
// held until the end (it is a call only if all of it parses); any other reply streams.
#include "chat/parsers/python_call.h"
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
const std::vector<std::string_view> kEndTokens = {"<|eom_id|>", "<|eot_id|>"};

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

class Llama3Scanner : public ToolCallScanner {
 public:
  void feed(std::string_view text, ParseDelta& out) override {
    buf_.append(text);
    if (mode_ == Mode::kUndecided) {
      size_t i = 0;
      while (i < buf_.size() && is_ws(buf_[i])) ++i;
      if (i == buf_.size()) return;
      std::string_view rest = std::string_view(buf_).substr(i);
      if (rest[0] == '{' || rest[0] == '[' || rest.substr(0, kPythonTag.size()) == kPythonTag) {
        mode_ = Mode::kHeld;
      } else if (kPythonTag.substr(0, rest.size()) == rest) {
        return;  // may still become <|python_tag|>
      } else {
        mode_ = Mode::kText;
      }
    }
    if (mode_ == Mode::kText) stream_text(out);
  }

  void finish(ParseDelta& out) override {
    if (mode_ == Mode::kText) {
      stream_text(out);
      sink_.write(buf_, out);
    } else if (!buf_.empty()) {
      std::string text = strip_end_tokens(buf_);
      if (!parse_calls(text, out)) sink_.write(text, out);
    }
    buf_.clear();
    sink_.finish(out);
  }

 private:
  enum class Mode { kUndecided, kText, kHeld };

  // Plain text; a <|python_tag|> later in the reply starts a held call.
  void stream_text(ParseDelta& out) {
    std::vector<std::string_view> markers = {kPythonTag, kEndTokens[0], kEndTokens[1]};
    while (true) {
      MarkerHit hit = find_marker(buf_, markers);
      if (hit.pos == std::string::npos) break;
      sink_.write(std::string_view(buf_).substr(0, hit.pos), out);
      if (hit.index == 0) {
        buf_.erase(0, hit.pos);
        mode_ = Mode::kHeld;
        return;
      }
      buf_.erase(0, hit.pos + markers[hit.index].size());
    }
    size_t n = safe_length(buf_, markers);
    sink_.write(std::string_view(buf_).substr(0, n), out);
    buf_.erase(0, n);
  }

  static std::string strip_end_tokens(std::string text) {
    for (auto t : kEndTokens)
      for (size_t at = text.find(t); at != std::string::npos; at = text.find(t)) text.erase(at, t.size());
    return text;
  }

  bool parse_calls(const std::string& text, ParseDelta& out) {
    std::string_view body = text;
    while (!body.empty() && is_ws(body.front())) body.remove_prefix(1);
    while (!body.empty() && is_ws(body.back())) body.remove_suffix(1);
    bool tagged = body.substr(0, kPythonTag.size()) == kPythonTag;
    if (tagged) body.remove_prefix(kPythonTag.size());
    std::vector<ToolCall> calls;
    // JSON: one object, an array of objects, or objects separated by ';'.
    auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    if (!j.is_discarded() && (j.is_object() || j.is_array())) {
      auto items = j.is_array() ? j : nlohmann::ordered_json::array({j});
      for (auto& item : items) {
        auto call = item.is_object() ? tool_call_from_object_text(item.dump()) : std::nullopt;
        if (!call) return fallback(tagged, body, out);
        calls.push_back(std::move(*call));
      }
    } else {
      size_t start = 0;
      while (start <= body.size()) {
        size_t semi = body.find(';', start);
        std::string_view piece = body.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start);
        auto call = tool_call_from_object_text(piece);
        if (!call) {
          calls.clear();
          break;
        }
        calls.push_back(std::move(*call));
        if (semi == std::string_view::npos) break;
        start = semi + 1;
      }
      if (calls.empty()) return fallback(tagged, body, out);
    }
    sink_.begin_tool_call();
    for (auto& c : calls) out.tool_calls.push_back(std::move(c));
    sink_.end_tool_call();
    return true;
  }

  // <|python_tag|> without JSON: a built-in tool call (name.call(...)) or interpreter code.
  bool fallback(bool tagged, std::string_view body, ParseDelta& out) {
    if (!tagged) return false;
    sink_.begin_tool_call();
    auto calls = parse_python_calls(body);
    if (calls && calls->size() == 1 && (*calls)[0].name.size() > 5 &&
        (*calls)[0].name.compare((*calls)[0].name.size() - 5, 5, ".call") == 0) {
      auto& c = (*calls)[0];
      out.tool_calls.push_back(tool_call_from_json(c.name.substr(0, c.name.size() - 5), c.arguments));
    } else {
      out.tool_calls.push_back(tool_call_from_json("python", nlohmann::ordered_json{{"code", std::string(body)}}));
    }
    sink_.end_tool_call();
    return true;
  }

  std::string buf_;
  Mode mode_ = Mode::kUndecided;
  ContentSink sink_;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_llama3_scanner() { return std::make_unique<Llama3Scanner>(); }

}  // namespace tachyon::chat::parsers
