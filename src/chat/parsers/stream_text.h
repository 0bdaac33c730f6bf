// Helpers for scanning a growing text buffer for markers (tags, special tokens) without
// ever releasing a prefix of a marker that the next piece of text could complete.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon::chat::parsers {

struct MarkerHit {
  size_t pos = std::string::npos;  // npos: none found
  size_t index = 0;                // which marker
};

// The earliest complete occurrence of any marker in `text` at or after `from`.
MarkerHit find_marker(std::string_view text, const std::vector<std::string_view>& markers, size_t from = 0);

// Length of the prefix of `text` that is safe to release: it excludes a trailing piece
// that is a proper prefix of some marker (and so may still become one).
size_t safe_length(std::string_view text, const std::vector<std::string_view>& markers);

// Never split a UTF-8 sequence between deltas: the length of `text` minus an incomplete
// trailing multi-byte sequence.
size_t utf8_complete_length(std::string_view text);

std::string random_call_id();

}  // namespace tachyon::chat::parsers
