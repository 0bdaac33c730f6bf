// Byte counts as people write them on a command line: "8G", "512M", "1.5GiB", "64k",
// "1073741824". K/M/G/T (with or without "B" or "iB") are powers of 1024, as in
// llama.cpp's and vLLM's memory flags.
//
//   parse_byte_size("8G")       // 8589934592
//   parse_byte_size("lots")     // throws Error naming the text
//   format_byte_size(3 << 29)   // "1.5 GiB"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tachyon {

int64_t parse_byte_size(std::string_view text);
std::string format_byte_size(int64_t bytes);

}  // namespace tachyon
