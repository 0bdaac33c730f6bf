#include "tokenizer/streaming_decoder.h"

#include <algorithm>

namespace tachyon::tokenizer {

namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return {};
  std::string fresh;
  if (text.compare(0, prefix_.size(), prefix_) == 0) {
    fresh = text.substr(prefix_.size());
  } else {
    // The new ids changed how the context decodes (a ByteFallback run that turned
    // invalid): emitted text cannot be taken back, so the new ids are decoded alone.
    fresh = decode_pending();
    if (fresh.empty() || ends_with_replacement(fresh)) return {};
  }
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<long>(prefix_index_));
  prefix_ = tokenizer_.decode(ids_, skip_special_tokens_);
  prefix_index_ = new_prefix_index;
  return fresh;
}

std::string StreamingDecoder::flush() {
  const std::string text = tokenizer_.decode(ids_, skip_special_tokens_);
  std::string rest;
  if (text.compare(0, prefix_.size(), prefix_) == 0) {
    rest = text.substr(prefix_.size());
  } else {
    rest = decode_pending();
  }
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return rest;
}

std::string StreamingDecoder::decode_pending() const {
  const std::vector<int32_t> pending(ids_.begin() + static_cast<long>(prefix_index_), ids_.end());
  return tokenizer_.decode(pending, skip_special_tokens_);
}

}  // namespace tachyon::tokenizer
