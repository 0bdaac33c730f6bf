// gpt-oss harmony output. After the prompt's "<|start|>assistant" the model writes
//   <|channel|>analysis<|message|>...<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}<|call|>
//   <|start|>assistant<|channel|>final<|message|>...<|return|>
// analysis → reasoning_content, final → content, commentary with a recipient → a tool call
// (recipient "functions.NAME" gives NAME; other recipients such as "browser.search" are kept
// whole), commentary without one (a preamble) → content.
#include <algorithm>

#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat::parsers {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
const std::vector<std::string_view> kBodyEnd = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>"};

class HarmonyParser : public OutputParser {
 public:
  ParseDelta feed(std::string_view text) override {
    ParseDelta out;
    buf_.append(text);
    process(out);
    return out;
  }

  ParseDelta finish() override {
    ParseDelta out;
    process(out);
    if (state_ == State::kBody) {
      write_body(buf_, out);
      end_message(out);
    } else if (state_ == State::kHeader && !buf_.empty() && buf_.find("<|") == std::string::npos) {
      out.content += buf_;  // plain text where a header was expected: keep it
    }
    buf_.clear();
    return out;
  }

 private:
  enum class State { kHeader, kBody, kBetween };

  void process(ParseDelta& out) {
    while (true) {
      if (state_ == State::kHeader) {
        // Plain text where a header belongs (a model that skipped the format): content.
        if (!buf_.empty() && !header_started_) {
          if (buf_.rfind("<|", 0) != 0 && std::string_view("<|").substr(0, buf_.size()) != buf_) {
            channel_ = "final";
            recipient_.clear();
            state_ = State::kBody;
            continue;
          }
          header_started_ = true;
        }
        size_t at = buf_.find(kMessage);
        if (at == std::string::npos) return;
        parse_header(buf_.substr(0, at));
        buf_.erase(0, at + kMessage.size());
        state_ = State::kBody;
        body_.clear();
      } else if (state_ == State::kBody) {
        MarkerHit hit = find_marker(buf_, kBodyEnd);
        if (hit.pos == std::string::npos) {
          size_t n = safe_length(buf_, kBodyEnd);
          write_body(std::string_view(buf_).substr(0, n), out);
          buf_.erase(0, n);
          return;
        }
        write_body(std::string_view(buf_).substr(0, hit.pos), out);
        end_message(out);
        bool header_follows = hit.index >= 3;  // <|start|> or <|channel|> without an end token
        buf_.erase(0, hit.pos + (header_follows && hit.index == 4 ? 0 : kBodyEnd[hit.index].size()));
        state_ = header_follows ? State::kHeader : State::kBetween;
        header_started_ = header_follows;
      } else {
        size_t i = 0;
        while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\n')) ++i;
        std::string_view rest = std::string_view(buf_).substr(i);
        if (rest.empty()) return;
        if (rest.substr(0, kStart.size()) == kStart) {
          buf_.erase(0, i + kStart.size());
          state_ = State::kHeader;
          header_started_ = true;
          continue;
        }
        if (kStart.substr(0, rest.size()) == rest) return;
        buf_.erase(0, i);
        state_ = State::kHeader;
        header_started_ = false;
      }
    }
  }

  // "assistant<|channel|>commentary to=functions.f <|constrain|>json" (the role and
  // recipient may stand before or after the channel).
  void parse_header(const std::string& header) {
    channel_.clear();
    recipient_.clear();
    std::string h = header;
    for (std::string_view tok : {"<|constrain|>", "<|channel|>"}) {
      for (size_t at = h.find(tok); at != std::string::npos; at = h.find(tok)) {
        if (tok == kChannel) {
          h.replace(at, tok.size(), " \x01");
        } else {
          h.replace(at, tok.size(), " \x02");
        }
      }
    }
    size_t i = 0;
    bool next_is_channel = false, next_is_constraint = false;
    while (i < h.size()) {
      while (i < h.size() && h[i] == ' ') ++i;
      if (i >= h.size()) break;
      if (h[i] == '\x01' || h[i] == '\x02') {
        next_is_channel = h[i] == '\x01';
        next_is_constraint = h[i] == '\x02';
        ++i;
        continue;
      }
      size_t j = i;
      while (j < h.size() && h[j] != ' ' && h[j] != '\x01' && h[j] != '\x02') ++j;
      std::string word = h.substr(i, j - i);
      if (word.rfind("to=", 0) == 0) {
        recipient_ = word.substr(3);
      } else if (next_is_channel) {
        channel_ = word;
      }
      (void)next_is_constraint;
      next_is_channel = next_is_constraint = false;
      i = j;
    }
  }

  void write_body(std::string_view text, ParseDelta& out) {
    if (!recipient_.empty()) {
      body_.append(text);
    } else if (channel_ == "analysis") {
      out.reasoning_content.append(text);
    } else {
      out.content.append(text);
    }
  }

  void end_message(ParseDelta& out) {
    if (!recipient_.empty()) {
      std::string name = recipient_.rfind("functions.", 0) == 0 ? recipient_.substr(10) : recipient_;
      out.tool_calls.push_back(tool_call_from_text(name, body_));
    }
    body_.clear();
    recipient_.clear();
  }

  std::string buf_;
  std::string body_;
  std::string channel_;
  std::string recipient_;
  State state_ = State::kHeader;
  bool header_started_ = false;
};

}  // namespace

std::unique_ptr<OutputParser> make_harmony_parser() { return std::make_unique<HarmonyParser>(); }

}  // namespace tachyon::chat::parsers
