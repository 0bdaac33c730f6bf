#include "engine/embedder.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tachyon::engine {

Embedder::Embedder(model::Model& model, io::EmbeddingConfig config, int32_t max_context, int32_t tokens_per_step)
    : model_(model), config_(config), max_context_(max_context), tokens_per_step_(std::max(1, tokens_per_step)) {}

void l2_normalize(std::span<float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0) return;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * inv);
}

std::vector<float> Embedder::embed(std::span<const int32_t> ids) {
  const auto n = static_cast<int32_t>(ids.size());
  if (n == 0) throw Error("the input is empty");
  if (n > max_context_) throw Error("the input has {} tokens; this model embeds at most {}", n, max_context_);
  const int64_t vocab = model_.config().vocab_size, hidden = dimensions();
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) throw Error("token id {} is outside the vocabulary of {} tokens", id, vocab);

  std::lock_guard lock(mutex_);
  const int32_t block_size = 16;
  kv::KvCache kv(model_.backend(), model_.kv_layout((n + block_size - 1) / block_size, block_size));
  const kv::SeqId seq = kv.add_sequence();
  if (!kv.reserve(seq, n)) throw Error("no KV blocks for an input of {} tokens", n);

  // Rows the pooling reads: every row (mean), the first (cls) or the last (last token).
  std::vector<double> sum(static_cast<size_t>(hidden), 0.0);
  std::vector<float> out(static_cast<size_t>(hidden), 0.f);
  for (int32_t begin = 0; begin < n; begin += tokens_per_step_) {
    const int32_t count = std::min(tokens_per_step_, n - begin);
    model::Batch batch;
    batch.add(seq, ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), begin, model::LogitRows::None);
    batch.hidden_after_final_norm = true;
    const bool last_chunk = begin + count == n;
    switch (config_.pooling) {
      case io::Pooling::Mean:
        for (int32_t r = 0; r < count; ++r) batch.hidden_rows.push_back(r);
        break;
      case io::Pooling::Cls:
        if (begin == 0) batch.hidden_rows.push_back(0);
        break;
      case io::Pooling::LastToken:
        if (last_chunk) batch.hidden_rows.push_back(count - 1);
        break;
    }
    const model::StepOutput step = model_.forward(batch, kv);
    if (config_.pooling == io::Pooling::Mean) {
      for (int32_t r = 0; r < count; ++r)
        for (int64_t d = 0; d < hidden; ++d) sum[static_cast<size_t>(d)] += step.hidden[static_cast<size_t>(r * hidden + d)];
    } else if (!batch.hidden_rows.empty()) {
      std::copy_n(step.hidden.begin(), hidden, out.begin());
    }
  }
  if (config_.pooling == io::Pooling::Mean)
    for (int64_t d = 0; d < hidden; ++d) out[static_cast<size_t>(d)] = static_cast<float>(sum[static_cast<size_t>(d)] / n);
  if (config_.normalize) l2_normalize(out);
  return out;
}

}  // namespace tachyon::engine
