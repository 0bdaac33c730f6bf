#include "tokenizer/token_bytes.h"

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kMetaspace = "\xE2\x96\x81";    // U+2581, SentencePiece's space

// The piece's characters mapped back through the GPT-2 byte-level alphabet; false when one
// is outside it (the token is not byte-level).
bool byte_level_bytes(const std::string& piece, std::string& out) {
  const auto& alphabet = unicode::byte_level_alphabet();
  out.clear();
  for (size_t i = 0; i < piece.size();) {
    size_t len = 0;
    const char32_t c = unicode::decode_at(piece, i, &len);
    const int b = c < 512 ? alphabet.char_to_byte[c] : -1;
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string token_byte_string(const Tokenizer& tokenizer, int32_t id) {
  if (tokenizer.is_special(id)) return {};
  std::string piece;
  try {
    piece = tokenizer.id_to_token(id);
  } catch (const Error&) {
    return {};
  }
  const std::string text = tokenizer.decode(std::span<const int32_t>(&id, 1), false);
  if (text.find(kReplacement) == std::string::npos) {
    // Metaspace strips the space of a sequence's first token only.
    return piece.starts_with(kMetaspace) && !text.starts_with(' ') ? " " + text : text;
  }
  // Part of a character: byte-level pieces map back to their bytes, <0xNN> to its byte.
  std::string bytes;
  if (byte_level_bytes(piece, bytes)) return bytes;
  if (piece.size() == 6 && piece.starts_with("<0x") && piece[5] == '>' && hex_value(piece[3]) >= 0 &&
      hex_value(piece[4]) >= 0)
    return std::string(1, static_cast<char>(hex_value(piece[3]) * 16 + hex_value(piece[4])));
  return text;  // a real U+FFFD in the token's text
}

std::vector<std::string> token_byte_strings(const Tokenizer& tokenizer) {
  std::vector<std::string> out(tokenizer.vocab_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = token_byte_string(tokenizer, static_cast<int32_t>(i));
  return out;
}

}  // namespace tachyon::tokenizer
