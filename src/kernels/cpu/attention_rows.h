// The CPU attention of one (row, KV head) item: all query heads that share the KV head at
// once, so each key and value vector is read once per group instead of once per head.
// Written as plain C++ in the canonical order of cpu/dot.h (8-lane dot, canonical exp,
// scores summed in key order, values accumulated with separate multiply and add); each ISA
// file compiles it with its own flags (the compiler vectorises the lane loops, never
// reassociates), so every ISA path gives the same bits for any batch or thread split.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/ops.h"

namespace tachyon::kernels::cpu {

// Internal linkage: compiled once per ISA file (see dot.h).
namespace {

inline int64_t item_slot(const AttentionItem& it, int32_t p) {
  if (it.tree_base >= 0 && p >= it.tree_base) p = it.tree_base + it.tree_path[p - it.tree_base];
  const int32_t block = it.kv->block_size;
  return static_cast<int64_t>(it.table[p / block]) * block + p % block;
}

inline void attend_item(const AttentionItem& it) {
  const int64_t d = it.kv->head_dim, width = it.kv->num_kv_heads * d, n = it.pos - it.lo + 1;
  thread_local std::vector<float> scores;  // [group, n]
  scores.resize(static_cast<size_t>(it.group * n));
  std::vector<float>& s = scores;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = item_slot(it, it.lo + static_cast<int32_t>(j));
    const float* kj = it.kv->k + slot * width + it.kv_head * d;
    for (int64_t h = 0; h < it.group; ++h) s[h * n + j] = dot_canonical(it.q + h * d, kj, d) * it.scale;
  }
  thread_local std::vector<float> inv;  // [group] 1 / softmax denominator (no allocation per item)
  inv.resize(static_cast<size_t>(it.group));
  for (int64_t h = 0; h < it.group; ++h) {
    float* sh = s.data() + h * n;
    if (it.softcap > 0)
      for (int64_t j = 0; j < n; ++j) sh[j] = it.softcap * std::tanh(sh[j] / it.softcap);
    float mx = it.sinks ? it.sinks[h] : -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, sh[j]);
    for (int64_t j = 0; j < n; ++j) sh[j] = exp_canonical(sh[j] - mx);
    float sum = it.sinks ? exp_canonical(it.sinks[h] - mx) : 0.f;
    for (int64_t j = 0; j < n; ++j) sum += sh[j];
    inv[static_cast<size_t>(h)] = 1.f / sum;
  }
  std::fill(it.out, it.out + it.group * d, 0.f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = item_slot(it, it.lo + static_cast<int32_t>(j));
    const float* vj = it.kv->v + slot * width + it.kv_head * d;
    for (int64_t h = 0; h < it.group; ++h) {
      const float pj = s[h * n + j];
      float* oh = it.out + h * d;
      for (int64_t i = 0; i < d; ++i) oh[i] += pj * vj[i];
    }
  }
  for (int64_t h = 0; h < it.group; ++h)
    for (int64_t i = 0; i < d; ++i) it.out[h * d + i] *= inv[static_cast<size_t>(h)];
}

}  // namespace
}  // namespace tachyon::kernels::cpu
