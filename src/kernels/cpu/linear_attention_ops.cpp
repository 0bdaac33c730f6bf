// CPU causal conv1d and gated delta rule. Work items are (sequence, channel block) and
// (sequence, value head); each walks its sequence's rows in order, so a sequence's result does
// not depend on its batch-mates. The delta rule cuts a sequence's rows into pieces at chunk
// boundaries of absolute position: short pieces (decode, verification) run the recurrence row
// by row, a rank-1 update memory-bound on the [dk, dv] state; long ones (prefill) the
// chunkwise-parallel form, which reads the state once per chunk (isa/delta_rule.h).
#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/isa/delta_rule.h"
#include "kernels/reference/moe_rowwise.h"

namespace tachyon::kernels {

namespace {
ThreadPool& pool() { return ThreadPool::global(); }
constexpr int64_t kChannelBlock = 64;
// The chunk: the largest power of two <= kDeltaChunkMax dividing meta.resume_align, so every
// position a forward can resume from a block snapshot is a chunk boundary; 0 (row by row
// only) when the caller gives no alignment. Only whole chunks take the chunked form, although
// it is already faster from 2 rows (bench/kernels/delta_rule_bench): a forward of fewer rows
// than a chunk (decode, speculative verification) must keep the bits of row-by-row decoding,
// or greedy output would change with speculation.
int64_t delta_chunk_size(const RecurrentMeta& meta) {
  if (meta.resume_align <= 0 || meta.seq_first_position == nullptr) return 0;
  int64_t c = cpu::kDeltaChunkMax;
  while (meta.resume_align % c != 0) c /= 2;
  return c >= 2 ? c : 0;
}
}  // namespace

void CpuBackend::causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w,
                                    const RecurrentMeta& meta, float* state, int64_t state_stride, float* out) {
  const int64_t K = w.cols, blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  pool().parallel_for(meta.num_seqs * blocks, [&](size_t b, size_t e) {
    thread_local std::vector<float> wc;
    wc.resize(static_cast<size_t>(K));
    for (size_t item = b; item < e; ++item) {
      const int64_t s = static_cast<int64_t>(item) / blocks, c0 = (static_cast<int64_t>(item) % blocks) * kChannelBlock;
      const int64_t c1 = std::min(channels, c0 + kChannelBlock);
      float* st = state + meta.seq_state_slot[s] * state_stride;
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t i = 0; i < K; ++i) wc[i] = rowwise::load_weight(w, c, i);
        for (int64_t r = meta.seq_row_begin[s]; r < meta.seq_row_begin[s + 1]; ++r) {
          float acc = 0.f;
          for (int64_t i = 0; i < K - 1; ++i) acc = std::fma(wc[i], st[i * channels + c], acc);
          const float xc = x[r * channels + c];
          acc = std::fma(wc[K - 1], xc, acc);
          out[r * channels + c] = rowwise::silu(acc);
          for (int64_t i = 0; i + 1 < K - 1; ++i) st[i * channels + c] = st[(i + 1) * channels + c];
          if (K > 1) st[(K - 2) * channels + c] = xc;
          if (meta.row_snapshot_slot[r] >= 0) {
            float* snap = state + meta.row_snapshot_slot[r] * state_stride;
            for (int64_t i = 0; i < K - 1; ++i) snap[i * channels + c] = st[i * channels + c];
          }
        }
      }
    }
  });
}

void CpuBackend::gated_delta_rule(const float* qkv, int64_t qs, const float* ba, int64_t rows,
                                  const DeltaRuleParams& p, const RecurrentMeta& meta, float* state,
                                  int64_t state_stride, float* out) {
  const int64_t Hv = p.num_v_heads, dk = p.k_dim, dv = p.v_dim;
  const auto& isa = cpu::delta_rule_kernels();
  const int64_t chunk = delta_chunk_size(meta);
  pool().parallel_for(meta.num_seqs * Hv, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const int64_t s = static_cast<int64_t>(item) / Hv, h = static_cast<int64_t>(item) % Hv;
      float* S = state + meta.seq_state_slot[s] * state_stride + h * dk * dv;  // [dk, dv]
      cpu::DeltaPiece piece{&p, nullptr, qs, nullptr, 0, h, S, nullptr, nullptr, state, state_stride};
      const int64_t end = meta.seq_row_begin[s + 1];
      for (int64_t r = meta.seq_row_begin[s]; r < end; r += piece.n) {
        // Pieces end where absolute positions reach a multiple of the chunk: a function of the
        // sequence's own positions, never of the batch, and cut wherever a forward may resume.
        const int64_t pos = chunk > 0 ? meta.seq_first_position[s] + (r - meta.seq_row_begin[s]) : 0;
        piece.n = chunk > 0 ? std::min(end - r, chunk - pos % chunk) : end - r;
        piece.qkv = qkv + r * qs, piece.ba = ba + r * 2 * Hv, piece.out = out + r * Hv * dv + h * dv;
        piece.snapshot_slot = meta.row_snapshot_slot + r;
        (chunk > 0 && piece.n == chunk ? isa.chunked : isa.recurrent)(piece);
      }
    }
  });
}

}  // namespace tachyon::kernels
