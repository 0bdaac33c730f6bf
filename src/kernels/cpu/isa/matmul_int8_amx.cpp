// AMX-INT8 int8-activation matmul (cpu/isa/matmul_int8.h) for prefill: 16 rows x 16 outputs per
// step, their f32 accumulators in 16 registers across the blocks. Per activation block (32, 64 or
// 128 columns) the tiles multiply the activations' A tile (16 rows x 32 or 64 signed bytes) by a
// B tile (8 or 16 quad rows of 16 outputs x 4 codes) into one 16x16 int32 tile with tdpbssd
// (Symmetric) or tdpbsud (Affine), exact in any order; the tile is stored once per block and each
// row's sums take the canonical float step with AVX-512, as in the VNNI kernel. A 128-column
// block costs two tile products but one store and one float step: per 32 columns the store and
// the float step, not tdpbssd, bound the kernel (docs/perf/cpu.md). Panels are widened per call
// to one signed (or, Affine, unsigned) byte per code, regrouped by 16 outputs, a few panels at a
// time. Rows past the last multiple of 16 run the VNNI tiles: the same bits.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa/matmul_int8_avx512.h"

namespace tachyon::kernels::cpu {

namespace {

constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an extended state component
constexpr int kXfeatureXtiledata = 18;     // the AMX tile data
constexpr int64_t kTileRows = 16;

struct alignas(64) TileConfig {
  uint8_t palette_id = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

std::atomic<int64_t> amx_rows{0};

// Tiles 0, 1: C, 16 x 16 int32 (alternate blocks, so that one block's products overlap the
// previous block's float step); 2, 3 and 4, 5: two A, B pairs over `width` columns (16 rows x
// width bytes; width / 4 quad rows x 64 bytes), taken in turn, so that the next loads do not
// depend on the product still reading the other pair (no gain measured here, no loss either).
// width: 32 for 32-column activation blocks, else 64.
TileConfig tile_config(int64_t width) {
  TileConfig cfg;
  cfg.palette_id = 1;
  for (int t = 0; t < 2; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  for (int t : {2, 4}) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = static_cast<uint16_t>(width);
  }
  for (int t : {3, 5}) {
    cfg.rows[t] = static_cast<uint8_t>(width / 4);
    cfg.colsb[t] = 64;
  }
  return cfg;
}

// A Panel64Dot panel as one byte per code, regrouped by 16 outputs: group j holds, quad row
// after quad row, the 64 bytes of outputs [16j, 16j + 16), so that a B tile is 64-byte rows back
// to back and one group's tiles over k are one sequential stream (read in the Panel64Dot order, at
// a 256-byte stride, the tile loads waited on L2 and made the kernel several times slower than
// its tile products). Each code is the signed q (Symmetric: the stored u − z0, for tdpbssd) or
// the unsigned one (Affine, for tdpbsud), so the integer sums need no correction. 4-bit: octet
// o's low nibbles are quad 2o, its high ones 2o + 1. The buffer starts at a 64-byte boundary.
constexpr int64_t kGroupRowBytes = 64;  // one quad row of a 16-output group
template <int Bits, bool Affine>
void widen_panel(const uint8_t* codes, int64_t k, uint8_t* dst) {
  const int64_t quads = k / 4, group_bytes = quads * kGroupRowBytes;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f), z0 = _mm512_set1_epi8(Bits == 8 ? -128 : 8);
  const auto to_code = [&](__m512i u) { return Affine ? u : _mm512_sub_epi8(u, z0); };
  const auto put = [&](int64_t quad, int j, __m512i v) { _mm512_store_si512(dst + j * group_bytes + quad * kGroupRowBytes, v); };
  if constexpr (Bits == 8) {
    for (int64_t o = 0; o < quads; ++o)
      for (int j = 0; j < 4; ++j) put(o, j, to_code(_mm512_loadu_si512(codes + o * 256 + 64 * j)));
  } else {
    for (int64_t o = 0; o < k / 8; ++o)
      for (int j = 0; j < 4; ++j) {
        const __m512i raw = _mm512_loadu_si512(codes + o * 256 + 64 * j);
        put(2 * o, j, to_code(_mm512_and_si512(raw, low_nibbles)));
        put(2 * o + 1, j, to_code(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles)));
      }
  }
}

// Panels widened together (their bytes, k · 64 each, within kWidenedBytes): each row block's 16
// activation rows are then reused from L1 across them, and its outputs are written as longer
// runs of each row (one panel at a time, the stores of 16 rows x 64 outputs scattered over a
// large output were a fifth of the kernel's time).
constexpr int64_t kWidenedBytes = 512 << 10;

// One block's integer sums for 16 rows x 16 outputs into `isum` (row stride 16), in tile C (the
// tile intrinsics take literal tile numbers: one function per C): `steps` products of `width`
// columns of the activations at a (row stride lda) by the codes at b, step s through the A, B
// pair (pair + s) % 2.
#define TACHYON_AMX_PRODUCT(C, A, B)           \
  _tile_loadd(A, as, lda);                     \
  _tile_loadd(B, bs, kGroupRowBytes);          \
  if constexpr (Affine) _tile_dpbsud(C, A, B); \
  else _tile_dpbssd(C, A, B);
#define TACHYON_AMX_BLOCK_SUMS(C)                                                                          \
  template <bool Affine>                                                                                   \
  inline void block_sums_##C(const int8_t* a, int64_t lda, const uint8_t* b, int64_t width, int64_t steps, \
                             int64_t pair, int32_t* isum) {                                                \
    _tile_zero(C);                                                                                         \
    for (int64_t s = 0; s < steps; ++s) {                                                                  \
      const int8_t* as = a + s * width;                                                                    \
      const uint8_t* bs = b + s * width / 4 * kGroupRowBytes;                                              \
      if ((pair + s) % 2 == 0) {                                                                           \
        TACHYON_AMX_PRODUCT(C, 2, 3)                                                                       \
      } else {                                                                                             \
        TACHYON_AMX_PRODUCT(C, 4, 5)                                                                       \
      }                                                                                                    \
    }                                                                                                      \
    _tile_stored(C, isum, 64);                                                                             \
  }
TACHYON_AMX_BLOCK_SUMS(0)
TACHYON_AMX_BLOCK_SUMS(1)
#undef TACHYON_AMX_BLOCK_SUMS
#undef TACHYON_AMX_PRODUCT

template <int Bits, bool Affine, DType S>
void run(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  const int64_t k = w.cols, bw = a.block, blocks = k / bw, group_blocks = w.quant.group / bw;
  const int64_t tiled_rows = a.rows / kTileRows * kTileRows;
  const int64_t width = bw == kInt8Block ? kInt8Block : 64, steps = bw / width;
  const TileConfig cfg = tile_config(width);
  _tile_loadconfig(&cfg);
  thread_local std::vector<uint8_t> widened;
  const int64_t panel_bytes = k * kPanel64, group_panels = std::max<int64_t>(1, kWidenedBytes / panel_bytes);
  widened.resize(static_cast<size_t>(group_panels * panel_bytes + 64));
  uint8_t* const wide = widened.data() + (64 - reinterpret_cast<uintptr_t>(widened.data()) % 64) % 64;
  alignas(64) int32_t isum[2][kTileRows * 16];
  for (int64_t g0 = n_begin; tiled_rows > 0 && g0 < n_end; g0 += group_panels * kPanel64) {
    const int64_t g1 = std::min(n_end, g0 + group_panels * kPanel64);
    for (int64_t n0 = g0; n0 < g1; n0 += kPanel64)
      widen_panel<Bits, Affine>(static_cast<const uint8_t*>(w.data) + (n0 / kPanel64) * k * kPanel64 * Bits / 8, k,
                                wide + (n0 - g0) / kPanel64 * panel_bytes);
    for (int64_t m0 = 0; m0 < tiled_rows; m0 += kTileRows) {
      const int8_t* a0 = a.q + m0 * k;
      const float* d = a.scale + m0 * blocks;
      const float* ds = a.scaled_sum + m0 * blocks;
      for (int64_t n0 = g0; n0 < g1; n0 += kPanel64) {
        const int valid = static_cast<int>(std::min<int64_t>(kPanel64, n_end - n0));
        const uint8_t* codes = wide + (n0 - g0) / kPanel64 * panel_bytes;
        const int64_t scale_base = (n0 / kPanel64) * (k / w.quant.group) * kPanel64;
        // 16 outputs at a time, their 16 rows' accumulators in registers across every block.
        for (int j = 0; j < 4 && 16 * j < valid; ++j) {
          __m512 acc[kTileRows];
#pragma GCC unroll 16
          for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
          int64_t scale_at = scale_base + 16 * j, in_group = 0;  // the block's group scale, no division per block
          for (int64_t b = 0; b < blocks; ++b) {
            int32_t* sums = isum[b & 1];
            const uint8_t* pb = codes + j * (k / 4) * kGroupRowBytes + b * bw / 4 * kGroupRowBytes;
            if (b & 1) block_sums_1<Affine>(a0 + b * bw, k, pb, width, steps, b * steps, sums);
            else block_sums_0<Affine>(a0 + b * bw, k, pb, width, steps, b * steps, sums);
            const __m512 s = load_scales16<S>(w.quant.scales, scale_at);
#pragma GCC unroll 16
            for (int r = 0; r < kTileRows; ++r) {
              const __m512 sd = _mm512_mul_ps(s, _mm512_set1_ps(d[r * blocks + b]));
              acc[r] = _mm512_fmadd_ps(sd, _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * r)), acc[r]);
            }
            if constexpr (Affine) {
              const __m512 bias = load_scales16<S>(w.quant.biases, scale_at);
#pragma GCC unroll 16
              for (int r = 0; r < kTileRows; ++r)
                acc[r] = _mm512_fmadd_ps(bias, _mm512_set1_ps(ds[r * blocks + b]), acc[r]);
            }
            if (++in_group == group_blocks) {
              in_group = 0;
              scale_at += kPanel64;
            }
          }
          const int left = valid - 16 * j;
          const __mmask16 keep = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
          for (int r = 0; r < kTileRows; ++r) _mm512_mask_storeu_ps(out + (m0 + r) * ldo + n0 + 16 * j, keep, acc[r]);
        }
      }
    }
  }
  _tile_release();
  if (tiled_rows > 0) amx_rows.fetch_add(tiled_rows, std::memory_order_relaxed);
  if (tiled_rows < a.rows) matmul_int8_avx512(a.from(tiled_rows), w, n_begin, n_end, out + tiled_rows * ldo, ldo);
}

}  // namespace

bool amx_int8_enabled() {
  static const bool enabled = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tile = (edx & (1u << 24)) != 0, int8 = (edx & (1u << 25)) != 0;
    // The kernel must also grant this process the tile data state (Linux 5.16+).
    return tile && int8 && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return enabled;
}

int64_t amx_int8_rows_run() { return amx_rows.load(std::memory_order_relaxed); }

void matmul_int8_amx(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  if (w.layout != WeightLayout::Panel64Dot || w.quant.group % a.block != 0) std::abort();
  if (a.rows < kTileRows) return matmul_int8_avx512(a, w, n_begin, n_end, out, ldo);
  with_int8_weight_kind(w, [&](auto bits, auto affine, auto scale) {
    run<decltype(bits)::value, decltype(affine)::value, decltype(scale)::value>(a, w, n_begin, n_end, out, ldo);
  });
}

}  // namespace tachyon::kernels::cpu
