// AVX-512 attention of (row, KV head) items: the same floating-point operations per output as
// attend_item (cpu/attention_rows.h), organised for 16-lane registers. Compiled with
// -mavx512f -mavx512bw -mavx512vl -mfma; only called when the CPU has AVX-512F/BW.
//  - Scores: one register holds the 8 canonical dot lanes (cpu/dot.h) of two query heads for
//    one key (each key half-row is broadcast to both halves), so each lane is the canonical
//    sequential fma chain; 8 keys' registers are then summed in the canonical tree
//    ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) by shuffles, 16 scores at a time.
//  - The max, the canonical exp and the V accumulation are lane-wise over keys or dimensions,
//    in the scalar code's order; the softmax denominators stay sequential sums in key order.
// The portable/AVX2 attend_item was ~5 GFLOP/s (one 8-lane dependent chain per key, a scalar
// exp, a slot division per key per pass); attention was the larger part of a verify row's cost.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/kv_decode_avx512.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/top_two_row.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int kKeys = 8;  // keys per score block: 8 registers of two heads' lanes → 16 scores

// The canonical 8-lane sum of 16 dot products: acc[p] holds in its low half the lanes of
// (head a, key p) and in its high half those of (head b, key p). Returns the sums as
// [head a keys 0..7, head b keys 0..7].
inline __m512 reduce_pairs(const __m512 acc[kKeys]) {
  // s_l = l_l + l_{l+4}: the two 128-bit quarters of each half. Virtual item v = 2p + half.
  __m512 s[4];
  for (int p = 0; p < 4; ++p) {
    const __m512 a = acc[2 * p], b = acc[2 * p + 1];
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));  // quarter q: item 4p + q
  }
  // t0 = s0 + s2, t1 = s1 + s3; quarter q of t[0]: items q, 4 + q; of t[1]: items 8 + q, 12 + q.
  __m512 t[2];
  for (int p = 0; p < 2; ++p)
    t[p] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // r = t0 + t1; lane 4q + e holds item q + 4e.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Output lane m < 8 is item 2m (head a, key m), lane 8 + m item 2m + 1 (head b, key m).
  const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm512_permutexvar_ps(order, r);
}

// Scores of NP head pairs × 8 keys. qq + 16 (pair · d8 + c): both heads' dims [8c, 8c + 8).
template <int NP>
inline void score_block(const float* qq, int64_t d8, const float* const* kp, __m512 out[NP]) {
  __m512 acc[NP][kKeys];
  for (int p = 0; p < NP; ++p)
    for (int j = 0; j < kKeys; ++j) acc[p][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d8; ++c) {
    __m512 q[NP];
    for (int p = 0; p < NP; ++p) q[p] = _mm512_loadu_ps(qq + 16 * (p * d8 + c));
    for (int j = 0; j < kKeys; ++j) {
      const __m512 k = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(kp[j] + 8 * c))));
      for (int p = 0; p < NP; ++p) acc[p][j] = _mm512_fmadd_ps(q[p], k, acc[p][j]);
    }
  }
  for (int p = 0; p < NP; ++p) out[p] = reduce_pairs(acc[p]);
}

// exp_canonical (cpu/dot.h) on 16 lanes, operation for operation.
inline __m512 exp16(__m512 x) {
  const __m512 lim = _mm512_set1_ps(-87.f);
  const __m512 xc = _mm512_max_ps(lim, x);  // std::max(x, −87): x unless x < −87
  const __m512 big = _mm512_set1_ps(12582912.f);
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), big), big);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187045e-6f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 v = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lim, _CMP_NLT_UQ), v);  // 0 where x < −87
}

// Software prefetch, kPrefetchKeys keys ahead of the loops over keys. One head's rows are not
// contiguous in the cache: the slots are token-major (an f32 slot holds every KV head, a coded
// record sits between the other heads' records of its token), so consecutive keys are 1-4 KiB
// apart and the L2 streamer, which stays inside a 4 KiB page, fetched none of them ahead: at 8k
// context every key row was a DRAM round trip, and attention ran at a fifth of its in-cache rate.
// Into L2 (prefetcht1), 32 keys ahead: prefetches into L1 waited on L1's few miss buffers (the
// prefetch instructions themselves were a third of the cycles), and a decode step at 8k context
// (kv_decode_bench, bf16 KV, 2 threads, AMD EPYC VM) took 118 ms against 59-67 ms this way.
constexpr int64_t kPrefetchKeys = 32;
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}, end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t line = first; line < end; line += 64) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

// A score_block pair's 16 lanes (heads ha and hb = ha + 1 over 8 keys) finished as attend_item
// does: the canonical tail past the last 8-lane step, the scale, then each head's 8 scores into its
// row of `s` (stride apart) at key j0.
inline void store_score_pair(__m512 r, const float* q0, const float* const* kp, int64_t ha, int64_t g, int64_t d,
                             int64_t d8, __m512 scale, float* s, int64_t stride, int64_t j0) {
  const int64_t hb = ha + 1;
  if (d % 8 != 0) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, r);
    for (int m = 0; m < 16; ++m) {
      const float* q = q0 + (m < 8 ? ha : std::min(hb, g - 1)) * d;
      const float* k = kp[m % 8];
      for (int64_t t = 8 * d8; t < d; ++t) lanes[m] = std::fma(q[t], k[t], lanes[m]);
    }
    r = _mm512_load_ps(lanes);
  }
  r = _mm512_mul_ps(r, scale);
  _mm256_storeu_ps(s + ha * stride + j0, _mm512_castps512_ps256(r));
  if (hb < g) _mm256_storeu_ps(s + hb * stride + j0, _mm512_castps512_ps256(_mm512_shuffle_f32x4(r, r, _MM_SHUFFLE(3, 2, 3, 2))));
}

// One head's scores in place: softcap, then exp(s - max) with the max over the scores and the
// sink (order-free), as attend_item does. Returns the max for the sink's own term.
inline float shifted_exp_row(float* sh, int64_t n, float softcap, const float* sink) {
  if (softcap > 0)
    for (int64_t j = 0; j < n; ++j) sh[j] = softcap * std::tanh(sh[j] / softcap);
  const float lowest = -std::numeric_limits<float>::infinity();
  __m512 m = _mm512_set1_ps(sink ? *sink : lowest);
  for (int64_t j = 0; j < n; j += 16)
    m = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(lowest), tail_mask(n - j), sh + j), m);
  const float mx = _mm512_reduce_max_ps(m);
  const __m512 vmx = _mm512_set1_ps(mx);
  for (int64_t j = 0; j < n; j += 16) _mm512_storeu_ps(sh + j, exp16(_mm512_sub_ps(_mm512_loadu_ps(sh + j), vmx)));
  return mx;
}

// out[h] = Σ_j s[h][j] · v_j (from +0, or from acc_in[h] when given, in key order, multiply then
// add), times inv[h] when given, for HB heads and the dimensions [c0, c0 + 64) ∩ [0, d). A sum
// continued from acc_in over the next keys is the same chain as one pass over all of them.
template <int HB>
inline void accumulate_values(const float* s, int64_t stride, const float* const* vp, int64_t n, int64_t c0, int64_t d,
                              const float* inv, float* out, const float* acc_in = nullptr) {
  __mmask16 mask[4];
  for (int i = 0; i < 4; ++i) mask[i] = c0 + 16 * i < d ? tail_mask(d - c0 - 16 * i) : __mmask16(0);
  __m512 acc[HB][4];
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < 4; ++i)
      acc[h][i] = acc_in ? _mm512_maskz_loadu_ps(mask[i], acc_in + h * d + c0 + 16 * i) : _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    __m512 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm512_maskz_loadu_ps(mask[i], vp[j] + c0 + 16 * i);
    for (int h = 0; h < HB; ++h) {
      const __m512 p = _mm512_set1_ps(s[h * stride + j]);
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm512_add_ps(acc[h][i], _mm512_mul_ps(p, v[i]));
    }
  }
  for (int h = 0; h < HB; ++h) {
    const __m512 scale = _mm512_set1_ps(inv ? inv[h] : 1.f);
    for (int i = 0; i < 4; ++i)
      _mm512_mask_storeu_ps(out + h * d + c0 + 16 * i, mask[i], inv ? _mm512_mul_ps(acc[h][i], scale) : acc[h][i]);
  }
}

inline void accumulate_heads(int hb, const float* s, int64_t stride, const float* const* vp, int64_t n, int64_t c0,
                             int64_t d, const float* inv, float* out, const float* acc_in) {
  if (hb == 4) accumulate_values<4>(s, stride, vp, n, c0, d, inv, out, acc_in);
  else if (hb == 3) accumulate_values<3>(s, stride, vp, n, c0, d, inv, out, acc_in);
  else if (hb == 2) accumulate_values<2>(s, stride, vp, n, c0, d, inv, out, acc_in);
  else accumulate_values<1>(s, stride, vp, n, c0, d, inv, out, acc_in);
}

constexpr int kValueTile = 32;  // quantized values decoded per pass (32 · head_dim floats of L1)

// Where one key's K and V records sit (codes, params), found once per key: the kernel then
// decodes without recomputing block offsets.
struct KeyRecords {
  const uint8_t *k_codes, *k_params, *v_codes, *v_params;
};

struct Scratch {
  std::vector<const float*> kp, vp;  // [n rounded up to kKeys] key / value rows (the tail repeats the last)
  std::vector<KeyRecords> records;   // other formats: [n] each key's K and V records
  std::vector<float> kdec, vdec;     // quantized formats: [kKeys, d] keys, [kValueTile, d] values decoded
  std::vector<float> acc;            // quantized formats: [group, d] value sums between tiles
  std::vector<float> kall, vall;     // shared rows over other formats: [n, d] keys, values decoded once
  std::vector<const float*> row_kp, row_vp;  // shared tree rows: [rows, span] each row's own keys, values
  std::vector<float> row_kdec, row_vdec;     // ... decoded (other formats): [rows, span, d]
  std::vector<float> rotated;        // turbo: [group, d] the rotated query heads
  std::vector<float> qq;             // [pairs, d8, 16] two heads' query dims [8c, 8c + 8) side by side
  std::vector<float> s;              // [group, stride] scores, then probabilities
  std::vector<float> mx, inv;        // [group]
};

// The K and V records of (slot, head): block slot / block_size, record slot % block_size · heads + head.
inline KeyRecords key_records(const AttentionItem& it, const KvTensorLayout& kl, const KvTensorLayout& vl, int64_t slot) {
  const int64_t block = slot / kl.block_size, rec = slot % kl.block_size * kl.heads + it.kv_head;
  const auto* k = static_cast<const uint8_t*>(it.kv->k) + block * kl.block_bytes;
  const auto* v = static_cast<const uint8_t*>(it.kv->v) + block * vl.block_bytes;
  return {k + rec * kl.code_bytes, k + kl.params_offset + rec * kl.param_bytes, v + rec * vl.code_bytes,
          v + vl.params_offset + rec * vl.param_bytes};
}

void attend_item_avx512(const AttentionItem& it, Scratch& sc) {
  const int64_t d = it.kv->head_dim, width = it.kv->num_kv_heads * d, n = it.pos - it.lo + 1, g = it.group;
  const int64_t d8 = d / 8, stride = (n + 15) / 16 * 16, pairs = (g + 1) / 2;
  // f32 caches are read in place; other formats are decoded a tile of keys (or values) at a time.
  const bool direct = it.kv->format == KvFormat::F32;
  const KvTensorLayout kl = it.kv->k_layout(), vl = it.kv->v_layout();
  if (direct) {
    sc.kp.resize(static_cast<size_t>(stride));
    sc.vp.resize(static_cast<size_t>(stride));
  } else {
    sc.records.resize(static_cast<size_t>(n));
    sc.kdec.resize(static_cast<size_t>(kKeys * d));
    sc.vdec.resize(static_cast<size_t>(kValueTile * d));
  }
  for (int64_t j = 0; j < (direct ? stride : n); ++j) {
    const int64_t slot = item_slot(it, it.lo + static_cast<int32_t>(std::min(j, n - 1)));
    if (direct) {
      sc.kp[j] = it.kv->k_f32() + slot * width + it.kv_head * d;
      sc.vp[j] = it.kv->v_f32() + slot * width + it.kv_head * d;
    } else {
      sc.records[j] = key_records(it, kl, vl, slot);
    }
  }
  const float* q0 = item_queries(it, sc.rotated);  // turbo: rotated like the stored keys
  sc.qq.resize(static_cast<size_t>(pairs * std::max<int64_t>(d8, 1) * 16));
  for (int64_t p = 0; p < pairs; ++p) {
    const float* qa = q0 + 2 * p * d;
    const float* qb = q0 + std::min(2 * p + 1, g - 1) * d;  // an odd group repeats its last head
    for (int64_t c = 0; c < d8; ++c) {
      std::copy(qa + 8 * c, qa + 8 * c + 8, sc.qq.data() + 16 * (p * d8 + c));
      std::copy(qb + 8 * c, qb + 8 * c + 8, sc.qq.data() + 16 * (p * d8 + c) + 8);
    }
  }
  sc.s.resize(static_cast<size_t>(g * stride));
  float* s = sc.s.data();

  // Scores, 8 keys × up to 3 head pairs per pass (24 accumulators).
  const __m512 scale = _mm512_set1_ps(it.scale);
  for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
    for (int64_t j = j0 + kPrefetchKeys; j < std::min(j0 + kPrefetchKeys + kKeys, n); ++j) {
      if (direct) {
        prefetch_bytes(sc.kp[j], d * 4);
      } else {
        prefetch_bytes(sc.records[j].k_codes, kl.code_bytes);
        prefetch_bytes(sc.records[j].k_params, kl.param_bytes);
      }
    }
    const float* decoded[kKeys];
    if (!direct) {
      for (int j = 0; j < kKeys; ++j) {
        if (j0 + j < n) {
          const KeyRecords& r = sc.records[j0 + j];
          decode_kv_avx512(kl.codec, r.k_codes, r.k_params, d, sc.kdec.data() + j * d);
          decoded[j] = sc.kdec.data() + j * d;
        } else {
          decoded[j] = decoded[j - 1];  // past the last key: repeat it (as kp does)
        }
      }
    }
    const float* const* kp = direct ? sc.kp.data() + j0 : decoded;
    for (int64_t p0 = 0; p0 < pairs; p0 += 3) {
      const int np = static_cast<int>(std::min<int64_t>(3, pairs - p0));
      __m512 r[3];
      const float* qq = sc.qq.data() + 16 * p0 * d8;
      if (np == 3) score_block<3>(qq, d8, kp, r);
      else if (np == 2) score_block<2>(qq, d8, kp, r);
      else score_block<1>(qq, d8, kp, r);
      for (int p = 0; p < np; ++p) store_score_pair(r[p], q0, kp, 2 * (p0 + p), g, d, d8, scale, s, stride, j0);
    }
  }

  // Softmax numerators (softcap and max as attend_item; the max is order-free), then the
  // denominators as sequential sums in key order, four heads' chains interleaved.
  sc.mx.resize(static_cast<size_t>(g));
  sc.inv.resize(static_cast<size_t>(g));
  for (int64_t h = 0; h < g; ++h)
    sc.mx[h] = shifted_exp_row(s + h * stride, n, it.softcap, it.sinks ? it.sinks + h : nullptr);
  for (int64_t h0 = 0; h0 < g; h0 += 4) {
    const float* r[4];
    float sum[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t h = std::min(h0 + i, g - 1);
      r[i] = s + h * stride;
      sum[i] = it.sinks ? exp_canonical(it.sinks[h] - sc.mx[h]) : 0.f;
    }
    float a0 = sum[0], a1 = sum[1], a2 = sum[2], a3 = sum[3];
    for (int64_t j = 0; j < n; ++j) a0 += r[0][j], a1 += r[1][j], a2 += r[2][j], a3 += r[3][j];
    const float a[4] = {a0, a1, a2, a3};
    for (int i = 0; i < 4 && h0 + i < g; ++i) sc.inv[h0 + i] = 1.f / a[i];
  }

  // Values: a tile of kValueTile keys at a time (read in place, or decoded once), summed for every
  // head and dimension while it is in L1 (up to 4 heads × 64 dimensions per pass), the sums
  // carried between tiles in sc.acc (the same per-lane chains), scaled at the end. (Passes over
  // all the keys per 64 dimensions read every value row from memory once per pass.)
  sc.acc.assign(static_cast<size_t>(g * d), 0.f);
  const float* vtile[kValueTile];
  for (int64_t t0 = 0; t0 < n; t0 += kValueTile) {
    const int64_t nt = std::min<int64_t>(kValueTile, n - t0);
    for (int64_t j = 0; j < nt; ++j) {
      if (t0 + j + kPrefetchKeys < n) {
        if (direct) {
          prefetch_bytes(sc.vp[t0 + j + kPrefetchKeys], d * 4);
        } else {
          const KeyRecords& ahead = sc.records[t0 + j + kPrefetchKeys];
          prefetch_bytes(ahead.v_codes, vl.code_bytes);
          prefetch_bytes(ahead.v_params, vl.param_bytes);
        }
      }
      if (direct) {
        vtile[j] = sc.vp[t0 + j];
      } else {
        const KeyRecords& r = sc.records[t0 + j];
        decode_kv_avx512(vl.codec, r.v_codes, r.v_params, d, sc.vdec.data() + j * d);
        vtile[j] = sc.vdec.data() + j * d;
      }
    }
    for (int64_t h0 = 0; h0 < g; h0 += 4) {
      const int hb = static_cast<int>(std::min<int64_t>(4, g - h0));
      float* acc = sc.acc.data() + h0 * d;
      for (int64_t c0 = 0; c0 < d; c0 += 64)
        accumulate_heads(hb, s + h0 * stride + t0, stride, vtile, nt, c0, d, nullptr, acc, acc);
    }
  }
  for (int64_t h = 0; h < g; ++h)
    for (int64_t i = 0; i < d; ++i) it.out[h * d + i] = sc.acc[h * d + i] * sc.inv[h];
}

// Rows of one KV head attended together: each 8-key block's keys are loaded from L2 once and
// reread from L1 by every pass of 3 (row, head pair) score registers (24 accumulators).
constexpr size_t kSharedRows = 16;  // prefill_attention_bench, one thread: 6 rows 0.61, 12 0.54, 16 0.53, 24 0.57 CPU-s
std::atomic<int64_t> shared_rows_run{0};

// Keys a shared pass over a cache in another format than f32 decodes up front ([n, d] keys and
// values, 4 MiB at head_dim 64): longer rows are attended one at a time, decoding in tiles.
constexpr int64_t kMaxDecodedKeys = 8192;

// Whether items a and b can share one pass: the same KV head and block table, the same first
// key, the same tree (or none), and the same attention parameters; a cache in f32 (read in
// place) or in a format whose keys decode as they are (not turbo, whose queries are rotated), at
// most kMaxDecodedKeys keys.
bool can_share(const AttentionItem& a, const AttentionItem& b) {
  const bool shareable_format =
      a.kv->format == KvFormat::F32 ||
      (!kv_format_rotates_keys(a.kv->format) && std::max(a.pos, b.pos) - a.lo < kMaxDecodedKeys);
  return a.kv == b.kv && shareable_format && a.table == b.table && a.kv_head == b.kv_head &&
         a.group == b.group && a.lo == b.lo && a.scale == b.scale && a.softcap == b.softcap && a.sinks == b.sinks &&
         a.tree_base == b.tree_base;
}

// Where row `it`'s keys j in [first, end) sit (key j: position lo + min(j, last)), as pointers
// from kp / vp on: read in place (f32), or decoded into kbuf / vbuf ([end - first, d]).
void row_key_pointers(const AttentionItem& it, int64_t first, int64_t end, int64_t last, const float** kp,
                      const float** vp, float* kbuf, float* vbuf) {
  const int64_t d = it.kv->head_dim, width = it.kv->num_kv_heads * d;
  const KvTensorLayout kl = it.kv->k_layout(), vl = it.kv->v_layout();
  for (int64_t j = first; j < end; ++j) {
    const int64_t slot = item_slot(it, it.lo + static_cast<int32_t>(std::min(j, last)));
    const int64_t i = j - first;
    if (it.kv->format != KvFormat::F32 && j + kPrefetchKeys <= last) {
      const KeyRecords ahead =
          key_records(it, kl, vl, item_slot(it, it.lo + static_cast<int32_t>(j + kPrefetchKeys)));
      prefetch_bytes(ahead.k_codes, kl.code_bytes);
      prefetch_bytes(ahead.k_params, kl.param_bytes);
      prefetch_bytes(ahead.v_codes, vl.code_bytes);
      prefetch_bytes(ahead.v_params, vl.param_bytes);
    }
    if (it.kv->format == KvFormat::F32) {
      kp[i] = it.kv->k_f32() + slot * width + it.kv_head * d;
      vp[i] = it.kv->v_f32() + slot * width + it.kv_head * d;
    } else if (j > last && i > 0) {  // past the row's last key: repeat it
      kp[i] = kp[i - 1];
      vp[i] = vp[i - 1];
    } else {
      const KeyRecords r = key_records(it, kl, vl, slot);
      decode_kv_avx512(kl.codec, r.k_codes, r.k_params, d, kbuf + i * d);
      decode_kv_avx512(vl.codec, r.v_codes, r.v_params, d, vbuf + i * d);
      kp[i] = kbuf + i * d;
      vp[i] = vbuf + i * d;
    }
  }
}

// Several rows of one sequence and KV head (prompt rows, verify rows, a draft tree's rows), each
// key and value vector read (and, in another format than f32, decoded) once for all of them. Per
// row, every score, exp, denominator and value sum is the operation sequence of
// attend_item_avx512 (each lane's chain is its own; a key past a row's last is computed in
// lanes the row never reads, and the value sums run over the rows' common keys, then each row's
// own last keys continue them: the same chain), so the bits are those of one row at a time.
// Tree rows share the keys before their tree's base; the keys from there on (each row's own
// path) are scored and summed per row.
void attend_rows_avx512(const AttentionItem* items, size_t rows, Scratch& sc) {
  const AttentionItem& it0 = items[0];
  const int64_t d = it0.kv->head_dim, g = it0.group, d8 = d / 8;
  const int64_t pairs = (g + 1) / 2, combos = static_cast<int64_t>(rows) * pairs;
  int64_t n_max = 0, n_min = INT64_MAX;
  for (size_t r = 0; r < rows; ++r) {
    n_max = std::max<int64_t>(n_max, items[r].pos - items[r].lo + 1);
    n_min = std::min<int64_t>(n_min, items[r].pos - items[r].lo + 1);
  }
  // Keys [0, shared_end) are scored in shared passes (every row reads them at the same slots);
  // a tree's rows score the keys from the last 8-key block boundary before its base on per row.
  const bool tree = it0.tree_base >= 0;
  const int64_t n_common = tree ? std::clamp<int64_t>(it0.tree_base - it0.lo, 0, n_min) : n_min;
  const int64_t shared_end = tree ? n_common / kKeys * kKeys : n_max;
  const int64_t row_first = std::min(shared_end, n_common);  // per-row pointers from here (trees)
  const int64_t stride = (n_max + 15) / 16 * 16;
  const int64_t shared_keys = tree ? n_common : n_max;
  sc.kp.resize(static_cast<size_t>(stride));
  sc.vp.resize(static_cast<size_t>(stride));
  if (shared_keys > 0) {
    if (it0.kv->format != KvFormat::F32) {
      sc.kall.resize(static_cast<size_t>(shared_keys * d));
      sc.vall.resize(static_cast<size_t>(shared_keys * d));
    }
    row_key_pointers(it0, 0, stride, shared_keys - 1, sc.kp.data(), sc.vp.data(), sc.kall.data(), sc.vall.data());
  }
  // Tree rows: each row's own pointers for its keys [row_first, its end rounded up to 8 keys).
  const int64_t row_span = stride - row_first;
  if (tree) {
    sc.row_kp.resize(static_cast<size_t>(static_cast<int64_t>(rows) * row_span));
    sc.row_vp.resize(sc.row_kp.size());
    if (it0.kv->format != KvFormat::F32) {
      sc.row_kdec.resize(static_cast<size_t>(static_cast<int64_t>(rows) * row_span * d));
      sc.row_vdec.resize(sc.row_kdec.size());
    }
    for (size_t r = 0; r < rows; ++r) {
      const int64_t n = items[r].pos - items[r].lo + 1, o = static_cast<int64_t>(r) * row_span;
      row_key_pointers(items[r], row_first, stride, n - 1, sc.row_kp.data() + o, sc.row_vp.data() + o,
                       sc.row_kdec.data() + o * d, sc.row_vdec.data() + o * d);
    }
  }
  // Query pairs of every row, combo c = row · pairs + pair.
  sc.qq.resize(static_cast<size_t>(combos * std::max<int64_t>(d8, 1) * 16));
  for (size_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < pairs; ++p) {
      const float* qa = items[r].q + 2 * p * d;
      const float* qb = items[r].q + std::min(2 * p + 1, g - 1) * d;
      float* dst = sc.qq.data() + 16 * ((static_cast<int64_t>(r) * pairs + p) * d8);
      for (int64_t c = 0; c < d8; ++c) {
        std::copy(qa + 8 * c, qa + 8 * c + 8, dst + 16 * c);
        std::copy(qb + 8 * c, qb + 8 * c + 8, dst + 16 * c + 8);
      }
    }
  // Scores [row · g + head, stride].
  sc.s.resize(static_cast<size_t>(static_cast<int64_t>(rows) * g * stride));
  float* s = sc.s.data();
  const __m512 scale = _mm512_set1_ps(it0.scale);
  // Scores of np combos from c0 on against the 8 keys kp (from key j0), stored per row and head.
  auto score_combos = [&](int64_t c0, int np, const float* const* kp, int64_t j0) {
    __m512 r[3];
    const float* qq = sc.qq.data() + 16 * c0 * d8;
    if (np == 3) score_block<3>(qq, d8, kp, r);
    else if (np == 2) score_block<2>(qq, d8, kp, r);
    else score_block<1>(qq, d8, kp, r);
    for (int p = 0; p < np; ++p) {
      const int64_t row = (c0 + p) / pairs, pair = (c0 + p) % pairs;
      store_score_pair(r[p], items[row].q, kp, 2 * pair, g, d, d8, scale, s + row * g * stride, stride, j0);
    }
  };
  const bool in_place = it0.kv->format == KvFormat::F32;  // else decoded above, in order
  for (int64_t j0 = 0; j0 < shared_end; j0 += kKeys) {
    if (in_place)
      for (int64_t j = j0 + kPrefetchKeys; j < std::min(j0 + kPrefetchKeys + kKeys, shared_end); ++j)
        prefetch_bytes(sc.kp[j], d * 4);
    for (int64_t c0 = 0; c0 < combos; c0 += 3)
      score_combos(c0, static_cast<int>(std::min<int64_t>(3, combos - c0)), sc.kp.data() + j0, j0);
  }
  if (tree)
    for (size_t r = 0; r < rows; ++r) {
      const int64_t n = items[r].pos - items[r].lo + 1, c_first = static_cast<int64_t>(r) * pairs;
      const float* const* kp = sc.row_kp.data() + static_cast<int64_t>(r) * row_span - row_first;
      for (int64_t j0 = shared_end; j0 < n; j0 += kKeys)
        for (int64_t c0 = c_first; c0 < c_first + pairs; c0 += 3)
          score_combos(c0, static_cast<int>(std::min<int64_t>(3, c_first + pairs - c0)), kp + j0, j0);
    }
  // Softmax per row over its own keys, as attend_item_avx512.
  const int64_t heads = static_cast<int64_t>(rows) * g;
  sc.mx.resize(static_cast<size_t>(heads));
  sc.inv.resize(static_cast<size_t>(heads));
  for (int64_t hh = 0; hh < heads; ++hh) {
    const AttentionItem& it = items[hh / g];
    const int64_t h = hh % g, n = it.pos - it.lo + 1;
    float* sh = s + hh * stride;
    const float mx = shifted_exp_row(sh, n, it.softcap, it.sinks ? it.sinks + h : nullptr);
    sc.mx[hh] = mx;
  }
  // The denominators: each a sequential sum in key order over its own row's keys, eight chains
  // interleaved over the keys all of them have (one chain alone waits on each add's latency),
  // then each continues alone over its remaining keys.
  for (int64_t h0 = 0; h0 < heads; h0 += 8) {
    const int64_t nh = std::min<int64_t>(8, heads - h0);
    float sum[8];
    int64_t len[8], common = INT64_MAX;
    for (int64_t i = 0; i < nh; ++i) {
      const AttentionItem& it = items[(h0 + i) / g];
      const int64_t h = (h0 + i) % g;
      sum[i] = it.sinks ? exp_canonical(it.sinks[h] - sc.mx[h0 + i]) : 0.f;
      len[i] = it.pos - it.lo + 1;
      common = std::min(common, len[i]);
    }
    if (nh == 8) {
      const float* r[8];
      for (int i = 0; i < 8; ++i) r[i] = s + (h0 + i) * stride;
      float a0 = sum[0], a1 = sum[1], a2 = sum[2], a3 = sum[3], a4 = sum[4], a5 = sum[5], a6 = sum[6], a7 = sum[7];
      for (int64_t j = 0; j < common; ++j) {
        a0 += r[0][j], a1 += r[1][j], a2 += r[2][j], a3 += r[3][j];
        a4 += r[4][j], a5 += r[5][j], a6 += r[6][j], a7 += r[7][j];
      }
      const float a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
      for (int i = 0; i < 8; ++i) sum[i] = a[i];
    } else {
      common = 0;
    }
    for (int64_t i = 0; i < nh; ++i) {
      const float* r = s + (h0 + i) * stride;
      float a = sum[i];
      for (int64_t j = common; j < len[i]; ++j) a += r[j];
      sc.inv[h0 + i] = 1.f / a;
    }
  }
  // Values: the common keys for every (row, head) four at a time, unscaled into sc.acc; then each
  // row's own last keys continue its sums and the scale is applied.
  sc.acc.resize(static_cast<size_t>(heads * d));
  // A tile of kValueTile keys at a time (its values stay in L1 for every pass), six (row, head)
  // sums per pass (24 accumulators), then four at a time; the sums continue from sc.acc between
  // tiles (the same chains).
  for (int64_t t0 = 0; t0 < n_common; t0 += kValueTile) {
    const int64_t nt = std::min<int64_t>(kValueTile, n_common - t0);
    const float* acc_in = t0 > 0 ? sc.acc.data() : nullptr;
    const float* const* vt = sc.vp.data() + t0;
    if (in_place)  // the next tile's rows, while this one is summed
      for (int64_t j = t0 + kValueTile; j < std::min(t0 + 2 * kValueTile, n_common); ++j) prefetch_bytes(sc.vp[j], d * 4);
    int64_t h0 = 0;
    for (; h0 + 6 <= heads; h0 += 6)
      for (int64_t c0 = 0; c0 < d; c0 += 64)
        accumulate_values<6>(s + h0 * stride + t0, stride, vt, nt, c0, d, nullptr, sc.acc.data() + h0 * d,
                             acc_in ? acc_in + h0 * d : nullptr);
    for (; h0 < heads; h0 += 4) {
      const int hb = static_cast<int>(std::min<int64_t>(4, heads - h0));
      for (int64_t c0 = 0; c0 < d; c0 += 64)
        accumulate_heads(hb, s + h0 * stride + t0, stride, vt, nt, c0, d, nullptr, sc.acc.data() + h0 * d,
                         acc_in ? acc_in + h0 * d : nullptr);
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    const AttentionItem& it = items[r];
    const int64_t n = it.pos - it.lo + 1, row_head = static_cast<int64_t>(r) * g;
    const float* const* vp = tree ? sc.row_vp.data() + static_cast<int64_t>(r) * row_span + (n_common - row_first)
                                  : sc.vp.data() + n_common;
    for (int64_t h0 = 0; h0 < g; h0 += 4) {
      const int hb = static_cast<int>(std::min<int64_t>(4, g - h0));
      for (int64_t c0 = 0; c0 < d; c0 += 64)
        accumulate_heads(hb, s + (row_head + h0) * stride + n_common, stride, vp, n - n_common, c0, d,
                         sc.inv.data() + row_head + h0, it.out + h0 * d,
                         n_common > 0 ? sc.acc.data() + (row_head + h0) * d : nullptr);
    }
  }
  shared_rows_run.fetch_add(static_cast<int64_t>(rows), std::memory_order_relaxed);
}

}  // namespace

void attend_items_avx512(const AttentionItem* items, size_t count) {
  thread_local Scratch scratch;
  for (size_t i = 0; i < count;) {
    size_t rows = 1;
    while (rows < kSharedRows && i + rows < count && can_share(items[i], items[i + rows])) ++rows;
    if (rows > 1) attend_rows_avx512(items + i, rows, scratch);
    else attend_item_avx512(items[i], scratch);
    i += rows;
  }
}

int64_t attention_shared_rows_run() { return shared_rows_run.load(std::memory_order_relaxed); }

TopTwo top_two_row_avx512(const float* row, int64_t n) { return top_two_row(row, n); }

}  // namespace tachyon::kernels::cpu
