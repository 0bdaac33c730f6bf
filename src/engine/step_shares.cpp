#include "engine/step_shares.h"

#include <algorithm>

namespace tachyon::engine {

namespace {
// The fit follows the last ~100 steps: batch composition and context lengths drift.
constexpr double kDecay = 0.99;
// Row counts must have varied by about a row before the slope means anything.
constexpr double kMinRowVariance = 0.25;
}  // namespace

void StepShares::record(int64_t rows, double seconds) {
  if (rows <= 0 || !(seconds > 0)) return;
  const double r = static_cast<double>(rows);
  n_ = kDecay * n_ + 1;
  r_ = kDecay * r_ + r;
  t_ = kDecay * t_ + seconds;
  rr_ = kDecay * rr_ + r * r;
  rt_ = kDecay * rt_ + r * seconds;
}

double StepShares::row_seconds() const {
  if (n_ <= 0) return 0;
  const double mean_r = r_ / n_, variance = rr_ / n_ - mean_r * mean_r;
  if (variance < kMinRowVariance) return 0;
  return std::max(0.0, (rt_ / n_ - mean_r * (t_ / n_)) / variance);
}

double StepShares::share(double seconds, int64_t rows, int64_t total_rows, size_t requests) const {
  if (requests <= 1 || total_rows <= 0) return seconds;
  // At most the whole step per row: the fixed part never goes negative.
  const double b = std::min(row_seconds(), seconds / static_cast<double>(total_rows));
  return (seconds - b * static_cast<double>(total_rows)) / static_cast<double>(requests) +
         b * static_cast<double>(rows);
}

}  // namespace tachyon::engine
