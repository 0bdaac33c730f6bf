#include "engine/pflash_attention.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <functional>

#include "base/error.h"
#include "kv/kv_cache.h"
#include "model/batch.h"

namespace tachyon::engine {

AttentionScorer::AttentionScorer(std::unique_ptr<model::Model> scorer, AttentionScorerOptions options)
    : model_(std::move(scorer)), options_(options) {
  TACHYON_CHECK(model_ != nullptr, "AttentionScorer needs a model");
  const int32_t window = options_.query_window, chunk = options_.chunk;
  if (window < 1) throw Error("PFlash attention query window must be at least 1, got {}", window);
  if (chunk < 0 || (chunk > 0 && chunk <= kChunkSink + window))
    throw Error("PFlash scorer chunk of {} tokens cannot hold the {} sink tokens, the {}-token query window and a "
                "block (0: the whole prompt at once)",
                chunk, kChunkSink, window);
  if (options_.layers < 0) throw Error("PFlash scorer layers must not be negative (0: all), got {}", options_.layers);
  if (options_.first_layer < 0 || (options_.layers > 0 && options_.first_layer >= options_.layers))
    throw Error("PFlash scorer: first probed layer {} is not within the {} layers read", options_.first_layer,
                options_.layers);
  if (options_.read_window < 0)
    throw Error("PFlash scorer read window must not be negative (0: full attention), got {}", options_.read_window);
}

void AttentionScorer::probe(std::span<const int32_t> tokens, std::span<const int32_t> where) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (n > model_->config().max_position_embeddings)
    throw Error("PFlash attention scorer: {} tokens in one forward, more than the scorer model's {} positions", n,
                model_->config().max_position_embeddings);
  // A cache for this forward alone: the scorer holds no memory between prompts.
  const std::unique_ptr<kv::KvCache> kv = cache_for(n);
  const model::AttentionProbe probe = read(tokens, *kv);
  for (int32_t i = 0; i < n; ++i)
    if (where[static_cast<size_t>(i)] >= 0) {
      mass_[static_cast<size_t>(where[static_cast<size_t>(i)])] += probe.key_mass[static_cast<size_t>(i)];
      peak_[static_cast<size_t>(where[static_cast<size_t>(i)])] = probe.key_peak[static_cast<size_t>(i)];
    }
}

std::unique_ptr<kv::KvCache> AttentionScorer::cache_for(int32_t n) const {
  constexpr int32_t kBlockSize = 16;
  return std::make_unique<kv::KvCache>(model_->backend(),
                                       model_->kv_layout((n + kBlockSize - 1) / kBlockSize, kBlockSize));
}

model::AttentionProbe AttentionScorer::read(std::span<const int32_t> tokens, kv::KvCache& kv) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  const kv::SeqId seq = kv.add_sequence();
  TACHYON_CHECK(kv.reserve(seq, n), "the PFlash scorer's KV cache is too small");
  model::AttentionProbe probe;
  probe.query_rows = std::min(options_.query_window, n);
  probe.layers = options_.layers;
  probe.read_window = options_.read_window;
  probe.first_layer = options_.first_layer;
  probe.key_mass.assign(static_cast<size_t>(n), 0.f);
  probe.key_peak.assign(static_cast<size_t>(n), 0.f);
  // The request is at the prompt's end; the window's first rows are often the context before it
  // (whose rows attend to text like their own, all over the prompt). A row's weight in the peak
  // rises linearly from 1/query_rows (the window's first row) to 1 (the prompt's last token).
  probe.query_weights.resize(static_cast<size_t>(probe.query_rows));
  for (int32_t i = 0; i < probe.query_rows; ++i)
    probe.query_weights[static_cast<size_t>(i)] = static_cast<float>(i + 1) / static_cast<float>(probe.query_rows);
  model::Batch batch;
  batch.add(seq, tokens, 0, model::LogitRows::None);
  batch.attention_probe = &probe;
  model_->forward(batch, kv);
  model_->backend().synchronize();
  layers_run_ = probe.layers_run;
  return probe;
}

std::shared_ptr<void> AttentionScorer::hold_peak_memory(int32_t max_prompt) {
  if (!model_->backend().device_memory()) return nullptr;
  const int32_t longest = options_.chunk > 0 ? std::min(options_.chunk, max_prompt) : max_prompt;
  const int32_t n = static_cast<int32_t>(
      std::max<int64_t>(1, std::min<int64_t>(longest, model_->config().max_position_embeddings)));
  std::shared_ptr<kv::KvCache> kv = cache_for(n);
  read(std::vector<int32_t>(static_cast<size_t>(n), 0), *kv);
  return kv;
}

std::vector<double> AttentionScorer::score_blocks(std::span<const int32_t> prompt,
                                                  std::span<const std::pair<int32_t, int32_t>> blocks) {
  const int32_t n = static_cast<int32_t>(prompt.size());
  mass_.assign(static_cast<size_t>(n), 0.f);
  peak_.assign(static_cast<size_t>(n), 0.f);
  std::vector<int32_t> where;
  std::vector<int32_t> piece_of(static_cast<size_t>(n), 0);  // the piece that read each middle token
  if (options_.chunk == 0 || blocks.empty()) {
    where.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) where[static_cast<size_t>(i)] = i;
    probe(prompt, where);
  } else {
    const int32_t window = std::min(options_.query_window, n), sink = std::min(kChunkSink, n - window);
    const int32_t room = options_.chunk - sink - window;
    // The pieces: as many whole blocks as fit the room, but spread evenly over as many pieces as
    // that takes, so that every piece holds nearly the same number of keys. A softmax over fewer
    // keys gives each of them more: a short last piece (up to a block against 13) would lift its
    // blocks over every other piece's.
    const int32_t nb = static_cast<int32_t>(blocks.size());
    int32_t pieces = 0;
    for (int32_t b = 0; b < nb; ++pieces) {
      const int32_t first = blocks[static_cast<size_t>(b)].first;
      for (++b; b < nb && blocks[static_cast<size_t>(b)].second - first <= room; ++b) {
      }
    }
    std::vector<int32_t> tokens;
    std::fill(piece_of.begin(), piece_of.end(), -1);  // the sink and the tail: read by none
    for (int32_t p = 0; p < pieces; ++p) {
      const size_t b0 = static_cast<size_t>(static_cast<int64_t>(nb) * p / pieces),
                   b1 = static_cast<size_t>(static_cast<int64_t>(nb) * (p + 1) / pieces);
      tokens.assign(prompt.begin(), prompt.begin() + sink);
      where.assign(static_cast<size_t>(sink), -1);
      // A block longer than the room alone is cut to it.
      const int32_t first = blocks[b0].first, last = std::min(blocks[b1 - 1].second, first + room);
      for (int32_t i = first; i < last; ++i) {
        tokens.push_back(prompt[static_cast<size_t>(i)]);
        where.push_back(i);
        piece_of[static_cast<size_t>(i)] = p;
      }
      tokens.insert(tokens.end(), prompt.end() - window, prompt.end());
      where.resize(tokens.size(), -1);
      probe(tokens, where);
    }
  }
  // Attention on a token that recurs all over the prompt says little about where it is: each
  // token's peak is weighted by its rarity in the prompt, counted as the pair of it and the token
  // before it. The heads that find a needle are induction heads (in the demo drafter, layer 1's
  // head 0 carries all of it: pflash_bench --explain, one head at a time): a query row attends to
  // the token after an earlier occurrence of its own token, so what such a head picks is a pair.
  // Read in pieces, the peak is also put back on the scale of one softmax over the whole prompt:
  // a row that finds a pair k times in the prompt would share its probability k ways there, but
  // each piece's copies (c of them) share it only c ways; the peak is scaled by c / k. (The
  // filler before the question recurs in the middle, and its rows, copying it, put nearly all
  // their probability on the same pair in every piece: the Brightwater needle lost to them.)
  std::unordered_map<uint64_t, int32_t> count, in_piece;
  auto pair_of = [&](int32_t i) {
    const uint32_t before = i > 0 ? static_cast<uint32_t>(prompt[static_cast<size_t>(i - 1)]) : ~0u;
    return static_cast<uint64_t>(before) << 32 | static_cast<uint32_t>(prompt[static_cast<size_t>(i)]);
  };
  // The pair and the piece that read it (a hash key; a collision only merges two counts).
  auto in_piece_key = [&](int32_t i) {
    return pair_of(i) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(piece_of[static_cast<size_t>(i)]);
  };
  for (int32_t i = 0; i < n; ++i) ++count[pair_of(i)], ++in_piece[in_piece_key(i)];
  for (int32_t i = 0; i < n; ++i) {
    const double k = count[pair_of(i)], c = in_piece[in_piece_key(i)];
    peak_[static_cast<size_t>(i)] *= static_cast<float>(std::log(1.0 + n / k) * c / k);
  }
  // A block scores by the mean of its kTopTokens best tokens.
  std::vector<float> top;
  auto top_mean = [&](const std::vector<float>& values, int32_t begin, int32_t end) {
    top.assign(values.begin() + begin, values.begin() + end);
    const size_t k = std::min(top.size(), static_cast<size_t>(kTopTokens));
    std::partial_sort(top.begin(), top.begin() + static_cast<long>(k), top.end(), std::greater<float>());
    double sum = 0;
    for (size_t i = 0; i < k; ++i) sum += top[i];
    return sum / static_cast<double>(std::max<size_t>(1, k));
  };
  // What a fact says follows what names it ("the code for X is Y"): the question attends to X,
  // and the answer is the tokens after it, which may lie in the next block. A block's tokens also
  // carry the attention of the block-length span before the block, fading linearly with the
  // distance, and the block scores by the better of its own tokens and what they carry.
  const int32_t span = blocks.empty() ? 0 : blocks.front().second - blocks.front().first;
  std::vector<float> carried(static_cast<size_t>(n), 0.f);
  std::vector<double> scores;
  scores.reserve(blocks.size());
  for (const auto& [begin, end] : blocks) {
    for (int32_t i = begin; i < end; ++i)
      for (int32_t j = std::max(0, i - span + 1); j < begin; ++j)
        carried[static_cast<size_t>(i)] =
            std::max(carried[static_cast<size_t>(i)],
                     peak_[static_cast<size_t>(j)] * (1.f - static_cast<float>(i - j) / static_cast<float>(span)));
    scores.push_back(std::max(top_mean(peak_, begin, end), top_mean(carried, begin, end)));
  }
  // A sentence that crosses a block boundary is wanted whole: a block next to a strong one
  // gains half of its neighbour's score.
  std::vector<double> smoothed(scores);
  for (size_t b = 0; b < scores.size(); ++b) {
    const double left = b > 0 ? scores[b - 1] : 0.0, right = b + 1 < scores.size() ? scores[b + 1] : 0.0;
    smoothed[b] += 0.5 * std::max(left, right);
  }
  return smoothed;
}

}  // namespace tachyon::engine
