#include "sampling/utf8_ranges.h"

#include <algorithm>

namespace tachyon::sampling {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out) {
  switch (utf8_length(cp)) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] within one encoded length: split until every byte position of the range's
// encodings is an independent byte range (the lower positions span their full 80-BF range
// wherever a higher position varies).
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  Utf8Sequence seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::pair<uint32_t, uint32_t>> normalize_code_point_ranges(std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto& r : ranges) r.second = std::min(r.second, kMaxCodePoint);
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (r.first > r.second) continue;
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  }
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> complement_code_point_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  uint32_t next = 0;
  for (const auto& r : ranges) {
    if (r.first > next) out.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

std::vector<Utf8Sequence> utf8_sequences(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  std::vector<Utf8Sequence> out;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    // Cut out the surrogates, then split at the encoded-length boundaries.
    std::vector<std::pair<uint32_t, uint32_t>> pieces;
    if (lo < kSurrogateLo && hi > kSurrogateHi) {
      pieces = {{lo, kSurrogateLo - 1}, {kSurrogateHi + 1, hi}};
    } else if (lo >= kSurrogateLo && hi <= kSurrogateHi) {
      continue;
    } else {
      if (lo >= kSurrogateLo && lo <= kSurrogateHi) lo = kSurrogateHi + 1;
      if (hi >= kSurrogateLo && hi <= kSurrogateHi) hi = kSurrogateLo - 1;
      if (lo > hi) continue;
      pieces = {{lo, hi}};
    }
    for (auto [a, b] : pieces) {
      for (uint32_t end : kLengthEnds) {
        if (a > b) break;
        if (a > end) continue;
        const uint32_t piece_hi = std::min(b, end);
        split(a, piece_hi, out);
        a = piece_hi + 1;
      }
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  uint8_t bytes[4];
  encode(cp, bytes);
  out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(utf8_length(cp)));
}

}  // namespace tachyon::sampling
