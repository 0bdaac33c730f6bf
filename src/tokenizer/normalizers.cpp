#include "tokenizer/normalizers.h"

#include <utf8proc.h>

#include <cstdlib>
#include <iterator>
#include <vector>

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

#include "tokenizer/normalization_compat.inc"

template <typename Table>
bool in_ranges(const Table& table, char32_t c) {
  if (c < table[0].first) return false;
  size_t lo = 0, hi = std::size(table);
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (c > table[mid].last) {
      lo = mid + 1;
    } else if (c < table[mid].first) {
      hi = mid;
    } else {
      return true;
    }
  }
  return false;
}

// Hugging Face normalizes with Unicode 9.0 tables; see tools/gen_normalization_compat.py.
bool is_normalization_barrier(char32_t c) { return in_ranges(kNormalizationBarriers, c); }

// NFC/NFD/NFKC/NFKD through utf8proc. ASCII is invariant under all four, and text
// without any code point >= U+0300 is already NFC, so those skip the library call.
// Characters newer than Hugging Face's Unicode 9.0 tables that utf8proc would touch are
// kept verbatim and cut the text into runs normalized on their own, which is what
// Hugging Face's tables make of them (starters that compose with nothing).
class UnicodeNormalizer : public Normalizer {
 public:
  UnicodeNormalizer(utf8proc_option_t options, bool nfc) : options_(options), nfc_(nfc) {}
  void normalize(std::string& text) const override {
    const unsigned char threshold = nfc_ ? 0xCC : 0x80;  // 0xCC leads U+0300..U+033F
    bool invariant = true;
    for (char c : text) {
      if (static_cast<unsigned char>(c) >= threshold) {
        invariant = false;
        break;
      }
    }
    if (invariant) return;
    bool has_barrier = false;
    for (size_t i = 0; i < text.size() && !has_barrier;) {
      size_t len = 0;
      has_barrier = is_normalization_barrier(unicode::decode_at(text, i, &len));
      i += len;
    }
    if (!has_barrier) {
      text = map(text);
      return;
    }
    std::string out;
    size_t run = 0;
    for (size_t i = 0; i < text.size();) {
      size_t len = 0;
      if (is_normalization_barrier(unicode::decode_at(text, i, &len))) {
        out.append(map(std::string_view(text).substr(run, i - run)));
        out.append(text, i, len);
        run = i + len;
      }
      i += len;
    }
    out.append(map(std::string_view(text).substr(run)));
    text.swap(out);
  }

 private:
  std::string map(std::string_view s) const {
    if (s.empty()) return {};
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &out, options_);
    if (n < 0) throw Error("unicode normalization failed: {}", utf8proc_errmsg(n));
    std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
  }

  utf8proc_option_t options_;
  bool nfc_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    bool ascii = true;
    for (char& c : text) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) {
      for (char& c : text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      return;
    }
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      size_t len = 0;
      unicode::append_lowercase(out, unicode::decode_at(text, i, &len));
      i += len;
    }
    text.swap(out);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t len = 0;
        if (!unicode::is_whitespace(unicode::decode_at(text, begin, &len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        const size_t start = unicode::last_char_start(std::string_view(text).substr(0, end));
        size_t len = 0;
        if (!unicode::is_whitespace(unicode::decode_at(text, start, &len))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes combining marks (general category M, as Hugging Face's is_combining_mark, whose
// tables are Unicode 9.0: later marks stay), meant to follow NFD/NFKD.
class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      size_t len = 0;
      const char32_t c = unicode::decode_at(text, i, &len);
      if (!in_ranges(kHfMarks, c)) out.append(text, i, len);
      i += len;
    }
    text.swap(out);
  }
};

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// BERT's normalizer: drop control characters, map whitespace to ' ', pad CJK ideographs
// with spaces, optionally strip accents and lowercase.
class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_(handle_chinese_chars), strip_accents_(strip_accents), lowercase_(lowercase) {}
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      size_t len = 0;
      const char32_t c = unicode::decode_at(text, i, &len);
      i += len;
      if (clean_text_) {
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (unicode::is_whitespace(c)) {
          out.push_back(' ');
          continue;
        }
      }
      if (chinese_ && is_chinese(c)) {
        out.push_back(' ');
        unicode::append_utf8(out, c);
        out.push_back(' ');
        continue;
      }
      unicode::append_utf8(out, c);
    }
    if (strip_accents_) {
      UnicodeNormalizer(static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), false).normalize(out);
      StripAccents().normalize(out);
    }
    if (lowercase_) Lowercase().normalize(out);
    text.swap(out);
  }

 private:
  static bool is_control(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    const auto g = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return g == UTF8PROC_CATEGORY_CC || g == UTF8PROC_CATEGORY_CF || g == UTF8PROC_CATEGORY_CN ||
           g == UTF8PROC_CATEGORY_CO;
  }
  static bool is_chinese(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& value, const std::string& path) {
  if (value.is_null()) return nullptr;
  const std::string type = get_type(value, path);
  const auto stable = [](int o) { return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | o); };
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(stable(UTF8PROC_COMPOSE), true);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(stable(UTF8PROC_DECOMPOSE), false);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(stable(UTF8PROC_COMPOSE | UTF8PROC_COMPAT), false);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(stable(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), false);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(get_bool(value, "strip_left", path, true), get_bool(value, "strip_right", path, true));
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(require_field(value, "pattern", path), join_path(path, "pattern")),
                                     get_string(value, "content", path));
  if (type == "Prepend") return std::make_unique<Prepend>(get_string(value, "prepend", path));
  if (type == "BertNormalizer") {
    const bool lowercase = get_bool(value, "lowercase", path, true);
    const Json* strip = optional_field(value, "strip_accents", path);
    if (strip && !strip->is_boolean()) throw Error("{}: expected a boolean or null", join_path(path, "strip_accents"));
    return std::make_unique<BertNormalizer>(get_bool(value, "clean_text", path, true),
                                            get_bool(value, "handle_chinese_chars", path, true),
                                            strip ? strip->get<bool>() : lowercase, lowercase);
  }
  if (type == "Sequence") {
    const std::string list_path = join_path(path, "normalizers");
    const Json& list = get_array(value, "normalizers", path);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_normalizer(list[i], index_path(list_path, i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  throw Error("{}.type: unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
              "StripAccents, Replace, Prepend, BertNormalizer, Sequence)",
              path, type);
}

}  // namespace tachyon::tokenizer
