#include "string_generator.h"

#include <array>
#include <string_view>

#include "tokenizer/unicode.h"

namespace tachyon::tokenizer::testing {

namespace {

struct Range {
  char32_t first, last;
};

// Blocks that tokenizers treat differently: scripts with and without case, combining
// marks, CJK, emoji and symbols, exotic spaces and digits.
constexpr Range kBlocks[] = {
    {0x20, 0x7E},       {0xA0, 0xFF},       {0x100, 0x24F},     {0x250, 0x2FF},     {0x300, 0x36F},
    {0x370, 0x3FF},     {0x400, 0x4FF},     {0x530, 0x58F},     {0x590, 0x5FF},     {0x600, 0x6FF},
    {0x900, 0x97F},     {0x980, 0x9FF},     {0xE00, 0xE7F},     {0x10A0, 0x10FF},   {0x1100, 0x11FF},
    {0x1680, 0x169F},   {0x1800, 0x18AF},   {0x1AB0, 0x1AFF},   {0x1E00, 0x1EFF},   {0x2000, 0x206F},
    {0x20A0, 0x20CF},   {0x2100, 0x214F},   {0x2190, 0x21FF},   {0x2200, 0x22FF},   {0x2460, 0x24FF},
    {0x2500, 0x257F},   {0x2580, 0x259F},   {0x2600, 0x26FF},   {0x2E80, 0x2EFF},   {0x3000, 0x303F},
    {0x3040, 0x309F},   {0x30A0, 0x30FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA48F},
    {0xAC00, 0xD7A3},   {0xE000, 0xE0FF},   {0xF900, 0xFAFF},   {0xFB00, 0xFB4F},   {0xFE00, 0xFE0F},
    {0xFE30, 0xFE4F},   {0xFF00, 0xFFEF},   {0xFFF0, 0xFFFD},   {0x10000, 0x1007F}, {0x10300, 0x1034F},
    {0x11000, 0x1107F}, {0x1D400, 0x1D7FF}, {0x1F000, 0x1F02F}, {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F},
    {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2A6DF}, {0x2F800, 0x2FA1F},
    {0x30000, 0x3134F}, {0xE0000, 0xE007F}, {0xF0000, 0xF00FF}, {0x10FF00, 0x10FFFF},
};

constexpr std::string_view kWords[] = {
    "the", "The", "of", "and", "to", "in", "is", "was", "for", "that", "with", "as", "on", "HELLO", "World",
    "tokenizer", "inference", "server", "Hugging", "Face", "naïve", "café", "résumé", "über", "straße", "Ωmega",
    "привет", "мир", "你好", "世界", "こんにちは", "한국어", "مرحبا", "שלום", "नमस्ते", "สวัสดี", "Ελληνικά", "I",
    "a", "an", "A", "don", "it", "we", "they", "ſ", "K"};
constexpr std::string_view kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE",
                                              "'VE", "'M", "'LL", "'D", "’s", "’t", "n't", "'"};
constexpr std::string_view kCode[] = {
    "def ", "return ", "if ", "else:", "for i in range(10):", "#include <vector>", "int main() {", "}", "{", "(",
    ")", "[", "]", ";", "::", "->", "=>", "==", "!=", "<=", ">=", "&&", "||", "+=", "/*", "*/", "//", "#", "\"",
    "'", "`", "\\n", "\\t", "0x1F", "std::vector<int>", "self.x", "None", "null", "true", "false", "SELECT * FROM t",
    "WHERE", "<div class=\"a\">", "</div>", "$x^2$", "\\frac{a}{b}", "```python", "```", "- [ ]", "**bold**",
    "_id", "__init__", "camelCase", "snake_case", "CONSTANT", "a/b/c", "../", "https://example.com/a?b=c&d=e",
    "user@example.com", "@decorator", "%d", "{}", "[]", "();", "...", "…", "--", "—", "~/"};
constexpr std::string_view kSpaces[] = {" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "\u00A0", "\u2003", "\u3000",
                                        "\u2028", "\u2029", "\u0085", "\u000B", "\u000C", "\u180E", "\u200B",
                                        "\u202F", "\u205F", "\u1680", "\uFEFF"};
constexpr std::string_view kDigits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ".", ",", "-", "+", "e",
                                        "٠", "١", "٢", "٣", "۴", "०", "१", "२", "０", "１", "２", "½", "²",
                                        "Ⅻ", "①", "𝟘", "𝟙"};
constexpr std::string_view kOdd[] = {
    "<0x00>", "<0xFF>", "<0x0A>", "<0xE4>", "<unk>", "<s>", "</s>", "<pad>", "<mask>", "\uFFFD", "\u2581",
    "\u2581\u2581", "\u0120", "\u010A", "\u0301", "\u0308\u0301\u0327", "\u200D", "\U0001F468\u200D\U0001F469"
    "\u200D\U0001F467",
    "\U0001F44D\U0001F3FD", "\U0001F1FA\U0001F1F8", "1\uFE0F\u20E3", "\u0000", "\u0001", "\u001B[31m", "\u007F",
    "\u00AD", "\u034F", "\u061C", "\u200E", "\u202E", "\u2060", "\uFFFE", "\uFFFF", "\U0010FFFF", "e\u0301",
    "A\u030A", "\u1100\u1161\u11A8", "\u0915\u094D\u0937", "\\x00", "\\u0000", "%FF", "&amp;", "&#x1F600;", "Ġ",
    "Ċ", "ĉ", "##", "▁▁▁▁"};

}  // namespace

char32_t StringGenerator::random_code_point() {
  for (;;) {
    char32_t c;
    switch (uniform(4)) {
      case 0:
      case 1: {
        const Range& r = kBlocks[uniform(std::size(kBlocks))];
        c = r.first + static_cast<char32_t>(uniform(r.last - r.first + 1));
        break;
      }
      case 2:
        c = static_cast<char32_t>(uniform(0x10000));  // anywhere in the BMP
        break;
      default:
        c = static_cast<char32_t>(uniform(0x110000));  // anywhere, all planes
        break;
    }
    if (c >= 0xD800 && c <= 0xDFFF) continue;  // surrogates are not characters
    return c;
  }
}

void StringGenerator::append_random_unicode(std::string& out, size_t n) {
  for (size_t i = 0; i < n; ++i) unicode::append_utf8(out, random_code_point());
}

void StringGenerator::append_code(std::string& out) {
  const size_t lines = 1 + uniform(6);
  for (size_t l = 0; l < lines; ++l) {
    out.append(uniform(3) == 0 ? std::string(uniform(3), '\t') : std::string(4 * uniform(4), ' '));
    const size_t n = 1 + uniform(8);
    for (size_t k = 0; k < n; ++k) {
      out.append(kCode[uniform(std::size(kCode))]);
      if (chance(0.4)) out.push_back(' ');
    }
    out.append(chance(0.2) ? "\r\n" : "\n");
  }
}

void StringGenerator::append_whitespace(std::string& out) {
  const size_t n = chance(0.3) ? 50 + uniform(300) : 1 + uniform(20);
  const bool uniform_run = chance(0.5);
  const std::string_view one = kSpaces[uniform(std::size(kSpaces))];
  for (size_t i = 0; i < n; ++i) out.append(uniform_run ? one : kSpaces[uniform(std::size(kSpaces))]);
}

void StringGenerator::append_digits(std::string& out) {
  const size_t n = chance(0.2) ? 20 + uniform(80) : 1 + uniform(12);
  const bool ascii = chance(0.6);
  for (size_t i = 0; i < n; ++i) out.append(ascii ? kDigits[uniform(10)] : kDigits[uniform(std::size(kDigits))]);
}

void StringGenerator::append_prose(std::string& out) {
  const size_t n = 1 + uniform(12);
  for (size_t i = 0; i < n; ++i) {
    if (i) out.push_back(' ');
    out.append(kWords[uniform(std::size(kWords))]);
    if (chance(0.15)) out.append(kContractions[uniform(std::size(kContractions))]);
    if (chance(0.1)) out.push_back(",.;:!?\"()"[uniform(9)]);
  }
}

void StringGenerator::append_special(std::string& out) {
  if (specials_.empty()) return;
  const std::string& s = specials_[uniform(specials_.size())];
  switch (uniform(5)) {
    case 0: out.append(s.substr(0, uniform(s.size() + 1))); break;  // a prefix of it (may split a UTF-8 char: trimmed below)
    case 1: out.append(s).append(s); break;
    case 2: out.append(" ").append(s).append(" "); break;
    default: out.append(s); break;
  }
}

void StringGenerator::append_odd(std::string& out) { out.append(kOdd[uniform(std::size(kOdd))]); }

void StringGenerator::append_fragment(std::string& out) {
  switch (uniform(8)) {
    case 0: append_random_unicode(out, 1 + uniform(chance(0.1) ? 200 : 20)); break;
    case 1: append_code(out); break;
    case 2: append_whitespace(out); break;
    case 3: append_digits(out); break;
    case 4: append_special(out); break;
    case 5: append_odd(out); break;
    default: append_prose(out); break;
  }
}

std::string StringGenerator::next(bool* invalid_utf8) {
  std::string out;
  const size_t fragments = chance(0.05) ? 0 : 1 + uniform(chance(0.1) ? 40 : 6);
  for (size_t i = 0; i < fragments; ++i) append_fragment(out);
  // Partial special tokens may end inside a character; keep those strings valid.
  if (!unicode::is_valid_utf8(out)) out = unicode::sanitize_utf8(out);
  *invalid_utf8 = false;
  if (chance(0.03)) {  // real invalid bytes: stray continuation, truncated sequence, overlong, surrogate, 0xFF
    static constexpr std::string_view kBad[] = {"\x80", "\xBF", "\xC0\xAF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90",
                                                "\xFF", "\xFE", "\xE4\xB8", "\xF0\x9F\x98", "\xC3"};
    const size_t n = 1 + uniform(3);
    for (size_t k = 0; k < n; ++k) {
      const size_t at = out.empty() ? 0 : uniform(out.size() + 1);
      out.insert(at, kBad[uniform(std::size(kBad))]);
    }
    *invalid_utf8 = !unicode::is_valid_utf8(out);
  }
  return out;
}

}  // namespace tachyon::tokenizer::testing
