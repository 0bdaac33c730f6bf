// The logprobs of the tokens that wrote a reply's message text, as the Responses API reports
// them on output_text (reasoning and tool-call tokens are not part of it). Generated text
// reaches the output parser piece by piece with the logprobs of the tokens behind each piece;
// the parser may hold text back, so logprobs wait until the parser releases message text (they
// go with it) or reasoning / a tool call (they belonged to that, and are dropped).
//
//   MessageLogprobs lps(tokenizer);
//   chat::ParseDelta d = parser->feed(text);
//   std::vector<engine::TokenLogprob> mine = lps.take(d, token_logprobs);
#pragma once

#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "chat/parsers/output_parser.h"
#include "engine/request.h"
#include "tokenizer/token_bytes.h"

namespace tachyon::server {

class MessageLogprobs {
 public:
  explicit MessageLogprobs(const tokenizer::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The logprobs that go with `delta`'s content (empty when it has none), given those of the
  // text just fed: the held tokens whose bytes hold the content, found in the text they spell
  // (tokens before it wrote markup the parser dropped, such as an empty <think></think>; tokens
  // after it wait for the content the parser still holds back).
  std::vector<engine::TokenLogprob> take(const chat::ParseDelta& delta, std::span<const engine::TokenLogprob> fed) {
    held_.insert(held_.end(), fed.begin(), fed.end());
    std::vector<engine::TokenLogprob> out;
    if (delta.content.empty()) {
      if (!delta.reasoning_content.empty() || !delta.tool_calls.empty()) held_.clear();
      return out;
    }
    std::string text;
    std::vector<size_t> ends;  // where each held token's bytes end in `text`
    for (const engine::TokenLogprob& lp : held_) {
      text += tokenizer::token_byte_string(tokenizer_, lp.token);
      ends.push_back(text.size());
    }
    size_t first = 0, last = held_.size();  // [first, last): the content's tokens
    if (const size_t at = text.find(delta.content); at != std::string::npos) {
      while (first < ends.size() && ends[first] <= at) ++first;
      last = first;
      while (last < ends.size() && (last == first || ends[last - 1] < at + delta.content.size())) ++last;
    }
    out.assign(std::make_move_iterator(held_.begin() + static_cast<std::ptrdiff_t>(first)),
               std::make_move_iterator(held_.begin() + static_cast<std::ptrdiff_t>(last)));
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(last));
    return out;
  }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  std::vector<engine::TokenLogprob> held_;
};

}  // namespace tachyon::server
