#include "tokenizer/decoders.h"

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const auto& alphabet = unicode::byte_level_alphabet();
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      bool all_mapped = true;
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const char32_t c = unicode::decode_at(t, i, &len);
        const int b = c < 512 ? alphabet.char_to_byte[c] : -1;
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
        i += len;
      }
      if (!all_mapped) {  // a token outside the byte alphabet stands for its own UTF-8 bytes
        bytes.resize(mark);
        bytes.append(t);
      }
    }
    tokens.assign(1, unicode::sanitize_utf8(bytes));
  }
};

enum class PrependScheme { Always, First, Never };

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : strip_first_(strip_first) {
    unicode::append_utf8(replacement_, replacement);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      out.reserve(t.size());
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out.push_back(' ');
          k += replacement_.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      tokens[i].swap(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (unicode::is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_count; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = hex_byte(t[3], t[4]);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all.append(t);
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        chars.push_back({i, unicode::decode_at(t, i, &len)});
        i += len;
      }
      size_t start_cut = 0;
      for (size_t i = 0; i < std::min(start_, chars.size()) && chars[i].second == content_; ++i) start_cut = i + 1;
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < std::min(stop_, chars.size()); ++i) {
        const size_t index = chars.size() - i - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      const size_t b = chars[start_cut].first;
      const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Classic BPE end-of-word suffix: the suffix becomes a space, except on the last token.
class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const Pattern p = Pattern::literal(suffix_);
      tokens[i] = p.replace_all(tokens[i], i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        const size_t at = t.find(prefix_);
        if (t.compare(0, prefix_.size(), prefix_) == 0 && at != std::string::npos) {
          t.erase(at, prefix_.size());
        } else {
          t.insert(t.begin(), ' ');  // (insert(0, " ") trips GCC 12's -Wrestrict false positive at -O3)
        }
      }
      if (cleanup_) {
        static const std::pair<const char*, const char*> kRules[] = {
            {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
            {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kRules) t = Pattern::literal(from).replace_all(t, to);
      }
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t get_count(const Json& value, const char* key, const std::string& path) {
  const int64_t n = get_int(value, key, path);
  if (n < 0) throw Error("{}: expected a non-negative count, got {}", join_path(path, key), n);
  return static_cast<size_t>(n);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& value, const std::string& path) {
  if (value.is_null()) return nullptr;
  const std::string type = get_type(value, path);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    bool strip_first = get_bool(value, "add_prefix_space", path, true);
    if (auto scheme = get_optional_string(value, "prepend_scheme", path)) {
      if (*scheme != "always" && *scheme != "first" && *scheme != "never")
        throw Error("{}: unknown prepend_scheme '{}' (expected always, first or never)",
                    join_path(path, "prepend_scheme"), *scheme);
      strip_first = *scheme != "never";
    }
    return std::make_unique<MetaspaceDecoder>(get_char(value, "replacement", path), strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(get_char(value, "content", path), get_count(value, "start", path),
                                          get_count(value, "stop", path));
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(
        Pattern::from_json(require_field(value, "pattern", path), join_path(path, "pattern")),
        get_string(value, "content", path));
  if (type == "BPEDecoder")
    return std::make_unique<BpeSuffixDecoder>(get_optional_string(value, "suffix", path).value_or("</w>"));
  if (type == "WordPiece")
    return std::make_unique<WordPieceDecoder>(get_optional_string(value, "prefix", path).value_or("##"),
                                              get_bool(value, "cleanup", path, true));
  if (type == "Sequence") {
    const std::string list_path = join_path(path, "decoders");
    const Json& list = get_array(value, "decoders", path);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_decoder(list[i], index_path(list_path, i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw Error("{}.type: unsupported decoder type '{}' (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, "
              "Replace, BPEDecoder, WordPiece, Sequence)",
              path, type);
}

}  // namespace tachyon::tokenizer
