#include "tokenizer/bpe.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool merged_away;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};

// Min-heap on (rank, pos) through std::push_heap's max-heap.
bool heap_less(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

std::unique_ptr<BpeModel> BpeModel::from_json(const Json& m, const std::string& path, const ModelTables* tables) {
  auto bpe = std::make_unique<BpeModel>();
  if (const Json* dropout = optional_field(m, "dropout", path)) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0)
      throw Error("{}: BPE dropout {} is a training-time option and is not supported", join_path(path, "dropout"),
                  dropout->dump());
  }
  bpe->byte_fallback_ = get_bool(m, "byte_fallback", path, false);
  bpe->fuse_unk_ = get_bool(m, "fuse_unk", path, false);
  bpe->ignore_merges_ = get_bool(m, "ignore_merges", path, false);
  bpe->continuing_subword_prefix_ = get_optional_string(m, "continuing_subword_prefix", path).value_or("");
  bpe->end_of_word_suffix_ = get_optional_string(m, "end_of_word_suffix", path).value_or("");

  const std::string vocab_path = join_path(path, "vocab");
  int32_t max_id = -1;
  if (tables) {
    bpe->vocab_.reserve(tables->vocab.size());
    for (const auto& [token, id] : tables->vocab) {
      bpe->vocab_.insert(token, id);
      max_id = std::max(max_id, id);
    }
  } else {
    const Json& vocab = require_field(m, "vocab", path);
    require_object(vocab, vocab_path);
    bpe->vocab_.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int32_t id = to_token_id(it.value(), join_path(vocab_path, it.key()));
      bpe->vocab_.insert(it.key(), id);
      max_id = std::max(max_id, id);
    }
  }
  // Vocabularies are dense; a far-out id would only make the reverse table explode.
  if (max_id >= 0 && static_cast<size_t>(max_id) > bpe->vocab_.size() * 4 + 4096)
    throw Error("{}: token ids go up to {} for {} entries; ids must be (nearly) contiguous", vocab_path, max_id,
                bpe->vocab_.size());
  bpe->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  bpe->has_token_.assign(static_cast<size_t>(max_id + 1), false);
  auto set_reverse = [&](const std::string& token, int32_t id) {
    if (bpe->vocab_.find(token) != id) return;  // a repeated key: the last one wins
    bpe->id_to_token_[static_cast<size_t>(id)] = token;
    bpe->has_token_[static_cast<size_t>(id)] = true;
  };
  if (tables) {
    for (const auto& [token, id] : tables->vocab) set_reverse(token, id);
  } else {
    const Json& vocab = m["vocab"];
    for (auto it = vocab.begin(); it != vocab.end(); ++it) set_reverse(it.key(), it.value().get<int32_t>());
  }

  if (auto unk = get_optional_string(m, "unk_token", path)) {
    bpe->unk_id_ = bpe->vocab_.find(*unk);
    if (bpe->unk_id_ < 0) throw Error("{}: unk_token '{}' is not in the vocab", join_path(path, "unk_token"), *unk);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bpe->byte_fallback_ids_[static_cast<size_t>(b)] = bpe->vocab_.find(name);
  }
  if (bpe->continuing_subword_prefix_.empty() && bpe->end_of_word_suffix_.empty()) {
    bpe->single_char_ids_.assign(0x800, -1);
    std::string s;
    for (char32_t c = 0; c < 0x800; ++c) {
      s.clear();
      unicode::append_utf8(s, c);
      bpe->single_char_ids_[c] = bpe->vocab_.find(s);
    }
  }

  const std::string merges_path = join_path(path, "merges");
  const size_t prefix_len = bpe->continuing_subword_prefix_.size();
  std::string merged;
  auto add_merge = [&](size_t i, const std::string& left, const std::string& right) {
    const int32_t a = bpe->vocab_.find(left), b = bpe->vocab_.find(right);
    if (a < 0) throw Error("{}: merge token '{}' is not in the vocab", index_path(merges_path, i), left);
    if (b < 0) throw Error("{}: merge token '{}' is not in the vocab", index_path(merges_path, i), right);
    merged = left;
    merged.append(right, std::min(prefix_len, right.size()), std::string::npos);
    const int32_t id = bpe->vocab_.find(merged);
    if (id < 0) throw Error("{}: merged token '{}' is not in the vocab", index_path(merges_path, i), merged);
    bpe->merges_.insert(a, b, {static_cast<int32_t>(i), id});
  };
  if (tables && tables->has_merges) {
    bpe->merges_.reserve(tables->merges.size());
    for (size_t i = 0; i < tables->merges.size(); ++i) add_merge(i, tables->merges[i].first, tables->merges[i].second);
  } else if (const Json* merges = optional_field(m, "merges", path)) {
    if (!merges->is_array()) throw Error("{}: expected an array", merges_path);
    bpe->merges_.reserve(merges->size());
    std::string left, right;
    for (size_t i = 0; i < merges->size(); ++i) {
      const Json& entry = (*merges)[i];
      if (entry.is_string()) {
        const std::string& s = entry.get_ref<const std::string&>();
        const size_t space = s.find(' ');
        if (space == std::string::npos)
          throw Error("{}: merge '{}' is not two tokens separated by a space", index_path(merges_path, i), s);
        left.assign(s, 0, space);
        right.assign(s, space + 1);
      } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
        left = entry[0].get<std::string>();
        right = entry[1].get<std::string>();
      } else {
        throw Error("{}: expected \"a b\" or [\"a\", \"b\"], got {}", index_path(merges_path, i), entry.dump());
      }
      add_merge(i, left, right);
    }
  }
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_token_[static_cast<size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<size_t>(id)];
}

int32_t BpeModel::symbol_id(std::string_view word, size_t begin, size_t end, bool first, bool last) const {
  if (!single_char_ids_.empty()) {
    size_t len = 0;
    const char32_t c = unicode::decode_at(word, begin, &len);
    if (c < 0x800) return single_char_ids_[c];
    return vocab_.find(word.substr(begin, end - begin));
  }
  thread_local std::string s;
  s.clear();
  if (!first) s.append(continuing_subword_prefix_);
  s.append(word.substr(begin, end - begin));
  if (last) s.append(end_of_word_suffix_);
  return vocab_.find(s);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, false});
    if (n > 0) symbols[static_cast<size_t>(n - 1)].next = n;
  };
  // Pending unknown: (unk id, pending) as in Hugging Face's merge_word.
  bool unk_pending = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = unicode::sequence_length(static_cast<unsigned char>(word[i]));
    const size_t end = std::min(word.size(), i + len);
    const int32_t id = symbol_id(word, i, end, i == 0, end == word.size());
    if (id >= 0) {
      if (unk_pending) {
        add(unk_id_);
        unk_pending = false;
      }
      add(id);
    } else {
      bool handled = false;
      if (byte_fallback_) {
        // The bytes of the symbol string (with prefix/suffix), all of which must exist.
        std::string s;
        if (i != 0) s.append(continuing_subword_prefix_);
        s.append(word.substr(i, end - i));
        if (end == word.size()) s.append(end_of_word_suffix_);
        handled = std::all_of(s.begin(), s.end(),
                              [&](char c) { return byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0; });
        if (handled)
          for (char c : s) add(byte_fallback_ids_[static_cast<unsigned char>(c)]);
      }
      if (!handled && unk_id_ >= 0) {
        if (unk_pending && !fuse_unk_) add(unk_id_);
        unk_pending = true;
      }
    }
    i = end;
  }
  if (unk_pending) add(unk_id_);

  for (size_t p = 0; p + 1 < symbols.size(); ++p) {
    if (const MergeMap::Value* m = merges_.find(symbols[p].id, symbols[p + 1].id))
      heap.push_back({m->rank, static_cast<int32_t>(p), m->id});
  }
  std::make_heap(heap.begin(), heap.end(), heap_less);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_less);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.merged_away || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const MergeMap::Value* current = merges_.find(left.id, right.id);
    if (!current || current->id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.merged_away = true;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const MergeMap::Value* m = merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        heap.push_back({m->rank, left.prev, m->id});
        std::push_heap(heap.begin(), heap.end(), heap_less);
      }
    }
    if (left.next >= 0) {
      if (const MergeMap::Value* m = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        heap.push_back({m->rank, top.pos, m->id});
        std::push_heap(heap.begin(), heap.end(), heap_less);
      }
    }
  }
  for (const Symbol& s : symbols)
    if (!s.merged_away) out.push_back(s.id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() >= kMaxCachedWord) {
    merge_word(word, out);
    return;
  }
  Shard& shard = cache_[hash_bytes(word) % kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.words.find(word);
    if (it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out.size();
  merge_word(word, out);
  std::vector<int32_t> ids(out.begin() + static_cast<long>(before), out.end());
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() >= kShardCapacity) shard.words.clear();
  shard.words.emplace(std::string(word), std::move(ids));
}

}  // namespace tachyon::tokenizer
