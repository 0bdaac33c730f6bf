#include "chat/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the Python-whitespace code point at s[i] (0 if none).
size_t space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return pystr::is_space(c) ? 1 : 0;
  size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (i + n > s.size()) return 0;
  return pystr::is_space(pystr::decode_one(s.substr(i, n))) ? n : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (size_t n = space_at(s, i)) i += n;
  return i;
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Newlines are normalized first (Jinja2 does this to the whole source), then one
    // trailing newline is dropped.
    src_.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t at = find_tag(pos);
      if (at == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      char kind = src_[at + 1];  // '{', '%' or '#'
      char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      std::string text = src_.substr(pos, at - pos);
      if (sign == '-') {
        text = pystr::strip(text, std::nullopt, false, true);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          if (l_pos < text.size() && skip_spaces(text, l_pos) == text.size()) text.resize(l_pos);
        }
      }
      emit_data(text, pos);
      size_t after = at + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(at, after, line_starting);
      } else if (kind == '%' && is_raw(after)) {
        pos = lex_raw(at, after, line_starting);
      } else {
        pos = lex_tag(at, after, kind == '%', line_starting);
      }
    }
    tokens_.push_back(Token{TokenType::kEof, "", 0, 0, line_of(src_.size()), column_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  int line_of(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    return static_cast<int>(it - line_starts_.begin());
  }
  int column_of(size_t offset) const {
    size_t start = line_starts_[static_cast<size_t>(line_of(offset) - 1)];
    return static_cast<int>(pystr::length(std::string_view(src_).substr(start, offset - start))) + 1;
  }
  [[noreturn]] void fail(const std::string& message, size_t offset) const {
    throw TemplateError(ErrorKind::kSyntax, message, line_of(offset), column_of(offset));
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_data(const std::string& text, size_t offset) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenType::kData, text, 0, 0, line_of(offset), column_of(offset)});
  }
  void emit(TokenType type, std::string text, size_t offset) {
    tokens_.push_back(Token{type, std::move(text), 0, 0, line_of(offset), column_of(offset)});
  }

  // The end of a block tag (`%}` with trim_blocks) or comment at `i`; returns the offset after
  // it (and the whitespace it eats), or npos if there is none at `i`.
  size_t match_block_end(size_t i, char close, bool& line_starting) const {
    auto at = [&](size_t k, char c) { return k < src_.size() && src_[k] == c; };
    if (at(i, '+') && at(i + 1, close) && at(i + 2, '}')) {
      line_starting = false;
      return i + 3;
    }
    if (at(i, '-') && at(i + 1, close) && at(i + 2, '}')) {
      size_t end = skip_spaces(src_, i + 3);
      line_starting = end > i + 3 && src_[end - 1] == '\n';
      return end;
    }
    if (at(i, close) && at(i + 1, '}')) {
      size_t end = i + 2;
      if (at(end, '\n')) ++end;
      line_starting = src_[end - 1] == '\n';
      return end;
    }
    return std::string::npos;
  }

  size_t lex_comment(size_t begin, size_t after, bool& line_starting) {
    for (size_t q = src_.find("#}", after); q != std::string::npos; q = src_.find("#}", q + 1)) {
      size_t start = (q > after && (src_[q - 1] == '-' || src_[q - 1] == '+')) ? q - 1 : q;
      size_t end = match_block_end(start, '#', line_starting);
      if (end != std::string::npos) return end;
    }
    fail("Missing end of comment tag", begin);
  }

  bool is_raw(size_t after) const {
    size_t i = skip_spaces(src_, after);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_spaces(src_, i + 3);
    return src_.compare(i, 2, "%}") == 0 || src_.compare(i, 3, "-%}") == 0;
  }

  size_t lex_raw(size_t begin, size_t after, bool& line_starting) {
    size_t i = skip_spaces(src_, after) + 3;
    i = skip_spaces(src_, i);
    size_t body = match_block_end(i, '%', line_starting);
    // Find `{%[-+]? endraw %}`.
    for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t k = at + 2;
      char sign = (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ? src_[k] : 0;
      if (sign) ++k;
      k = skip_spaces(src_, k);
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k = skip_spaces(src_, k + 6);
      bool starting = false;
      size_t end = match_block_end(k, '%', starting);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(body, at - body);
      if (sign == '-') {
        text = pystr::strip(text, std::nullopt, false, true);
      } else if (sign != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 && l_pos < text.size() && skip_spaces(text, l_pos) == text.size()) text.resize(l_pos);
      }
      emit_data(text, body);
      line_starting = starting;
      return end;
    }
    fail("Missing end of raw directive", begin);
  }

  size_t lex_tag(size_t begin, size_t i, bool block, bool& line_starting) {
    emit(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", begin);
    std::vector<char> balance;
    while (true) {
      if (i >= src_.size()) {
        line_starting = false;
        return i;  // the parser reports the missing end tag
      }
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (block) {
          end = match_block_end(i, '%', line_starting);
        } else if (src_.compare(i, 3, "-}}") == 0) {
          end = skip_spaces(src_, i + 3);
          line_starting = end > i + 3 && src_[end - 1] == '\n';
        } else if (src_.compare(i, 2, "}}") == 0) {
          end = i + 2;
          line_starting = false;
        }
        if (end != std::string::npos) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", i);
          return end;
        }
      }
      if (size_t n = space_at(src_, i)) {
        i += n;
        continue;
      }
      i = lex_expression_token(i, balance);
    }
  }

  size_t lex_number(size_t i) {
    // (\d+_)*\d+ digits, with optional fraction and exponent making it a float.
    auto digits = [&](size_t k) {
      size_t start = k;
      while (k < src_.size() && (is_digit(src_[k]) || (src_[k] == '_' && k > start && k + 1 < src_.size() &&
                                                      is_digit(src_[k + 1]))))
        ++k;
      return k;
    };
    size_t k = digits(i);
    bool is_float = false;
    if (k + 1 < src_.size() && src_[k] == '.' && is_digit(src_[k + 1])) {
      k = digits(k + 1);
      is_float = true;
    }
    if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
      size_t e = k + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        k = digits(e);
        is_float = true;
      }
    }
    std::string text;
    for (size_t p = i; p < k; ++p)
      if (src_[p] != '_') text += src_[p];
    Token t{is_float ? TokenType::kFloat : TokenType::kInteger, text, 0, 0, line_of(i), column_of(i)};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal too large", i);
    }
    tokens_.push_back(std::move(t));
    return k;
  }

  size_t lex_string(size_t i) {
    char quote = src_[i];
    std::string value;
    size_t k = i + 1;
    while (k < src_.size() && src_[k] != quote) {
      char c = src_[k];
      if (c != '\\') {
        value += c;
        ++k;
        continue;
      }
      if (k + 1 >= src_.size()) break;
      char e = src_[k + 1];
      k += 2;
      auto hex = [&](int n) -> bool {
        if (k + static_cast<size_t>(n) > src_.size()) return false;
        uint32_t v = 0;
        for (int d = 0; d < n; ++d) {
          char h = src_[k + static_cast<size_t>(d)];
          int x = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (x < 0) return false;
          v = v * 16 + static_cast<uint32_t>(x);
        }
        if (v > 0x10FFFF) return false;
        pystr::append_utf8(value, v);
        k += static_cast<size_t>(n);
        return true;
      };
      switch (e) {
        case '\n': break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
          if (!hex(2)) fail("invalid \\x escape in string literal", k - 2);
          break;
        case 'u':
          if (!hex(4)) fail("invalid \\u escape in string literal", k - 2);
          break;
        case 'U':
          if (!hex(8)) fail("invalid \\U escape in string literal", k - 2);
          break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int d = 0; d < 2 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++d, ++k)
              v = v * 8 + static_cast<uint32_t>(src_[k] - '0');
            pystr::append_utf8(value, v);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    if (k >= src_.size()) fail(fmt::format("unexpected char '{}'", quote), i);
    emit(TokenType::kString, std::move(value), i);
    return k + 1;
  }

  size_t lex_expression_token(size_t i, std::vector<char>& balance) {
    char c = src_[i];
    if (is_digit(c)) return lex_number(i);
    if (is_name_start(c)) {
      size_t k = i;
      while (k < src_.size() && (is_name_start(src_[k]) || is_digit(src_[k]))) ++k;
      emit(TokenType::kName, src_.substr(i, k - i), i);
      return k;
    }
    if (c == '\'' || c == '"') return lex_string(i);
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(i, 2, op) == 0) {
        emit(TokenType::kOperator, op, i);
        return i + 2;
      }
    }
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos || c == 0) {
      auto cps = pystr::code_points(std::string_view(src_).substr(i, 4));
      fail(fmt::format("unexpected char {}", pystr::repr(cps.empty() ? "" : cps[0])), i);
    }
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(fmt::format("unexpected '{}'", c), i);
      char expected = balance.back();
      balance.pop_back();
      if (expected != c) fail(fmt::format("unexpected '{}', expected '{}'", c, expected), i);
    }
    emit(TokenType::kOperator, std::string(1, c), i);
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace tachyon::chat::jinja
