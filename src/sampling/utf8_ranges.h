// Unicode code point ranges as UTF-8 byte sequences: what a grammar over bytes needs to
// match a character class over code points. [U+0080, U+07FF] is the one sequence
// [C2-DF][80-BF]; [U+0000, U+10FFFF] less the surrogates is nine sequences. Surrogates
// (U+D800..U+DFFF) are never produced: they are not valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tachyon::sampling {

using ByteRange = std::pair<uint8_t, uint8_t>;  // inclusive
using Utf8Sequence = std::vector<ByteRange>;    // one range per byte position

// Sorted, disjoint, non-adjacent ranges covering the same code points as `ranges` (each
// inclusive, clamped to U+10FFFF).
std::vector<std::pair<uint32_t, uint32_t>> normalize_code_point_ranges(std::vector<std::pair<uint32_t, uint32_t>> ranges);

// The complement of normalized `ranges` within [0, U+10FFFF].
std::vector<std::pair<uint32_t, uint32_t>> complement_code_point_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

// Byte sequences matching exactly the UTF-8 encodings of the code points in `ranges`.
std::vector<Utf8Sequence> utf8_sequences(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

// Appends the UTF-8 encoding of `cp` (at most U+10FFFF).
void append_utf8(uint32_t cp, std::string& out);

}  // namespace tachyon::sampling
