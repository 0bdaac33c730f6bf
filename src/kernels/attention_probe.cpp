// Backend::attention_probe on the host (the CPU and reference backends, and any backend that
// does not run it on its device): only the query rows' q and every key cross to the host (a few
// MB even for long prompts). One head per task; each head's probabilities go to its own row,
// summed over heads in a fixed order afterwards, so the result does not depend on the thread
// count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels {

void Backend::attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& o,
                              float* key_mass, float* key_peak) {
  TACHYON_CHECK(o.query_rows > 0 && o.query_rows <= rows, "attention probe: {} query rows of {}", o.query_rows, rows);
  TACHYON_CHECK(o.num_kv_heads > 0 && o.num_heads % o.num_kv_heads == 0, "attention probe: {} heads over {} KV heads",
                o.num_heads, o.num_kv_heads);
  const int64_t H = o.num_heads, KV = o.num_kv_heads, D = o.head_dim, group = H / KV;
  const int64_t queries = o.query_rows, first_query = rows - queries;
  std::vector<float> host_q(static_cast<size_t>(queries * H * D)), host_k(static_cast<size_t>(rows * KV * D));
  copy_to_host(host_q.data(), q + first_query * H * D, host_q.size() * sizeof(float));
  copy_to_host(host_k.data(), k, host_k.size() * sizeof(float));
  std::vector<float> mass(static_cast<size_t>(H * rows), 0.f), peak(static_cast<size_t>(H * rows), 0.f);
  // The CPU's vectorised dot product (cpu/dot.h's canonical order; a sequential sum waited on
  // each add and was half of the scorer's time on the CPU). The probe ranks blocks: it has no bit
  // contract with the attention kernels, only determinism.
  const cpu::DotF32Fn dot = cpu::isa_kernels().dot_f32;
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
        const float weight = o.query_weights ? o.query_weights[i] : 1.f;
        float best = -INFINITY;
        for (int64_t j = lo; j <= row; ++j) {
          const float* kv = host_k.data() + (j * KV + h / group) * D;
          float s = dot(qv, kv, D);
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
          top[j] = std::max(top[j], weight * p);
        }
      }
    }
  }, 1);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < rows; ++j) {
      const size_t at = static_cast<size_t>(h * rows + j);
      key_mass[j] += mass[at];
      if (key_peak) key_peak[j] = std::max(key_peak[j], peak[at]);
    }
}

}  // namespace tachyon::kernels
