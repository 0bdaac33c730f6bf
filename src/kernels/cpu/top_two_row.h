// Backend::top_two of one row on the CPU: the best and runner-up ids as top_two_of_row picks
// them (first index among equal values), their softmax probabilities from a float sum of
// exp_canonical over 16 lane accumulators (within 1e-5 of the double-precision definition; the
// probabilities only rank draft-tree branches). A draft model or MTP head scores thousands of
// ids per level: the double exp of the definition took 13% of an MTP level on the CPU.
// Compiled once per ISA file (internal linkage, see cpu/dot.h), vectorised there.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/dot.h"
#include "kernels/ops.h"

namespace tachyon::kernels::cpu {
namespace {

inline TopTwo top_two_row(const float* row, int64_t n) {
  TopTwo t = top_two_ids(row, n);
  if (t.best < 0) return t;
  const float peak = row[t.best];
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += exp_canonical(row[i + l] - peak);
  float sum = 0.f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += exp_canonical(row[i] - peak);
  t.p_best = 1.f / sum;
  if (t.second >= 0) t.p_second = exp_canonical(row[t.second] - peak) / sum;
  return t;
}

}  // namespace
}  // namespace tachyon::kernels::cpu
