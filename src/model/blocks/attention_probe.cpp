#include "model/blocks/attention_probe.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/thread_pool.h"
#include "model/blocks/attention.h"

namespace tachyon::model {

void add_attention_mass(kernels::Backend& backend, const float* q, const float* k, int64_t rows,
                        const AttentionOptions& o, AttentionProbe& probe) {
  TACHYON_CHECK(probe.key_peak.empty() || static_cast<int64_t>(probe.key_peak.size()) == rows,
                "attention probe: key_peak has {} entries for {} rows", probe.key_peak.size(), rows);
  TACHYON_CHECK(static_cast<int64_t>(probe.key_mass.size()) == rows, "attention probe: key_mass has {} entries for {} rows",
                probe.key_mass.size(), rows);
  const int64_t H = o.num_heads, KV = o.num_kv_heads, D = o.head_dim, group = H / KV;
  const int64_t queries = probe.query_rows, first_query = rows - queries;
  // Only the query rows' q and every key cross to the host (a few MB even for long prompts).
  std::vector<float> host_q(static_cast<size_t>(queries * H * D)), host_k(static_cast<size_t>(rows * KV * D));
  backend.copy_to_host(host_q.data(), q + first_query * H * D, host_q.size() * sizeof(float));
  backend.copy_to_host(host_k.data(), k, host_k.size() * sizeof(float));
  // One head per task; each head's probabilities go to its own row of `mass`, summed in a fixed
  // order afterwards, so the result does not depend on the thread count.
  std::vector<float> mass(static_cast<size_t>(H * rows), 0.f), peak(static_cast<size_t>(H * rows), 0.f);
  ThreadPool::global().parallel_for(static_cast<size_t>(H), [&](size_t begin, size_t end) {
    std::vector<float> scores(static_cast<size_t>(rows));
    for (size_t head = begin; head < end; ++head) {
      const int64_t h = static_cast<int64_t>(head);
      float* out = mass.data() + h * rows;
      float* top = peak.data() + h * rows;
      for (int64_t i = 0; i < queries; ++i) {
        const int64_t row = first_query + i;
        const int64_t lo = o.sliding_window > 0 ? std::max<int64_t>(0, row - o.sliding_window + 1) : 0;
        const float* qv = host_q.data() + (i * H + h) * D;
        float best = -INFINITY;
        for (int64_t j = lo; j <= row; ++j) {
          const float* kv = host_k.data() + (j * KV + h / group) * D;
          float s = 0.f;
          for (int64_t d = 0; d < D; ++d) s += qv[d] * kv[d];
          s *= o.scale;
          if (o.softcap > 0.f) s = o.softcap * std::tanh(s / o.softcap);
          scores[static_cast<size_t>(j)] = s;
          best = std::max(best, s);
        }
        float sum = 0.f;
        for (int64_t j = lo; j <= row; ++j) {
          float& e = scores[static_cast<size_t>(j)];
          e = std::exp(e - best);
          sum += e;
        }
        for (int64_t j = lo; j <= row; ++j) {
          const float p = scores[static_cast<size_t>(j)] / sum;
          out[j] += p;
          top[j] = std::max(top[j], p);
        }
      }
    }
  }, 1);
  const bool peaks = !probe.key_peak.empty();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < rows; ++j) {
      const size_t at = static_cast<size_t>(h * rows + j);
      probe.key_mass[static_cast<size_t>(j)] += mass[at];
      if (peaks) probe.key_peak[static_cast<size_t>(j)] = std::max(probe.key_peak[static_cast<size_t>(j)], peak[at]);
    }
}

}  // namespace tachyon::model
