// Pearson chi-square tests for the statistical exactness tests of speculative sampling.
#pragma once

#include <cmath>
#include <map>
#include <vector>

namespace tachyon::testing {

// Upper tail of the chi-square distribution: P(X > x) with `dof` degrees of freedom
// (regularized upper incomplete gamma Q(dof/2, x/2), series / continued fraction).
inline double chi_square_p_value(double x, double dof) {
  const double a = dof / 2, z = x / 2;
  if (z <= 0) return 1.0;
  const double log_prefix = a * std::log(z) - z - std::lgamma(a);
  if (z < a + 1) {  // series for P, then Q = 1 - P
    double sum = 1 / a, term = sum;
    for (int n = 1; n < 1000; ++n) {
      term *= z / (a + n);
      sum += term;
      if (term < sum * 1e-15) break;
    }
    return 1 - sum * std::exp(log_prefix);
  }
  double b = z + 1 - a, c = 1e300, d = 1 / b, h = d;  // Lentz continued fraction for Q
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

// Goodness of fit of observed counts to probabilities (bins with expected < 5 are pooled).
inline double goodness_of_fit_p(const std::vector<long>& observed, const std::vector<double>& probs) {
  long n = 0;
  for (long o : observed) n += o;
  double stat = 0, pooled_o = 0, pooled_e = 0;
  int bins = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 5) {
      pooled_o += observed[i];
      pooled_e += e;
      continue;
    }
    stat += (observed[i] - e) * (observed[i] - e) / e;
    ++bins;
  }
  if (pooled_e >= 5) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++bins;
  } else if (pooled_o > 0 && pooled_e == 0) {
    return 0.0;  // outcomes that should be impossible
  }
  return chi_square_p_value(stat, std::max(1, bins - 1));
}

// Two-sample test of homogeneity over categorical outcomes (bins with < 10 total pooled).
template <typename Key>
double homogeneity_p(const std::map<Key, long>& a, const std::map<Key, long>& b) {
  long na = 0, nb = 0;
  std::map<Key, std::pair<long, long>> joint;
  for (const auto& [k, v] : a) joint[k].first += v, na += v;
  for (const auto& [k, v] : b) joint[k].second += v, nb += v;
  std::vector<std::pair<long, long>> bins;
  std::pair<long, long> pooled{0, 0};
  for (const auto& [k, v] : joint) {
    if (v.first + v.second < 10) pooled.first += v.first, pooled.second += v.second;
    else bins.push_back(v);
  }
  if (pooled.first + pooled.second > 0) bins.push_back(pooled);
  double stat = 0;
  const double n = static_cast<double>(na + nb);
  for (const auto& [x, y] : bins) {
    const double total = static_cast<double>(x + y);
    const double ea = total * na / n, eb = total * nb / n;
    stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
  }
  return chi_square_p_value(stat, std::max<double>(1, static_cast<double>(bins.size()) - 1));
}

}  // namespace tachyon::testing
