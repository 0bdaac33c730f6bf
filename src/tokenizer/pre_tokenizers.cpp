#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <functional>

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const Json& object, const std::string& path, const char* fallback) {
  const Json* v = optional_field(object, "behavior", path);
  const std::string name = v ? get_string(object, "behavior", path) : fallback;
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  throw Error("{}: unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
              "Contiguous)",
              join_path(path, "behavior"), name);
}

// Applies `behavior` to spans covering `piece.text` and appends the non-empty results,
// as Hugging Face's NormalizedString::split.
void split_spans(const Piece& piece, std::vector<Span>& spans, Behavior behavior, Pieces& out) {
  struct Out {
    size_t start, end;
    bool remove;
  };
  thread_local std::vector<Out> result;
  result.clear();
  switch (behavior) {
    case Behavior::Isolated:
      for (const Span& s : spans) result.push_back({s.start, s.end, false});
      break;
    case Behavior::Removed:
      for (const Span& s : spans) result.push_back({s.start, s.end, s.is_match});
      break;
    case Behavior::Contiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.is_match == previous && !result.empty()) {
          result.back().end = s.end;
        } else {
          result.push_back({s.start, s.end, false});
        }
        previous = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous && !result.empty()) {
          result.back().end = s.end;
        } else {
          result.push_back({s.start, s.end, false});
        }
        previous = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !previous && !result.empty()) {
          result.back().start = s.start;
        } else {
          result.push_back({s.start, s.end, false});
        }
        previous = s.is_match;
      }
      std::reverse(result.begin(), result.end());
      break;
    }
  }
  for (const Out& o : result) {
    if (o.remove || o.start == o.end) continue;
    out.push_back({piece.text.substr(o.start, o.end - o.start), -1, piece.at_start && o.start == 0});
  }
}

// Runs fn(piece, out) over every non-token piece; token pieces pass through; empty pieces drop.
void split_each(Pieces& pieces, const std::function<void(Piece&, Pieces&)>& fn) {
  Pieces out;
  out.reserve(pieces.size() * 2);
  for (Piece& p : pieces) {
    if (p.token_id >= 0) {
      out.push_back(std::move(p));
    } else if (!p.text.empty()) {
      const size_t before = out.size();
      fn(p, out);
      out.erase(std::remove_if(out.begin() + static_cast<long>(before), out.end(),
                               [](const Piece& q) { return q.token_id < 0 && q.text.empty(); }),
                out.end());
    }
  }
  pieces.swap(out);
}

// Splits where pred(code point) holds, as Hugging Face's `split(char_fn, behavior)`.
template <typename Pred>
void find_char_matches(std::string_view text, Pred pred, std::vector<Span>& spans) {
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    const char32_t c = unicode::decode_at(text, i, &len);
    if (pred(c)) {
      if (prev != i) spans.push_back({prev, i, false});
      spans.push_back({i, i + len, true});
      prev = i + len;
    }
    i += len;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
}

class Split : public PreTokenizer {
 public:
  Split(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Pieces& pieces) const override {
    split_each(pieces, [&](Piece& p, Pieces& out) {
      thread_local std::vector<Span> spans;
      spans.clear();
      pattern_.find_matches(p.text, spans);
      if (invert_)
        for (Span& s : spans) s.is_match = !s.is_match;
      split_spans(p, spans, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

template <typename Pred>
class CharSplit : public PreTokenizer {
 public:
  CharSplit(Pred pred, Behavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(Pieces& pieces) const override {
    split_each(pieces, [&](Piece& p, Pieces& out) {
      thread_local std::vector<Span> spans;
      spans.clear();
      find_char_matches(p.text, pred_, spans);
      split_spans(p, spans, behavior_, out);
    });
  }

 private:
  Pred pred_;
  Behavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> make_char_split(Pred pred, Behavior behavior) {
  return std::make_unique<CharSplit<Pred>>(pred, behavior);
}

// GPT-2's split regex, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Pattern>(Pattern::regex(kGpt2Pattern, "ByteLevel"));
  }
  void pre_tokenize(Pieces& pieces) const override {
    if (add_prefix_space_ || regex_) {
      split_each(pieces, [&](Piece& p, Pieces& out) {
        // (The char form: GCC 12 at -O3 misreports -Wrestrict on insert(0, " ").)
        if (add_prefix_space_ && p.text[0] != ' ') p.text.insert(p.text.begin(), ' ');
        if (!regex_) {
          out.push_back(std::move(p));
          return;
        }
        thread_local std::vector<Span> spans;
        spans.clear();
        regex_->find_matches(p.text, spans);
        split_spans(p, spans, Behavior::Isolated, out);
      });
    }
    const auto& alphabet = unicode::byte_level_alphabet();
    std::string mapped;
    for (Piece& p : pieces) {
      if (p.token_id >= 0) continue;
      mapped.clear();
      for (char c : p.text) mapped.append(alphabet.byte_to_utf8[static_cast<unsigned char>(c)]);
      p.text.swap(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> regex_;
};

enum class PrependScheme { Always, First, Never };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split) : scheme_(scheme), split_(split) {
    unicode::append_utf8(replacement_, replacement);
    splitter_ = std::make_unique<Pattern>(Pattern::literal(replacement_));
  }
  void pre_tokenize(Pieces& pieces) const override {
    split_each(pieces, [&](Piece& p, Pieces& out) {
      std::string replaced;
      replaced.reserve(p.text.size());
      for (char c : p.text) {
        if (c == ' ') {
          replaced.append(replacement_);
        } else {
          replaced.push_back(c);
        }
      }
      p.text.swap(replaced);
      const bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_start)))
        p.text.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(p));
        return;
      }
      thread_local std::vector<Span> spans;
      spans.clear();
      splitter_->find_matches(p.text, spans);
      split_spans(p, spans, Behavior::MergedWithNext, out);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Pattern> splitter_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

bool is_bert_punctuation(char32_t c) {
  return (c < 0x80 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))) ||
         unicode::is_punctuation(c);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& value, const std::string& path) {
  if (value.is_null()) return nullptr;
  const std::string type = get_type(value, path);
  if (type == "Split") {
    return std::make_unique<Split>(Pattern::from_json(require_field(value, "pattern", path), join_path(path, "pattern")),
                                   parse_behavior(value, path, "Isolated"), get_bool(value, "invert", path, false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(get_bool(value, "add_prefix_space", path, true),
                                       get_bool(value, "use_regex", path, true));
  if (type == "Metaspace") {
    PrependScheme scheme = PrependScheme::Always;
    if (const Json* s = optional_field(value, "prepend_scheme", path)) {
      const std::string name = get_string(value, "prepend_scheme", path);
      if (name == "always") {
        scheme = PrependScheme::Always;
      } else if (name == "first") {
        scheme = PrependScheme::First;
      } else if (name == "never") {
        scheme = PrependScheme::Never;
      } else {
        throw Error("{}: unknown prepend_scheme '{}' (expected always, first or never)",
                    join_path(path, "prepend_scheme"), name);
      }
      (void)s;
    } else if (!get_bool(value, "add_prefix_space", path, true)) {
      scheme = PrependScheme::Never;
    }
    return std::make_unique<Metaspace>(get_char(value, "replacement", path), scheme, get_bool(value, "split", path, true));
  }
  if (type == "Digits") {
    const bool individual = get_bool(value, "individual_digits", path, false);
    return make_char_split([](char32_t c) { return unicode::is_numeric(c); },
                           individual ? Behavior::Isolated : Behavior::Contiguous);
  }
  if (type == "Whitespace")
    return std::make_unique<Split>(Pattern::pcre2_regex(rust_whitespace_split_pattern(), path), Behavior::Removed, true);
  if (type == "WhitespaceSplit")
    return make_char_split([](char32_t c) { return unicode::is_whitespace(c); }, Behavior::Removed);
  if (type == "Punctuation")
    return make_char_split(is_bert_punctuation, parse_behavior(value, path, "Isolated"));
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(make_char_split([](char32_t c) { return unicode::is_whitespace(c); }, Behavior::Removed));
    parts.push_back(make_char_split(is_bert_punctuation, Behavior::Isolated));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "CharDelimiterSplit") {
    const char32_t delimiter = get_char(value, "delimiter", path);
    return make_char_split([delimiter](char32_t c) { return c == delimiter; }, Behavior::Removed);
  }
  if (type == "Sequence") {
    const std::string list_path = join_path(path, "pretokenizers");
    const Json& list = get_array(value, "pretokenizers", path);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_pre_tokenizer(list[i], index_path(list_path, i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  throw Error("{}.type: unsupported pre-tokenizer type '{}' (supported: Split, ByteLevel, Metaspace, Digits, "
              "Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence)",
              path, type);
}

}  // namespace tachyon::tokenizer
