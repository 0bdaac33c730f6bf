// Composition of the output parsers: a <think> splitter in front of a family's tool-call
// scanner (harmony has its own channel parser), plus family detection.
#include "chat/parsers/output_parser.h"

#include "base/error.h"
#include "chat/parsers/scanner.h"
#include "chat/parsers/stream_text.h"

namespace tachyon::chat {

using parsers::find_marker;
using parsers::safe_length;

Json ToolCall::to_json() const {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

void ParseDelta::append(ParseDelta&& other) {
  content += other.content;
  reasoning_content += other.reasoning_content;
  for (auto& c : other.tool_calls) tool_calls.push_back(std::move(c));
}

Json ParsedMessage::to_json() const {
  Json calls = Json::array();
  for (auto& c : tool_calls) calls.push_back(c.to_json());
  return {{"content", content.empty() ? Json() : Json(content)},
          {"reasoning_content", reasoning_content.empty() ? Json() : Json(reasoning_content)},
          {"tool_calls", calls}};
}

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// <think>reasoning</think>content, with the newlines that templates put around the tags
// removed (reasoning loses its leading and trailing newlines, content its leading ones,
// as the Qwen3 template strips them when it renders history).
class ReasoningParser : public OutputParser {
 public:
  ReasoningParser(const ParserOptions& options, std::unique_ptr<parsers::ToolCallScanner> scanner)
      : split_(options.reasoning), scanner_(std::move(scanner)) {
    if (split_ && options.starts_in_reasoning) state_ = State::kReasoning;
  }

  ParseDelta feed(std::string_view text) override {
    ParseDelta out;
    buf_.append(text);
    process(out, false);
    return out;
  }

  ParseDelta finish() override {
    ParseDelta out;
    process(out, true);
    if (state_ == State::kReasoning) {
      out.reasoning_content += buf_;  // unterminated reasoning: keep it, minus held newlines
      buf_.clear();
    } else if (!buf_.empty()) {
      scanner_->feed(buf_, out);
      buf_.clear();
    }
    scanner_->finish(out);
    return out;
  }

 private:
  enum class State { kStart, kReasoning, kContentStart, kContent };

  void process(ParseDelta& out, bool final) {
    while (true) {
      switch (state_) {
        case State::kStart: {
          if (!split_) {
            state_ = State::kContent;
            continue;
          }
          size_t i = buf_.find_first_not_of(" \n\r\t");
          if (i == std::string::npos) {
            if (!final) return;
            state_ = State::kContent;
            continue;
          }
          std::string_view rest = std::string_view(buf_).substr(i);
          if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
            buf_.erase(0, i + kThinkOpen.size());
            state_ = State::kReasoning;
            reasoning_started_ = false;
            continue;
          }
          if (!final && kThinkOpen.substr(0, rest.size()) == rest) return;
          state_ = State::kContent;
          continue;
        }
        case State::kReasoning: {
          if (!reasoning_started_) {
            size_t i = buf_.find_first_not_of('\n');
            buf_.erase(0, i == std::string::npos ? buf_.size() : i);
            if (buf_.empty()) return;
            reasoning_started_ = true;
          }
          MarkerHit hit = find_marker(buf_, {kThinkClose});
          if (hit.pos != std::string::npos) {
            std::string_view r = std::string_view(buf_).substr(0, hit.pos);
            while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
            out.reasoning_content.append(r);
            buf_.erase(0, hit.pos + kThinkClose.size());
            state_ = State::kContentStart;
            continue;
          }
          size_t n = safe_length(buf_, {kThinkClose});
          while (n > 0 && buf_[n - 1] == '\n') --n;  // trailing newlines wait for what follows
          out.reasoning_content.append(buf_, 0, n);
          buf_.erase(0, n);
          if (final) {
            size_t i = buf_.find_first_not_of('\n');
            if (i == std::string::npos) buf_.clear();
          }
          return;
        }
        case State::kContentStart: {
          size_t i = buf_.find_first_not_of('\n');
          if (i == std::string::npos) {
            buf_.clear();
            return;
          }
          buf_.erase(0, i);
          state_ = State::kContent;
          continue;
        }
        case State::kContent:
          if (!buf_.empty()) scanner_->feed(buf_, out);
          buf_.clear();
          return;
      }
    }
  }

  using MarkerHit = parsers::MarkerHit;
  bool split_;
  bool reasoning_started_ = false;
  State state_ = State::kStart;
  std::string buf_;
  std::unique_ptr<parsers::ToolCallScanner> scanner_;
};

}  // namespace

std::unique_ptr<OutputParser> make_output_parser(const ParserOptions& options) {
  switch (options.family) {
    case ParserFamily::kHarmony: return parsers::make_harmony_parser();
    case ParserFamily::kHermes: return std::make_unique<ReasoningParser>(options, parsers::make_hermes_scanner());
    case ParserFamily::kLlama3: return std::make_unique<ReasoningParser>(options, parsers::make_llama3_scanner());
    case ParserFamily::kDeepseekV3:
      return std::make_unique<ReasoningParser>(options, parsers::make_deepseek_v3_scanner());
    case ParserFamily::kGemma: return std::make_unique<ReasoningParser>(options, parsers::make_gemma_scanner());
    case ParserFamily::kPlain: break;
  }
  return std::make_unique<ReasoningParser>(options, parsers::make_plain_scanner());
}

ParsedMessage parse_output(const ParserOptions& options, std::string_view text) {
  auto parser = make_output_parser(options);
  ParseDelta all = parser->feed(text);
  all.append(parser->finish());
  return ParsedMessage{std::move(all.content), std::move(all.reasoning_content), std::move(all.tool_calls)};
}

ParserOptions detect_parser(const std::string& source, const std::string& model_type) {
  ParserOptions o;
  auto has = [&](std::string_view s) { return source.find(s) != std::string::npos; };
  if (has("<|channel|>") || has("<|start|>assistant")) {
    o.family = ParserFamily::kHarmony;
  } else if (has("<tool_call>")) {
    o.family = ParserFamily::kHermes;
  } else if (has("tool▁calls▁begin") || has("tool▁call▁begin")) {
    o.family = ParserFamily::kDeepseekV3;
  } else if (has("<|python_tag|>") || has("<|start_header_id|>")) {
    o.family = ParserFamily::kLlama3;
  } else if (has("tool_code") || has("<start_of_turn>")) {
    o.family = ParserFamily::kGemma;
  } else if (model_type == "gpt_oss") {
    o.family = ParserFamily::kHarmony;
  } else if (model_type.rfind("qwen", 0) == 0) {
    o.family = ParserFamily::kHermes;
  } else if (model_type.rfind("deepseek", 0) == 0) {
    o.family = ParserFamily::kDeepseekV3;
  } else if (model_type.rfind("llama", 0) == 0) {
    o.family = ParserFamily::kLlama3;
  } else if (model_type.rfind("gemma", 0) == 0) {
    o.family = ParserFamily::kGemma;
  }
  o.reasoning = o.family != ParserFamily::kHarmony;
  return o;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ParserFamily parser_family_from_name(const std::string& name) {
  if (name == "plain" || name == "none") return ParserFamily::kPlain;
  if (name == "hermes" || name == "qwen" || name == "qwen3") return ParserFamily::kHermes;
  if (name == "llama3" || name == "llama3_json" || name == "llama") return ParserFamily::kLlama3;
  if (name == "deepseek_v3" || name == "deepseek") return ParserFamily::kDeepseekV3;
  if (name == "gemma" || name == "gemma3") return ParserFamily::kGemma;
  if (name == "harmony" || name == "gpt_oss" || name == "openai") return ParserFamily::kHarmony;
  throw Error("unknown output parser '{}' (plain, hermes, llama3, deepseek_v3, gemma, harmony)", name);
}

const char* parser_family_name(ParserFamily family) {
  switch (family) {
    case ParserFamily::kPlain: return "plain";
    case ParserFamily::kHermes: return "hermes";
    case ParserFamily::kLlama3: return "llama3";
    case ParserFamily::kDeepseekV3: return "deepseek_v3";
    case ParserFamily::kGemma: return "gemma";
    case ParserFamily::kHarmony: return "harmony";
  }
  return "plain";
}

}  // namespace tachyon::chat
