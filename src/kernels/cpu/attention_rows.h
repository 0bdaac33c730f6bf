// The CPU attention of one (row, KV head) item: all query heads that share the KV head at
// once, so each key and value vector is read once per group instead of once per head.
// Written as plain C++ in the canonical order of cpu/dot.h (8-lane dot, canonical exp,
// scores summed in key order, values accumulated with separate multiply and add); each ISA
// file compiles it with its own flags (the compiler vectorises the lane loops, never
// reassociates), so every ISA path gives the same bits for any batch or thread split.
// Quantized KV formats are decoded one head vector at a time into a small scratch
// (kernels/kv_quant.h's values), so the arithmetic after the decode is the f32 kernel's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/ops.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels::cpu {

// Internal linkage: compiled once per ISA file (see dot.h).
namespace {

inline int64_t item_slot(const AttentionItem& it, int32_t p) {
  if (it.tree_base >= 0 && p >= it.tree_base) p = it.tree_base + it.tree_path[p - it.tree_base];
  const int32_t block = it.kv->block_size;
  return static_cast<int64_t>(it.table[p / block]) * block + p % block;
}

// The item's query heads as the keys see them: turbo keys are stored rotated (kv_quant.h
// turbo_rotate), so the queries are rotated the same way; other formats read q as it is.
inline const float* item_queries(const AttentionItem& it, std::vector<float>& scratch) {
  if (!kv_format_rotates_keys(it.kv->format)) return it.q;
  const int64_t d = it.kv->head_dim;
  scratch.resize(static_cast<size_t>(it.group * d));
  for (int64_t h = 0; h < it.group; ++h) turbo_rotate(it.q + h * d, d, scratch.data() + h * d);
  return scratch.data();
}

inline void attend_item(const AttentionItem& it) {
  const int64_t d = it.kv->head_dim, n = it.pos - it.lo + 1;
  const KvTensorLayout kl = it.kv->k_layout(), vl = it.kv->v_layout();
  thread_local std::vector<float> scores, rotated, kbuf, vbuf;  // scores [group, n]; decode scratch [d]
  scores.resize(static_cast<size_t>(it.group * n));
  kbuf.resize(static_cast<size_t>(d));
  vbuf.resize(static_cast<size_t>(d));
  std::vector<float>& s = scores;
  const float* q = item_queries(it, rotated);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = item_slot(it, it.lo + static_cast<int32_t>(j));
    const float* kj = rowwise::read_kv_head(kl, it.kv->k, slot, it.kv_head, d, kbuf.data());
    for (int64_t h = 0; h < it.group; ++h) s[h * n + j] = dot_canonical(q + h * d, kj, d) * it.scale;
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
    const float* vj = rowwise::read_kv_head(vl, it.kv->v, slot, it.kv_head, d, vbuf.data());
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
