// UTF-8 and Unicode character helpers for the tokenizer pipeline.
//
// Everything here works on valid UTF-8 except `sanitize_utf8`, which is how invalid input
// becomes valid: each maximal invalid subsequence turns into one U+FFFD, exactly as Rust's
// `String::from_utf8_lossy`, Python's `bytes.decode(errors="replace")` and the WHATWG
// decoder (Node's `Buffer.toString`) do it.
//
// Character classes follow Rust's `char` methods, which is what Hugging Face `tokenizers`
// calls: `is_whitespace` is the Unicode White_Space property, `is_numeric` is Nd|Nl|No.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tachyon::tokenizer::unicode {

// Decodes the code point starting at s[i] of valid UTF-8 and sets *len to its length. Token
// texts can hold raw bytes (byte-fallback pieces, GGUF vocabularies): a sequence cut off by the
// end of `s` is never read past it but decodes as U+FFFD of length 1 (found by the
// tokenizer_gguf_vocab_fuzz target: StripDecoder over a token ending in a lead byte).
inline char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (i + (b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4) > s.size()) {
    *len = 1;
    return 0xFFFD;
  }
  if (b0 < 0xE0) {
    *len = 2;
    return (char32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
  }
  if (b0 < 0xF0) {
    *len = 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
           (static_cast<unsigned char>(s[i + 2]) & 0x3F);
  }
  *len = 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
         (char32_t(static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
         (static_cast<unsigned char>(s[i + 3]) & 0x3F);
}

// Length of the UTF-8 sequence that starts with byte b (valid input assumed).
inline size_t sequence_length(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// Start of the last code point of non-empty valid UTF-8 `s`.
inline size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view bytes);
// Valid UTF-8 where each maximal invalid subsequence of `bytes` is replaced by U+FFFD.
std::string sanitize_utf8(std::string_view bytes);

bool is_whitespace(char32_t c);     // White_Space (Rust char::is_whitespace)
bool is_numeric(char32_t c);        // general category Nd, Nl or No (Rust char::is_numeric)
bool is_alphanumeric(char32_t c);   // letters, marks of letters, numerics (Rust char::is_alphanumeric)
bool is_punctuation(char32_t c);    // general category P* (Pc Pd Ps Pe Pi Pf Po)
bool is_nonspacing_mark(char32_t c);  // general category Mn
bool is_mark(char32_t c);             // general category M (Mn Mc Me)
bool is_word_category(char32_t c);    // L*, M*, Nd, Nl or Pc

// Appends the lowercase of c as Rust's char::to_lowercase does (full mapping: U+0130 gives
// two code points).
void append_lowercase(std::string& out, char32_t c);

// GPT-2's byte <-> printable character alphabet used by ByteLevel pre-tokenizer/decoder.
struct ByteLevelAlphabet {
  std::string byte_to_utf8[256];  // each one code point, 1 or 2 bytes of UTF-8
  int16_t char_to_byte[512];      // code point (all < 512) -> byte, or -1
};
const ByteLevelAlphabet& byte_level_alphabet();

}  // namespace tachyon::tokenizer::unicode
