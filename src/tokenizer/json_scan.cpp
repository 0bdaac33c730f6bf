#include "tokenizer/json_scan.h"

#include <cstring>

#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  size_t pos() const { return p_; }
  void skip_ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\r' || s_[p_] == '\t')) ++p_;
  }
  bool eat(char c) {
    skip_ws();
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skip_ws();
    return p_ < s_.size() && s_[p_] == c;
  }
  // Decodes a JSON string (the opening quote is next).
  bool string(std::string& out) {
    out.clear();
    if (!eat('"')) return false;
    for (;;) {
      const char* start = s_.data() + p_;
      const char* q = static_cast<const char*>(std::memchr(start, '"', s_.size() - p_));
      if (!q) return false;
      const char* b = static_cast<const char*>(std::memchr(start, '\\', static_cast<size_t>(q - start)));
      if (!b) {
        out.append(start, static_cast<size_t>(q - start));
        p_ = static_cast<size_t>(q - s_.data()) + 1;
        return true;
      }
      out.append(start, static_cast<size_t>(b - start));
      p_ = static_cast<size_t>(b - s_.data()) + 1;
      if (p_ >= s_.size()) return false;
      const char e = s_[p_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (p_ + 1 >= s_.size() || s_[p_] != '\\' || s_[p_ + 1] != 'u') return false;
            p_ += 2;
            if (!hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          unicode::append_utf8(out, cp);
          break;
        }
        default:
          return false;
      }
    }
  }
  bool integer(int64_t* v) {
    skip_ws();
    size_t start = p_;
    while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
    if (p_ == start || p_ - start > 10) return false;
    if (p_ < s_.size() && (s_[p_] == '.' || s_[p_] == 'e' || s_[p_] == 'E')) return false;
    int64_t n = 0;
    for (size_t i = start; i < p_; ++i) n = n * 10 + (s_[i] - '0');
    *v = n;
    return true;
  }
  // Skips any JSON value.
  bool skip_value() {
    skip_ws();
    if (p_ >= s_.size()) return false;
    const char c = s_[p_];
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      int depth = 0;
      while (p_ < s_.size()) {
        const char d = s_[p_];
        if (d == '"') {
          if (!skip_string()) return false;
          continue;
        }
        ++p_;
        if (d == '{' || d == '[') ++depth;
        if (d == '}' || d == ']') {
          if (--depth == 0) return true;
        }
      }
      return false;
    }
    while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']' && s_[p_] != ' ' && s_[p_] != '\n' &&
           s_[p_] != '\r' && s_[p_] != '\t')
      ++p_;
    return true;
  }

 private:
  bool skip_string() {
    ++p_;  // opening quote
    while (p_ < s_.size()) {
      const char c = s_[p_++];
      if (c == '\\') {
        ++p_;
      } else if (c == '"') {
        return true;
      }
    }
    return false;
  }
  bool hex4(uint32_t* v) {
    if (p_ + 4 > s_.size()) return false;
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[p_++];
      n <<= 4;
      if (c >= '0' && c <= '9') {
        n |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        n |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        n |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    *v = n;
    return true;
  }
  std::string_view s_;
  size_t p_ = 0;
};

bool parse_vocab(std::string_view span, ModelTables* out) {
  Scanner sc(span);
  if (!sc.eat('{')) return false;
  if (sc.eat('}')) return true;
  std::string key;
  do {
    int64_t id = 0;
    if (!sc.string(key) || !sc.eat(':') || !sc.integer(&id) || id > INT32_MAX) return false;
    out->vocab.emplace_back(key, static_cast<int32_t>(id));
  } while (sc.eat(','));
  return sc.eat('}');
}

bool parse_merges(std::string_view span, ModelTables* out) {
  Scanner sc(span);
  if (!sc.eat('[')) return false;
  out->has_merges = true;
  if (sc.eat(']')) return true;
  std::string a, b;
  do {
    if (sc.peek('[')) {
      sc.eat('[');
      if (!sc.string(a) || !sc.eat(',') || !sc.string(b) || !sc.eat(']')) return false;
    } else {
      if (!sc.string(a)) return false;
      const size_t space = a.find(' ');
      if (space == std::string::npos) return false;
      b.assign(a, space + 1);
      a.resize(space);
    }
    out->merges.emplace_back(a, b);
  } while (sc.eat(','));
  return sc.eat(']');
}

}  // namespace

bool scan_model_tables(std::string_view json, ModelTables* out) {
  Scanner sc(json);
  size_t vocab_begin = 0, vocab_end = 0, merges_begin = 0, merges_end = 0;
  bool found_vocab = false, found_merges = false;
  std::string key;
  if (!sc.eat('{')) return false;
  if (sc.eat('}')) return false;
  do {
    if (!sc.string(key) || !sc.eat(':')) return false;
    if (key == "model" && sc.peek('{')) {
      sc.eat('{');
      if (!sc.eat('}')) {
        do {
          if (!sc.string(key) || !sc.eat(':')) return false;
          sc.skip_ws();
          const size_t begin = sc.pos();
          if (!sc.skip_value()) return false;
          if (key == "vocab" && !found_vocab) {
            found_vocab = true;
            vocab_begin = begin;
            vocab_end = sc.pos();
          } else if (key == "merges" && !found_merges) {
            found_merges = true;
            merges_begin = begin;
            merges_end = sc.pos();
          }
        } while (sc.eat(','));
        if (!sc.eat('}')) return false;
      }
    } else if (!sc.skip_value()) {
      return false;
    }
  } while (sc.eat(','));
  if (!sc.eat('}') || !found_vocab) return false;
  if (!parse_vocab(json.substr(vocab_begin, vocab_end - vocab_begin), out)) return false;
  if (found_merges && !parse_merges(json.substr(merges_begin, merges_end - merges_begin), out)) return false;
  // The rest of the document with the two tables blanked, in file order.
  struct Cut {
    size_t begin, end;
    const char* with;
  };
  Cut cuts[2] = {{vocab_begin, vocab_end, "{}"}, {merges_begin, merges_end, "[]"}};
  const size_t n = found_merges ? 2 : 1;
  if (n == 2 && cuts[1].begin < cuts[0].begin) std::swap(cuts[0], cuts[1]);
  out->rest.clear();
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    out->rest.append(json.substr(at, cuts[i].begin - at));
    out->rest.append(cuts[i].with);
    at = cuts[i].end;
  }
  out->rest.append(json.substr(at));
  return true;
}

}  // namespace tachyon::tokenizer
