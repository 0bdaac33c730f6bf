#include "tokenizer/gguf_special_split.h"

#include <algorithm>

namespace tachyon::tokenizer {

GgufSpecialSplitter::GgufSpecialSplitter(std::vector<Special> specials) : specials_(std::move(specials)) {
  std::stable_sort(specials_.begin(), specials_.end(), [](const Special& a, const Special& b) {
    return a.content.size() != b.content.size() ? a.content.size() > b.content.size() : a.id < b.id;
  });
  for (size_t i = 0; i < specials_.size(); ++i) {
    const std::string& content = specials_[i].content;
    if (content.empty()) continue;  // matches nowhere in llama.cpp either (find("") would loop)
    int32_t node = 0;
    for (unsigned char b : content) {
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        auto& children = nodes_[static_cast<size_t>(node)].children;
        children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(b, int32_t{-1}),
                                         [](const auto& x, const auto& y) { return x.first < y.first; }),
                        {b, next});
        nodes_.emplace_back();
      }
      node = next;
    }
    // A duplicate content keeps its first (highest-priority) entry.
    int32_t& special = nodes_[static_cast<size_t>(node)].special;
    if (special < 0) special = static_cast<int32_t>(i);
  }
}

int32_t GgufSpecialSplitter::child(int32_t node, unsigned char b) const {
  const auto& children = nodes_[static_cast<size_t>(node)].children;
  auto it = std::lower_bound(children.begin(), children.end(), b,
                             [](const std::pair<unsigned char, int32_t>& c, unsigned char v) { return c.first < v; });
  return it != children.end() && it->first == b ? it->second : -1;
}

void GgufSpecialSplitter::split(std::string_view text, Pieces& out) const {
  // Which specials occur at all, in priority order.
  std::vector<int32_t> present;
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (int32_t s = nodes_[static_cast<size_t>(node)].special; s >= 0) present.push_back(s);
    }
  }
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());

  struct Fragment {
    size_t begin, end;
    int32_t id;  // -1: raw text
  };
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({0, text.size(), -1});
  std::vector<Fragment> next;
  for (int32_t s : present) {
    const Special& special = specials_[static_cast<size_t>(s)];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.begin;
      while (pos < f.end) {
        const size_t match = text.substr(0, f.end).find(special.content, pos);
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back({pos, match, -1});
        next.push_back({match, match + special.content.size(), special.id});
        pos = match + special.content.size();
      }
      if (pos < f.end) next.push_back({pos, f.end, -1});
    }
    fragments.swap(next);
  }
  for (const Fragment& f : fragments) {
    Piece piece;
    piece.text = std::string(text.substr(f.begin, f.end - f.begin));
    piece.token_id = f.id;
    piece.at_start = f.begin == 0;
    out.push_back(std::move(piece));
  }
}

}  // namespace tachyon::tokenizer
