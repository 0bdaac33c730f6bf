// AMX-INT8 int8-activation matmul (cpu/isa/matmul_int8.h) for prefill: 16 rows x 64 outputs per
// step. Per 32-column block, tdpbsud multiplies the activations' A tile (16 rows x 32 signed
// bytes) by four B tiles (8 rows of 16 outputs x 4 k, unsigned codes: a Panel64Dot quad row is
// 256 bytes, 64 per 16 outputs, so B tiles load straight from the packed weight) into four 16x16
// int32 tiles, which are exact in any order. The tiles are stored and each block's sums take the
// canonical float step with AVX-512, as the VNNI kernel does. 4-bit panels are widened to bytes
// once per panel. Rows past the last multiple of 16 run the VNNI tiles: the same bits.
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

// Tiles 0-3: C, 16 x 16 int32; 4: A, 16 rows x 32 bytes; 5, 6: B, 8 rows (quads) x 64 bytes.
TileConfig tile_config() {
  TileConfig cfg;
  cfg.palette_id = 1;
  for (int t = 0; t < 4; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  cfg.rows[4] = 16;
  cfg.colsb[4] = static_cast<uint16_t>(kInt8Block);
  for (int t = 5; t < 7; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(kInt8Block / 4);
    cfg.colsb[t] = 64;
  }
  return cfg;
}

// A 4-bit Panel64Dot panel as 8-bit quads: octet o's low nibbles are quad 2o, its high ones 2o + 1.
void widen_panel(const uint8_t* codes, int64_t k, uint8_t* dst) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  for (int64_t o = 0; o < k / 8; ++o)
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(codes + o * 256 + 64 * j);
      _mm512_storeu_si512(dst + 2 * o * 256 + 64 * j, _mm512_and_si512(raw, low_nibbles));
      _mm512_storeu_si512(dst + (2 * o + 1) * 256 + 64 * j, _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles));
    }
}

template <int Bits, bool Affine, DType S>
void run(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  const int64_t k = w.cols, blocks = k / kInt8Block, group_blocks = w.quant.group / kInt8Block;
  const int64_t tiled_rows = a.rows / kTileRows * kTileRows;
  constexpr int32_t z0 = Affine ? 0 : (Bits == 8 ? 128 : 8);
  const TileConfig cfg = tile_config();
  _tile_loadconfig(&cfg);
  thread_local std::vector<uint8_t> widened;
  alignas(64) int32_t isum[kTileRows * kPanel64];
  alignas(64) float acc[kTileRows * kPanel64];
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanel64) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanel64, n_end - n0));
    const uint8_t* codes = static_cast<const uint8_t*>(w.data) + (n0 / kPanel64) * k * kPanel64 * Bits / 8;
    if (Bits == 4 && tiled_rows > 0) {
      widened.resize(static_cast<size_t>(k * kPanel64));
      widen_panel(codes, k, widened.data());
      codes = widened.data();
    }
    const int64_t scale_base = (n0 / kPanel64) * (k / w.quant.group) * kPanel64;
    for (int64_t m0 = 0; m0 < tiled_rows; m0 += kTileRows) {
      std::fill(acc, acc + kTileRows * kPanel64, 0.f);
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* pb = codes + b * kInt8Block * kPanel64;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_loadd(4, a.q + m0 * k + b * kInt8Block, k);
        _tile_loadd(5, pb, 256);
        _tile_dpbsud(0, 4, 5);
        _tile_loadd(6, pb + 64, 256);
        _tile_dpbsud(1, 4, 6);
        _tile_loadd(5, pb + 128, 256);
        _tile_dpbsud(2, 4, 5);
        _tile_loadd(6, pb + 192, 256);
        _tile_dpbsud(3, 4, 6);
        _tile_stored(0, isum, kPanel64 * 4);
        _tile_stored(1, isum + 16, kPanel64 * 4);
        _tile_stored(2, isum + 32, kPanel64 * 4);
        _tile_stored(3, isum + 48, kPanel64 * 4);
        const int64_t scale_at = scale_base + (b / group_blocks) * kPanel64;
        __m512 s[4], bias[4];
        for (int j = 0; j < 4; ++j) s[j] = load_scales16<S>(w.quant.scales, scale_at + 16 * j);
        if constexpr (Affine)
          for (int j = 0; j < 4; ++j) bias[j] = load_scales16<S>(w.quant.biases, scale_at + 16 * j);
        for (int64_t r = 0; r < kTileRows; ++r) {
          const int64_t at = (m0 + r) * blocks + b;
          const __m512 d = _mm512_set1_ps(a.scale[at]);
          const __m512i correction = _mm512_set1_epi32(z0 * a.sum[at]);
          for (int j = 0; j < 4; ++j) {
            float* o = acc + r * kPanel64 + 16 * j;
            const __m512i raw = _mm512_load_si512(isum + r * kPanel64 + 16 * j);
            const __m512i exact = z0 ? _mm512_sub_epi32(raw, correction) : raw;
            __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(s[j], d), _mm512_cvtepi32_ps(exact), _mm512_load_ps(o));
            if constexpr (Affine) v = _mm512_fmadd_ps(bias[j], _mm512_set1_ps(a.scaled_sum[at]), v);
            _mm512_store_ps(o, v);
          }
        }
      }
      for (int64_t r = 0; r < kTileRows; ++r) std::copy(acc + r * kPanel64, acc + r * kPanel64 + valid, out + (m0 + r) * ldo + n0);
    }
  }
  _tile_release();
  if (tiled_rows > 0) amx_rows.fetch_add(tiled_rows, std::memory_order_relaxed);
  if (tiled_rows < a.rows) matmul_int8_avx512(a.from(tiled_rows), w, n_begin, n_end, out + tiled_rows * ldo, ldo);
}

template <int Bits, bool Affine>
void by_scale(const Int8Rows& a, const Weight& w, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  switch (w.quant.scale_dtype) {
    case DType::F32: return run<Bits, Affine, DType::F32>(a, w, n_begin, n_end, out, ldo);
    case DType::F16: return run<Bits, Affine, DType::F16>(a, w, n_begin, n_end, out, ldo);
    case DType::BF16: return run<Bits, Affine, DType::BF16>(a, w, n_begin, n_end, out, ldo);
    default: std::abort();
  }
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
  if (w.layout != WeightLayout::Panel64Dot) std::abort();
  if (a.rows < kTileRows) return matmul_int8_avx512(a, w, n_begin, n_end, out, ldo);
  const bool affine = w.format == WeightFormat::Affine;
  if (w.quant.bits == 8) return affine ? by_scale<8, true>(a, w, n_begin, n_end, out, ldo)
                                       : by_scale<8, false>(a, w, n_begin, n_end, out, ldo);
  return affine ? by_scale<4, true>(a, w, n_begin, n_end, out, ldo) : by_scale<4, false>(a, w, n_begin, n_end, out, ldo);
}

}  // namespace tachyon::kernels::cpu
