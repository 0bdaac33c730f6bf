#include "spec/request_kind.h"

#include <algorithm>
#include <string>

#include "sampling/token_mask.h"
#include "spec/ngram.h"

namespace tachyon::spec {

namespace {
// The prompt's last tokens are what the request continues: its tail is classified (bounded work
// per admission, whatever the prompt's length).
constexpr size_t kClassifiedTokens = 2048;
}  // namespace

const char* kind_name(RequestKind kind) {
  switch (kind) {
    case RequestKind::Constrained: return "constrained";
    case RequestKind::CodeRepetitive: return "code_repetitive";
    case RequestKind::CodeNovel: return "code_novel";
    case RequestKind::ProseRepetitive: return "prose_repetitive";
    case RequestKind::ProseNovel: return "prose_novel";
    case RequestKind::TextRepetitive: return "text_repetitive";
    case RequestKind::TextNovel: return "text_novel";
  }
  return "text_novel";
}

double code_byte_share(std::string_view text) {
  if (text.empty()) return 0;
  size_t marks = 0;
  bool line_start = true;
  for (char c : text) {
    switch (c) {
      case '{': case '}': case '(': case ')': case '[': case ']': case ';': case '=': case '<': case '>':
      case '_': case '#':
        ++marks;
        break;
      case ' ': case '\t':
        marks += line_start;  // indentation
        break;
      default: break;
    }
    line_start = c == '\n' || (line_start && (c == ' ' || c == '\t'));
  }
  return static_cast<double>(marks) / static_cast<double>(text.size());
}

RequestKind classify_request(std::span<const int32_t> prompt, bool constrained,
                             const sampling::TokenVocabulary* vocabulary) {
  if (constrained) return RequestKind::Constrained;
  const auto tail = prompt.subspan(prompt.size() - std::min(prompt.size(), kClassifiedTokens));
  const bool repetitive = trigram_repetition(tail) >= kRepetitiveFrom;
  if (!vocabulary) return repetitive ? RequestKind::TextRepetitive : RequestKind::TextNovel;
  std::string text;
  for (int32_t id : tail)
    if (id >= 0 && id < vocabulary->size()) text += vocabulary->bytes(id);
  if (code_byte_share(text) >= kCodeFrom) return repetitive ? RequestKind::CodeRepetitive : RequestKind::CodeNovel;
  return repetitive ? RequestKind::ProseRepetitive : RequestKind::ProseNovel;
}

}  // namespace tachyon::spec
