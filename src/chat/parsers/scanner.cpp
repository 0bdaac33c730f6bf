#include "chat/parsers/scanner.h"

#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {
bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
}  // namespace

void ContentSink::write(std::string_view text, ParseDelta& out) {
  if (after_call_) {
    size_t i = 0;
    while (i < text.size() && is_ws(text[i])) ++i;
    text.remove_prefix(i);
    if (text.empty()) return;
    after_call_ = false;
  }
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    pending_ws_.append(text);
    return;
  }
  out.content += pending_ws_;
  pending_ws_.clear();
  out.content.append(text.substr(0, end));
  pending_ws_.append(text.substr(end));
}

void ContentSink::finish(ParseDelta& out) {
  if (!after_call_) out.content += pending_ws_;
  pending_ws_.clear();
}

void DelimitedCallScanner::feed(std::string_view text, ParseDelta& out) {
  buf_.append(text);
  while (true) {
    if (!inside_) {
      MarkerHit hit = find_marker(buf_, {open_});
      if (hit.pos == std::string::npos) {
        size_t n = safe_length(buf_, {open_});
        sink_.write(std::string_view(buf_).substr(0, n), out);
        buf_.erase(0, n);
        return;
      }
      sink_.write(std::string_view(buf_).substr(0, hit.pos), out);
      sink_.begin_tool_call();
      buf_.erase(0, hit.pos + open_.size());
      inside_ = true;
    } else {
      size_t end = buf_.find(close_);
      if (end == std::string::npos) return;  // a call is released only when complete
      emit(buf_.substr(0, end), true, out);
      buf_.erase(0, end + close_.size());
      inside_ = false;
    }
  }
}

void DelimitedCallScanner::finish(ParseDelta& out) {
  if (inside_) {
    emit(buf_, false, out);  // the model stopped before the closing marker
  } else {
    sink_.write(buf_, out);
  }
  buf_.clear();
  sink_.finish(out);
}

void DelimitedCallScanner::emit(const std::string& body, bool closed, ParseDelta& out) {
  if (parse_calls(body, out)) {
    sink_.end_tool_call();
    return;
  }
  sink_.write(std::string(open_) + body + (closed ? std::string(close_) : ""), out);
}

ToolCall tool_call_from_json(std::string name, const nlohmann::ordered_json& arguments) {
  ToolCall call;
  call.id = random_call_id();
  call.name = std::move(name);
  if (arguments.is_string()) {
    call.arguments = arguments.get<std::string>();
  } else if (arguments.is_null()) {
    call.arguments = "{}";
  } else {
    call.arguments = arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  return call;
}

ToolCall tool_call_from_text(std::string name, std::string_view arguments) {
  auto parsed = nlohmann::ordered_json::parse(arguments, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object()) return tool_call_from_json(std::move(name), parsed);
  ToolCall call;
  call.id = random_call_id();
  call.name = std::move(name);
  call.arguments = std::string(arguments);
  return call;
}

std::optional<ToolCall> tool_call_from_object_text(std::string_view text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  if (j.contains("arguments")) {
    args = j["arguments"];
  } else if (j.contains("parameters")) {
    args = j["parameters"];
  }
  if (!args.is_object() && !args.is_string()) return std::nullopt;
  return tool_call_from_json(j["name"].get<std::string>(), args);
}

}  // namespace tachyon::chat::parsers
