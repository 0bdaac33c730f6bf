#include "tokenizer/added_vocabulary.h"

#include <string>
#include <utility>
#include <vector>

#include <algorithm>
#include <functional>

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

void TokenMatcher::add(std::string_view content, int32_t token_index) {
  if (content.empty()) return;  // an empty token can never match
  int32_t node = 0;
  for (char ch : content) {
    const auto b = static_cast<unsigned char>(ch);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& kids = nodes_[static_cast<size_t>(node)].children;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1})), {b, next});
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].token_index = token_index;  // a repeated content keeps the last token
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

int32_t TokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& kids = nodes_[static_cast<size_t>(node)].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
  return it != kids.end() && it->first == b ? it->second : -1;
}

bool TokenMatcher::find(std::string_view text, size_t from, size_t* start, size_t* end, int32_t* token_index) const {
  if (empty()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token_index >= 0) {
        best = nodes_[static_cast<size_t>(node)].token_index;
        best_end = j + 1;
      }
    }
    if (best >= 0) {
      *start = i;
      *end = best_end;
      *token_index = best;
      return true;
    }
  }
  return false;
}

AddedVocabulary AddedVocabulary::from_json(const Json& added_tokens, const std::string& path,
                                           const Normalizer* normalizer) {
  AddedVocabulary v;
  if (added_tokens.is_null()) return v;
  if (!added_tokens.is_array()) throw Error("{}: expected an array, got {}", path, added_tokens.type_name());
  v.tokens_.reserve(added_tokens.size());
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const std::string p = index_path(path, i);
    const Json& t = added_tokens[i];
    AddedToken token;
    token.id = to_token_id(require_field(t, "id", p), join_path(p, "id"));
    token.content = get_string(t, "content", p);
    token.special = get_bool(t, "special", p, false);
    token.normalized = get_bool(t, "normalized", p, !token.special);
    token.lstrip = get_bool(t, "lstrip", p, false);
    token.rstrip = get_bool(t, "rstrip", p, false);
    token.single_word = get_bool(t, "single_word", p, false);
    if (!unicode::is_valid_utf8(token.content)) throw Error("{}: content is not valid UTF-8", join_path(p, "content"));
    v.tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& t = v.tokens_[i];
    v.content_to_id_.insert(t.content, t.id);
    v.id_to_index_[t.id] = i;
    if (t.special) v.special_contents_.insert(t.content, 1);
    if (t.normalized) {
      std::string content = t.content;
      if (normalizer) normalizer->normalize(content);
      v.normalized_matcher_.add(content, static_cast<int32_t>(i));
    } else {
      v.raw_matcher_.add(t.content, static_cast<int32_t>(i));
    }
  }
  return v;
}

namespace {

#include "tokenizer/unicode_compat.inc"

// Rust regex's \w, which Hugging Face's single_word check uses: Alphabetic, marks,
// decimal digits, connector punctuation and the joiners.
bool is_word_char(char32_t c) {
  if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  if (c == 0x200C || c == 0x200D) return true;
  // Symbols with Other_Alphabetic: circled, parenthesized and squared Latin letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189))
    return true;
  if (unicode::is_word_category(c)) return true;
  // Letters, marks and digits that Unicode gained after utf8proc's tables (HF's regex knows
  // Unicode 16): the same generated table the pre-tokenizer patterns use.
  static const std::vector<std::pair<char32_t, char32_t>> newer = [] {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    for (const auto& entry : kCategoryAdditions) {
      const std::string_view category = entry.category;
      if (category != "L" && category != "M" && category != "Nd" && category != "Nl" && category != "Pc") continue;
      const std::string_view text = entry.additions;
      auto read_code = [&](size_t& i) {  // \x{HEX}
        const size_t open = text.find('{', i), close = text.find('}', open);
        i = close + 1;
        return static_cast<char32_t>(std::stoul(std::string(text.substr(open + 1, close - open - 1)), nullptr, 16));
      };
      for (size_t i = 0; i < text.size();) {
        const char32_t first = read_code(i);
        char32_t last = first;
        if (i < text.size() && text[i] == '-') {
          ++i;
          last = read_code(i);
        }
        ranges.emplace_back(first, last);
      }
    }
    return ranges;
  }();
  for (const auto& [first, last] : newer)
    if (c >= first && c <= last) return true;
  return false;
}

}  // namespace

void AddedVocabulary::split_with(std::string_view text, bool at_start, const TokenMatcher& matcher, Pieces& out,
                                 const std::function<void(Piece&&, Pieces&)>& emit_text) const {
  auto emit = [&](size_t b, size_t e) {
    if (b < e) emit_text(Piece{std::string(text.substr(b, e - b)), -1, at_start && b == 0}, out);
  };
  size_t offset = 0;  // end of the last accepted token
  size_t search = 0;  // where the matcher continues (aho-corasick's non-overlapping iteration)
  size_t m_start = 0, m_end = 0;
  int32_t index = -1;
  while (search < text.size() && matcher.find(text, search, &m_start, &m_end, &index)) {
    search = m_end;
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t start = m_start, stop = m_end;
    if (token.single_word) {
      bool start_ok = start == 0;
      if (!start_ok) {
        size_t len = 0;
        start_ok = !is_word_char(unicode::decode_at(text, unicode::last_char_start(text.substr(0, start)), &len));
      }
      bool stop_ok = stop == text.size();
      if (!stop_ok) {
        size_t len = 0;
        stop_ok = !is_word_char(unicode::decode_at(text, stop, &len));
      }
      if (!start_ok || !stop_ok) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t prev = unicode::last_char_start(text.substr(0, s));
        size_t len = 0;
        if (!unicode::is_whitespace(unicode::decode_at(text, prev, &len))) break;
        s = prev;
      }
      start = std::max(s, offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t len = 0;
        if (!unicode::is_whitespace(unicode::decode_at(text, stop, &len))) break;
        stop += len;
      }
    }
    emit(offset, start);
    out.push_back(Piece{std::string(text.substr(start, stop - start)), token.id, at_start && start == 0});
    offset = stop;
  }
  emit(offset, text.size());
}

void AddedVocabulary::split_and_normalize(std::string_view text, const Normalizer* normalizer, Pieces& out) const {
  auto normalize_and_split = [&](Piece&& piece, Pieces& sink) {
    if (normalizer) normalizer->normalize(piece.text);
    if (piece.text.empty()) return;
    if (normalized_matcher_.empty()) {
      sink.push_back(std::move(piece));
      return;
    }
    split_with(piece.text, piece.at_start, normalized_matcher_, sink,
               [](Piece&& p, Pieces& s) { s.push_back(std::move(p)); });
  };
  split_with(text, true, raw_matcher_, out, normalize_and_split);
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const int32_t id = content_to_id_.find(content);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

const AddedToken* AddedVocabulary::find_by_id(int32_t id) const {
  auto it = id_to_index_.find(id);
  return it == id_to_index_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
  return special_contents_.find(content) >= 0;
}

}  // namespace tachyon::tokenizer
