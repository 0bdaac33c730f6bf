#include "kernels/cpu/tf32_chunk_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels::cpu {

namespace {
constexpr int32_t kChunkKeys = 64;  // kernels/cuda/attention_chunk.cuh
}  // namespace

float round_to_tf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;  // not inf or NaN
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

namespace {
template <float (*round_operand)(float)>
void attention_chunks(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                      const AttentionParams& p, float* out) {
  const int64_t D = kv.head_dim, heads = p.num_heads, group = heads / kv.num_kv_heads;
  ThreadPool::global().parallel_for(static_cast<size_t>(rows * heads), [&](size_t begin, size_t end) {
    std::vector<float> qr(D), scores(kChunkKeys), o(D), acc(D), kbuf(D), vbuf(D);
    const KvTensorLayout kl = kv.k_layout(), vl = kv.v_layout();
    for (size_t item = begin; item < end; ++item) {
      const int64_t r = static_cast<int64_t>(item) / heads, h = static_cast<int64_t>(item) % heads;
      const int64_t kvh = h / group;
      const int32_t pos = meta.positions[r];
      const int32_t lo = p.sliding_window > 0 ? std::max<int32_t>(0, pos - static_cast<int32_t>(p.sliding_window) + 1) : 0;
      const int32_t* table = meta.block_tables + meta.block_table_offsets[meta.row_seq[r]];
      // The key's or value's stored values (kernels/kv_quant.h), decoded per head vector.
      auto row_of = [&](const KvTensorLayout& t, const void* cache, int32_t key, float* scratch) {
        const int32_t at = kv_position(meta, r, key);
        const int64_t slot = static_cast<int64_t>(table[at / kv.block_size]) * kv.block_size + at % kv.block_size;
        return rowwise::read_kv_head(t, cache, slot, kvh, D, scratch);
      };
      const float* qh = q + (r * heads + h) * D;
      if (kv_format_rotates_keys(kv.format)) {  // turbo keys live in the rotated space
        turbo_rotate(qh, D, qr.data());
        qh = qr.data();
      }
      for (int64_t i = 0; i < D; ++i) qr[i] = round_operand(qh[i]);
      float M = -std::numeric_limits<float>::infinity(), L = 0.f;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int32_t c0 = lo / kChunkKeys * kChunkKeys; c0 <= pos; c0 += kChunkKeys) {
        const int32_t kb = std::max(lo, c0), ke = std::min(pos, c0 + kChunkKeys - 1);
        float m = -std::numeric_limits<float>::infinity();
        for (int32_t j = kb; j <= ke; ++j) {
          const float* k = row_of(kl, kv.k, j, kbuf.data());
          float dot = 0.f;
          for (int64_t i = 0; i < D; ++i) dot += qr[i] * round_operand(k[i]);
          float score = dot * p.scale;
          if (p.softcap > 0.f) score = p.softcap * std::tanh(score / p.softcap);
          scores[j - c0] = score;
          m = std::max(m, score);
        }
        float l = 0.f;
        std::fill(o.begin(), o.end(), 0.f);
        for (int32_t j = kb; j <= ke; ++j) {
          const float pj = round_operand(std::exp(scores[j - c0] - m));
          l += pj;
          const float* v = row_of(vl, kv.v, j, vbuf.data());
          for (int64_t i = 0; i < D; ++i) o[i] += pj * round_operand(v[i]);
        }
        const float mn = std::max(M, m), fo = std::exp(M - mn), fn = std::exp(m - mn);
        L = std::fma(l, fn, L * fo);
        for (int64_t i = 0; i < D; ++i) acc[i] = std::fma(o[i], fn, acc[i] * fo);
        M = mn;
      }
      float rescale = 1.f;
      if (p.sinks) {
        const float sink = p.sinks[h], m_f = std::max(M, sink);
        rescale = std::exp(M - m_f);
        L = L * rescale + std::exp(sink - m_f);
      }
      const float inv = 1.f / L;
      for (int64_t i = 0; i < D; ++i) out[(r * heads + h) * D + i] = acc[i] * rescale * inv;
    }
  }, 1);
}

}  // namespace

float round_attention_operand(float v, AttentionOperands format) {
  return format == AttentionOperands::kTf32 ? round_to_tf32(v) : round_to_bf16(v);
}

void attention_tf32_chunks(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                           const AttentionParams& p, float* out, AttentionOperands operands) {
  if (operands == AttentionOperands::kTf32) attention_chunks<round_to_tf32>(q, rows, kv, meta, p, out);
  else attention_chunks<round_to_bf16>(q, rows, kv, meta, p, out);
}

}  // namespace tachyon::kernels::cpu
