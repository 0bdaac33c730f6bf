// Exponential moving average of measured costs and rates, started at the first sample (the
// engine's step costs, auto-k's per-count averages, the payoff gate's measurements).
#pragma once

namespace tachyon::spec {

// ema = sample when nothing was measured yet (0), else (1 - weight)·ema + weight·sample.
inline void ema_update(double& ema, double sample, double weight) {
  ema = ema == 0 ? sample : (1 - weight) * ema + weight * sample;
}

}  // namespace tachyon::spec
