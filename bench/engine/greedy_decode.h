// The engine benchmarks' decode measurement: a short prompt, then greedy single-token steps.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace tachyon::bench {

// Seconds of `tokens` greedy single-token forwards of a new sequence after one forward of
// `prompt` (not timed); mark_decode_rows: the steps' rows are marked decode rows (what the
// engine does, and what --quantize-decode's decode copy reads). The sequence is removed after.
inline double time_greedy_decode(model::Model& model, kv::KvCache& kv, std::span<const int32_t> prompt, int tokens,
                                 bool mark_decode_rows) {
  const auto seconds = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const auto first = static_cast<int32_t>(prompt.size());
  auto seq = kv.add_sequence();
  kv.reserve(seq, first);
  model::Batch batch;
  batch.add(seq, prompt, 0);
  auto out = model.forward(batch, kv);
  int32_t pos = first;
  const double t0 = seconds();
  for (int i = 0; i < tokens; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
    kv.reserve(seq, pos + 1);
    batch.clear();
    batch.add(seq, std::span<const int32_t>(&next, 1), pos++);
    if (mark_decode_rows) batch.mark_decode_rows(first);
    out = model.forward(batch, kv);
  }
  const double elapsed = seconds() - t0;
  kv.remove_sequence(seq);
  return elapsed;
}

}  // namespace tachyon::bench
