#include "chat/jinja/pystr.h"

#include <fmt/format.h>

#include <algorithm>

namespace tachyon::chat::jinja::pystr {

namespace {

size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Length of the well-formed UTF-8 sequence at s[i], or 1 for an invalid byte.
size_t next_length(std::string_view s, size_t i) {
  size_t n = sequence_length(static_cast<unsigned char>(s[i]));
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

bool in_chars(const std::vector<std::string_view>& set, std::string_view cp) {
  return std::find(set.begin(), set.end(), cp) != set.end();
}

}  // namespace

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = next_length(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

int64_t length(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); i += next_length(s, i)) ++n;
  return n;
}

uint32_t decode_one(std::string_view cp) {
  if (cp.empty()) return 0;
  auto c0 = static_cast<unsigned char>(cp[0]);
  size_t n = next_length(cp, 0);
  if (n == 1) return c0;
  uint32_t v = c0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) v = (v << 6) | (static_cast<unsigned char>(cp[k]) & 0x3F);
  return v;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  auto cps = code_points(s);
  std::vector<std::string_view> set;
  if (chars) set = code_points(*chars);
  auto strippable = [&](std::string_view cp) {
    return chars ? in_chars(set, cp) : is_space(decode_one(cp));
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  if (b == e) return "";
  const char* start = cps[b].data();
  const char* end = cps[e - 1].data() + cps[e - 1].size();
  return std::string(start, end);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  auto cps = code_points(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(decode_one(cps[i]))) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      // The rest, with trailing whitespace removed... Python keeps the rest as is,
      // minus leading whitespace.
      out.emplace_back(std::string(cps[i].data(), s.data() + s.size()));
      std::string& last = out.back();
      last = strip(last, std::nullopt, false, true);
      return out;
    }
    size_t j = i;
    while (j < cps.size() && !is_space(decode_one(cps[j]))) ++j;
    out.emplace_back(cps[i].data(), cps[j - 1].data() + cps[j - 1].size());
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, -1);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  auto cps = code_points(s);
  int64_t j = static_cast<int64_t>(cps.size());
  while (j > 0) {
    while (j > 0 && is_space(decode_one(cps[j - 1]))) --j;
    if (j == 0) break;
    if (static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(strip(std::string_view(s.data(), static_cast<size_t>(cps[j - 1].data() + cps[j - 1].size() - s.data())),
                             std::nullopt, true, false));
      break;
    }
    int64_t i = j;
    while (i > 0 && !is_space(decode_one(cps[i - 1]))) --i;
    out.emplace_back(cps[i].data(), cps[j - 1].data() + cps[j - 1].size());
    j = i;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every code point and at both ends.
    auto cps = code_points(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic basics.
uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}
uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}
bool is_cased(uint32_t c) { return to_upper(c) != c || to_lower(c) != c; }

template <typename F>
std::string map_cps(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (auto cp : code_points(s)) {
    uint32_t c = decode_one(cp);
    if (cp.size() == 1 && c >= 0x80) {  // invalid byte: keep as is
      out += cp;
      continue;
    }
    append_utf8(out, f(c));
  }
  return out;
}

}  // namespace

std::string upper(std::string_view s) { return map_cps(s, to_upper); }
std::string lower(std::string_view s) { return map_cps(s, to_lower); }

std::string title(std::string_view s) {
  bool prev_cased = false;
  return map_cps(s, [&](uint32_t c) {
    uint32_t r = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = is_cased(c);
    return r;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_cps(s, [&](uint32_t c) {
    uint32_t r = first ? to_upper(c) : to_lower(c);
    first = false;
    return r;
  });
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return length(s) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub) {
  size_t at = s.find(sub);
  if (at == std::string_view::npos) return -1;
  return length(s.substr(0, at));
}

std::string repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (auto cp : code_points(s)) {
    uint32_t c = decode_one(cp);
    if (cp.size() == 1 && c >= 0x80) {
      out += fmt::format("\\x{:02x}", c);
      continue;
    }
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<uint32_t>(quote)) {
          out += '\\';
          out += quote;
        } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) {
          out += fmt::format("\\x{:02x}", c);
        } else if (c == 0x2028 || c == 0x2029 || (c >= 0x200B && c <= 0x200F) || c == 0xFEFF ||
                   (c >= 0x2060 && c <= 0x2064) || (c >= 0xD800 && c <= 0xDFFF)) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += cp;
        }
    }
  }
  out += quote;
  return out;
}

std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step) {
  int64_t st = step.value_or(1);
  std::vector<int64_t> out;
  if (st == 0) return out;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    return std::clamp(x, lo, hi);
  };
  if (st > 0) {
    int64_t b = clamp(start, 0, 0, n), e = clamp(stop, n, 0, n);
    for (int64_t i = b; i < e; i += st) out.push_back(i);
  } else {
    int64_t b = clamp(start, n - 1, -1, n - 1), e = clamp(stop, -1, -1, n - 1);
    for (int64_t i = b; i > e; i += st) out.push_back(i);
  }
  return out;
}

}  // namespace tachyon::chat::jinja::pystr
