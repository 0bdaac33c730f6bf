#include "tokenizer/gguf_spm.h"

#include <cstdio>
#include <queue>

#include "base/error.h"

namespace tachyon::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

void escape_spaces(std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpace);
    } else {
      out.push_back(c);
    }
  }
  text.swap(out);
}

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

struct Symbol {
  size_t offset;
  size_t length;  // 0: merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t length;
};

// Highest score first; equal scores: leftmost first.
struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void GgufSpmEscape::pre_tokenize(Pieces& pieces) const {
  bool after_special = true;  // the first piece counts as following a special token
  for (Piece& p : pieces) {
    if (p.token_id >= 0) {
      after_special = true;
      continue;
    }
    if (add_space_prefix_ && after_special) p.text.insert(p.text.begin(), ' ');
    escape_spaces(p.text);
    after_special = false;
  }
}

GgufSpmModel::GgufSpmModel(std::vector<std::string> tokens, std::vector<float> scores, int32_t unk_id)
    : tokens_(std::move(tokens)), scores_(std::move(scores)) {
  vocab_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) vocab_.insert(tokens_[i], static_cast<int32_t>(i));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    int32_t id = vocab_.find(name);
    if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
    // llama.cpp stops with an exception here; a sequence that needs such a byte is rare
    // enough that SentencePiece's own answer, the unknown token, serves better.
    if (id < 0) id = unk_id;
    byte_ids_[static_cast<size_t>(b)] = id;
  }
}

int32_t GgufSpmModel::byte_token(unsigned char b) const {
  const int32_t id = byte_ids_[b];
  if (id < 0)
    throw Error("SentencePiece vocabulary has no token for byte 0x{:02X} (no <0x{:02X}> piece, no unknown token)", b,
                b);
  return id;
}

void GgufSpmModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t offset = 0; offset < word.size();) {
    const size_t n = std::min(utf8_length(static_cast<unsigned char>(word[offset])), word.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({offset, n, index - 1, offset + n == word.size() ? -1 : index + 1});
    offset += n;
  }
  if (symbols.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::string_view text = word.substr(l.offset, l.length + r.length);
    const int32_t id = vocab_.find(text);
    if (id < 0) return;
    queue.push({left, right, scores_[static_cast<size_t>(id)], text.size()});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(bigram.left)];
    Symbol& right = symbols[static_cast<size_t>(bigram.right)];
    // Stale: one side was merged away or has grown since the pair was queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
    try_pair(left.prev, bigram.left);
    try_pair(bigram.left, left.next);
  }

  // Every merge formed a token, so a symbol that is no token is a single character
  // missing from the vocabulary: byte fallback. (llama.cpp's resegment step, which would
  // split a non-token back along its merges, never finds such a merge for this reason.)
  for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const std::string_view text = word.substr(s.offset, s.length);
    if (const int32_t id = vocab_.find(text); id >= 0) {
      out.push_back(id);
    } else {
      for (char c : text) out.push_back(byte_token(static_cast<unsigned char>(c)));
    }
  }
}

std::optional<int32_t> GgufSpmModel::token_to_id(std::string_view token) const {
  const int32_t id = vocab_.find(token);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

const std::string* GgufSpmModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

}  // namespace tachyon::tokenizer
