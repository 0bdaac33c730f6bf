#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace tachyon::model {

namespace {

std::vector<double> default_inv_freq(double base, int64_t dim) {
  std::vector<double> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), exponent in float32
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[i] = 1.0 / std::pow(base, static_cast<double>(exponent));
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

kernels::RopeTable make_rope_table(const io::RopeParams& p, int64_t head_dim, int64_t max_position_embeddings,
                                   int64_t seq_len) {
  kernels::RopeTable table;
  const int64_t dim = static_cast<int64_t>(static_cast<double>(head_dim) * p.partial_rotary_factor);
  table.rotary_dim = dim;
  std::vector<double> inv = default_inv_freq(p.rope_theta, dim);
  const double original_max =
      static_cast<double>(p.original_max_position_embeddings.value_or(max_position_embeddings));

  if (p.rope_type == "default" || p.rope_type == "proportional") {
  } else if (p.rope_type == "linear") {
    for (double& f : inv) f /= p.factor;
  } else if (p.rope_type == "dynamic") {
    const double max_pos = static_cast<double>(max_position_embeddings);
    if (static_cast<double>(seq_len) > max_pos) {
      const double base = p.rope_theta * std::pow(p.factor * static_cast<double>(seq_len) / max_pos - (p.factor - 1),
                                                   static_cast<double>(dim) / static_cast<double>(dim - 2));
      inv = default_inv_freq(base, dim);
    }
  } else if (p.rope_type == "llama3") {
    const double low_wavelen = original_max / p.low_freq_factor, high_wavelen = original_max / p.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2 * std::numbers::pi / f;
      double scaled = wavelen > low_wavelen ? f / p.factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const double smooth = (original_max / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        scaled = (1 - smooth) * scaled / p.factor + smooth * scaled;
      }
      f = scaled;
    }
  } else if (p.rope_type == "yarn") {
    double attention_factor;
    if (p.attention_factor) attention_factor = *p.attention_factor;
    else if (p.mscale && p.mscale_all_dim)
      attention_factor = yarn_mscale(p.factor, *p.mscale) / yarn_mscale(p.factor, *p.mscale_all_dim);
    else attention_factor = yarn_mscale(p.factor, 1.0);
    auto correction_dim = [&](double rotations) {
      return (static_cast<double>(dim) * std::log(original_max / (rotations * 2 * std::numbers::pi))) /
             (2 * std::log(p.rope_theta));
    };
    double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
    if (p.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double pos_freq = 1.0 / inv[i];
      const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (p.factor * pos_freq);
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1.0 - ramp;
      inv[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    table.attention_scaling = static_cast<float>(attention_factor);
  } else {
    throw Error("rope_type '{}' is not supported yet", p.rope_type);
  }
  table.inv_freq.assign(inv.begin(), inv.end());
  return table;
}

}  // namespace tachyon::model
