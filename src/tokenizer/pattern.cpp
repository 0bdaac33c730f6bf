#include "tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

// Per-thread PCRE2 scratch: match data (only the whole-match pair is read) and a JIT stack
// large enough for long inputs (a 1 MB run of spaces must not fail to match).
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// Oniguruma's \s: White_Space.
constexpr std::string_view kSpaceClassBody = "\\t-\\r\\x{85}\\p{Z}";
constexpr std::string_view kWordClassBody = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
constexpr std::string_view kHexClassBody = "0-9a-fA-F";

#include "tokenizer/unicode_compat.inc"

// Code points Oniguruma (Unicode 16 in tokenizers 0.23.2) puts in `category` and PCRE2's
// older tables do not, as PCRE2 class text; nullptr when there are none.
const char* category_additions(std::string_view category) {
  for (const auto& entry : kCategoryAdditions)
    if (category == entry.category) return entry.additions;
  return nullptr;
}

}  // namespace

std::string translate_onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      auto emit = [&](std::string_view body, bool negated) {
        if (class_depth > 0) {
          if (negated) {  // a negated class inside a class has no PCRE2 spelling; keep PCRE2's own
            out.push_back('\\');
            out.push_back(e);
          } else {
            out.append(body);
          }
        } else {
          out.append(negated ? "[^" : "[");
          out.append(body);
          out.push_back(']');
        }
      };
      switch (e) {
        case 's': emit(kSpaceClassBody, false); break;
        case 'S': emit(kSpaceClassBody, true); break;
        case 'w': emit(kWordClassBody, false); break;
        case 'W': emit(kWordClassBody, true); break;
        case 'h': emit(kHexClassBody, false); break;
        case 'H': emit(kHexClassBody, true); break;
        case 'p':
        case 'P': {
          const size_t close = p.find('}', i + 2);
          if (i + 2 >= p.size() || p[i + 2] != '{' || close == std::string_view::npos) {
            out.push_back('\\');
            out.push_back(e);
            break;
          }
          std::string_view name = p.substr(i + 3, close - (i + 3));
          bool negated = e == 'P';
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.remove_prefix(1);
          }
          const char* additions = category_additions(name);
          if (!additions || (negated && class_depth > 0)) {
            out.append(p.substr(i, close + 1 - i));
          } else {
            if (class_depth == 0) out.append(negated ? "[^" : "[");
            out.append("\\p{").append(name).append("}").append(additions);
            if (class_depth == 0) out.push_back(']');
          }
          i = close - 1;
          break;
        }
        case 'd': out.append("\\p{Nd}"); break;
        case 'D': out.append("\\P{Nd}"); break;
        case 'u':
          if (i + 5 < p.size() && std::isxdigit(static_cast<unsigned char>(p[i + 2])) &&
              std::isxdigit(static_cast<unsigned char>(p[i + 3])) && std::isxdigit(static_cast<unsigned char>(p[i + 4])) &&
              std::isxdigit(static_cast<unsigned char>(p[i + 5]))) {
            out.append("\\x{");
            out.append(p.substr(i + 2, 4));
            out.push_back('}');
            i += 4;
          } else {
            out.append("\\u");
          }
          break;
        default: {
          out.push_back('\\');
          const size_t n = unicode::sequence_length(static_cast<unsigned char>(e));
          out.append(p.substr(i + 1, n));
          i += n - 1;
          break;
        }
      }
      ++i;
      continue;
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:alpha:] inside a class
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      ++class_depth;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out.push_back(c);
  }
  return out;
}

Regex::Regex(const std::string& onig_pattern, std::string_view path, bool translate) {
  const std::string translated = translate ? translate_onig_to_pcre2(onig_pattern) : onig_pattern;
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error("{}: regex '{}' does not compile (as '{}', at offset {}): {}", path, onig_pattern, translated,
                offset, reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::find(std::string_view text, size_t from, size_t* start, size_t* end) const {
  MatchScratch& s = scratch();
  const int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                             from, PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw Error("regex match failed on a {}-byte input: {}", text.size(), reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
  *start = ovector[0];
  *end = ovector[1];
  return true;
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  if (text.empty()) p.regex_ = std::make_shared<Regex>("", "pattern");
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(const std::string& onig_pattern, std::string_view path) {
  Pattern p;
  p.regex_ = std::make_shared<Regex>(onig_pattern, path);
  return p;
}

Pattern Pattern::pcre2_regex(const std::string& pcre2_pattern, std::string_view path) {
  Pattern p;
  p.regex_ = std::make_shared<Regex>(pcre2_pattern, path, false);
  return p;
}

std::string rust_whitespace_split_pattern() {
  std::string word = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";
  for (const char* category : {"L", "M", "Nd", "Nl"})
    if (const char* extra = category_additions(category)) word += extra;
  return "[" + word + "]+|[^" + word + std::string(kSpaceClassBody) + "]+";
}

Pattern Pattern::from_json(const Json& value, std::string_view path) {
  require_object(value, path);
  if (value.size() != 1) throw Error("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", path, value.dump());
  if (value.contains("String")) return literal(get_string(value, "String", path));
  if (value.contains("Regex")) return regex(get_string(value, "Regex", path), join_path(path, "Regex"));
  throw Error("{}: unknown pattern kind '{}' (expected String or Regex)", path, value.begin().key());
}

void Pattern::find_matches(std::string_view text, std::vector<Span>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  auto add_match = [&](size_t s, size_t e) {
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  };
  if (!regex_) {
    for (size_t pos = text.find(literal_); pos != std::string_view::npos; pos = text.find(literal_, pos)) {
      add_match(pos, pos + literal_.size());
      pos += literal_.size();
    }
  } else {
    // The onig crate's FindMatches: skip an empty match that ends where the last one ended.
    size_t search_from = 0;
    bool has_last = false;
    size_t last_match_end = 0;
    while (search_from <= text.size()) {
      size_t s = 0, e = 0;
      if (!regex_->find(text, search_from, &s, &e)) break;
      if (s == e && has_last && last_match_end == e) {
        search_from += search_from < text.size() ? unicode::sequence_length(static_cast<unsigned char>(text[search_from])) : 1;
        continue;
      }
      search_from = e;
      has_last = true;
      last_match_end = e;
      add_match(s, e);
    }
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::vector<Span> spans;
  find_matches(text, spans);
  std::string out;
  out.reserve(text.size());
  for (const Span& s : spans) {
    if (s.is_match) {
      out.append(content);
    } else {
      out.append(text.substr(s.start, s.end - s.start));
    }
  }
  return out;
}

char32_t get_char(const Json& object, std::string_view key, std::string_view path) {
  const std::string s = get_string(object, key, path);
  size_t len = 0;
  if (s.empty() || !unicode::is_valid_utf8(s) || (unicode::decode_at(s, 0, &len), len != s.size()))
    throw Error("{}: expected a single character, got '{}'", join_path(path, key), s);
  return unicode::decode_at(s, 0, &len);
}

}  // namespace tachyon::tokenizer
