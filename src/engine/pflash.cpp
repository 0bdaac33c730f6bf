#include "engine/pflash.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace tachyon::engine {

const char* pflash_mode_name(PflashMode mode) {
  switch (mode) {
    case PflashMode::Off: return "off";
    case PflashMode::Auto: return "auto";
    case PflashMode::Always: return "always";
  }
  return "?";
}

PflashMode parse_pflash_mode(const std::string& text, const std::string& what) {
  if (text == "off") return PflashMode::Off;
  if (text == "auto") return PflashMode::Auto;
  if (text == "always") return PflashMode::Always;
  throw Error("{}: '{}' is not a PFlash mode (off, auto or always)", what, text);
}

PflashShape resolve_shape(const PflashConfig& config, const PromptScorer& scorer) {
  if (config.sink < 0 || config.tail < 0 || config.block < 0)
    throw Error("PFlash sink, tail and block sizes must not be negative (got {}, {}, {})", config.sink, config.tail,
                config.block);
  if (!(config.keep_ratio > 0.0 && config.keep_ratio <= 1.0))
    throw Error("PFlash keep ratio must be in (0, 1], got {}", config.keep_ratio);
  const PflashShape d = scorer.default_shape();
  return {config.sink > 0 ? config.sink : d.sink, config.tail > 0 ? config.tail : d.tail,
          config.block > 0 ? config.block : d.block};
}

PflashPlan plan_compression(std::span<const int32_t> prompt, const PflashConfig& config, PromptScorer& scorer) {
  PflashPlan plan;
  plan.shape = resolve_shape(config, scorer);
  const PflashShape& s = plan.shape;
  const int32_t n = static_cast<int32_t>(prompt.size());
  const int32_t budget = static_cast<int32_t>(std::floor(config.keep_ratio * n));
  const int32_t middle_begin = std::min(s.sink, n), middle_end = std::max(middle_begin, n - s.tail);
  const int32_t middle_budget = budget - middle_begin - (n - middle_end);
  if (middle_end - middle_begin <= 0 || middle_budget < std::min(s.block, middle_end - middle_begin)) {
    plan.refused = "the budget (" + std::to_string(budget) + " of " + std::to_string(n) +
                   " tokens) leaves no middle block after the sink and the tail";
    return plan;
  }
  std::vector<std::pair<int32_t, int32_t>> blocks;
  for (int32_t b = middle_begin; b < middle_end; b += s.block) blocks.emplace_back(b, std::min(b + s.block, middle_end));
  const std::vector<double> scores = scorer.score_blocks(prompt, blocks);
  TACHYON_CHECK(scores.size() == blocks.size(), "scorer {} gave {} scores for {} blocks", scorer.name(), scores.size(),
                blocks.size());
  // Best first; ties go to the later block (closer to the question).
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a > b;
  });
  // A kept block's last sentence usually runs on into the next block: the first half of a
  // dropped block after a kept one is kept too, and counts against the budget.
  const int32_t run_on = s.block / 2;
  std::vector<int32_t> take(blocks.size(), 0);  // tokens kept from the front of each block
  int32_t used = 0;
  auto size_of = [&](size_t i) { return blocks[i].second - blocks[i].first; };
  for (size_t i : order) {
    // Taking block i whole: its own tokens not yet kept, plus a run-on into the next block.
    int32_t cost = size_of(i) - take[i];
    const bool next_partial = i + 1 < blocks.size() && take[i + 1] < size_of(i + 1);
    const int32_t next_extra = next_partial ? std::max(0, std::min(run_on, size_of(i + 1)) - take[i + 1]) : 0;
    if (used + cost + next_extra > middle_budget) continue;  // a shorter (last) block may still fit
    take[i] = size_of(i);
    if (next_extra > 0) take[i + 1] += next_extra;
    used += cost + next_extra;
  }
  if (used == middle_end - middle_begin) {
    plan.refused = "the budget keeps the whole prompt";
    return plan;
  }
  for (int32_t i = 0; i < middle_begin; ++i) plan.kept.push_back(i);
  for (size_t b = 0; b < blocks.size(); ++b)
    for (int32_t i = blocks[b].first; i < blocks[b].first + take[b]; ++i) plan.kept.push_back(i);
  for (int32_t i = middle_end; i < n; ++i) plan.kept.push_back(i);
  return plan;
}

}  // namespace tachyon::engine
