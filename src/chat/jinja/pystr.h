// Python str semantics over UTF-8 strings: templates index, slice, strip and split by
// code point, with Python's notion of whitespace. Invalid UTF-8 bytes count as one code
// point each, so nothing here ever throws on bad input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::chat::jinja::pystr {

std::vector<std::string_view> code_points(std::string_view s);
int64_t length(std::string_view s);
uint32_t decode_one(std::string_view cp);  // first code point of a UTF-8 sequence
void append_utf8(std::string& out, uint32_t cp);
bool is_space(uint32_t cp);  // str.isspace()

// strip/lstrip/rstrip: `chars` absent strips whitespace, otherwise any of its code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1); a sep of "" is the caller's ValueError.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit = -1);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit = -1);
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count = -1);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
int64_t count(std::string_view s, std::string_view sub);
// Index of `sub` in code points, or -1.
int64_t find(std::string_view s, std::string_view sub);
std::string repr(std::string_view s);
// Python slice semantics on a sequence of `n` elements; returns selected indices.
std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step);

}  // namespace tachyon::chat::jinja::pystr
