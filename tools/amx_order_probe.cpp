// Which f32 reduction an AMX-BF16 tile multiply (TDPBF16PS) computes, against the CPU backend's
// canonical chain (kernels/cpu/dot.h: one sequential fma chain over k per output) and other
// orders a vector kernel could reproduce. The CPU backend may only use an instruction whose
// result some portable code can give bit for bit (batch invariance across ISAs); this probe
// measures whether AMX is one. Build and run on a CPU with AMX (Sapphire Rapids or later):
//   g++ -O2 -march=sapphirerapids tools/amx_order_probe.cpp -o /tmp/amx_order_probe && /tmp/amx_order_probe
// Prints, per candidate order, how many of the 256 outputs of a 16x16 tile (K = 256) it matches,
// for normal-range inputs and for inputs spread over many binades.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

namespace {

constexpr int M = 16, N = 16, K = 256;
constexpr long kArchReqXcompPerm = 0x1023, kXfeatureTileData = 18;

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void probe(const char* label, double spread) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0, 1);
  static uint16_t a[M][K], w[N][K], b[K / 2][N * 2];
  for (auto& row : a)
    for (auto& x : row) x = to_bf16(normal(gen) * std::exp(normal(gen) * static_cast<float>(spread)));
  for (auto& row : w)
    for (auto& x : row) x = to_bf16(normal(gen) * std::exp(normal(gen) * static_cast<float>(spread)));
  for (int r = 0; r < K / 2; ++r)  // B in VNNI pairs: row r holds (w[n][2r], w[n][2r+1]) for each n
    for (int n = 0; n < N; ++n) b[r][2 * n] = w[n][2 * r], b[r][2 * n + 1] = w[n][2 * r + 1];
  TileConfig config;
  for (int t = 0; t < 3; ++t) config.rows[t] = 16, config.colsb[t] = 64;
  _tile_loadconfig(&config);
  float c[M][N] = {};
  _tile_loadd(0, c, 64);
  for (int kb = 0; kb < K; kb += 32) {
    _tile_loadd(1, &a[0][kb], K * 2);
    _tile_loadd(2, &b[kb / 2][0], N * 4);
    _tile_dpbf16ps(0, 1, 2);
  }
  _tile_stored(0, c, 64);
  _tile_release();

  int chain = 0, odd_first = 0, pairs_exact = 0, blocks_exact = 0, blocks_chained = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0, r = 0, p = 0, e = 0, h = 0;
      for (int k = 0; k < K; k += 2) {
        const float a0 = from_bf16(a[m][k]), a1 = from_bf16(a[m][k + 1]);
        const float w0 = from_bf16(w[n][k]), w1 = from_bf16(w[n][k + 1]);
        s = std::fma(a1, w1, std::fma(a0, w0, s));                                 // the canonical chain
        r = std::fma(a0, w0, std::fma(a1, w1, r));                                 // odd element first
        p = static_cast<float>(p + (static_cast<double>(a0) * w0 + static_cast<double>(a1) * w1));  // pair, then add
      }
      for (int kb = 0; kb < K; kb += 32) {  // per tile step: exact block sum added once; or its own chain added
        double exact = 0;
        float chained = 0;
        for (int k = kb; k < kb + 32; ++k) {
          exact += static_cast<double>(from_bf16(a[m][k])) * from_bf16(w[n][k]);
          chained = std::fma(from_bf16(a[m][k]), from_bf16(w[n][k]), chained);
        }
        e = static_cast<float>(e + exact);
        h += chained;
      }
      chain += same_bits(s, c[m][n]);
      odd_first += same_bits(r, c[m][n]);
      pairs_exact += same_bits(p, c[m][n]);
      blocks_exact += same_bits(e, c[m][n]);
      blocks_chained += same_bits(h, c[m][n]);
    }
  std::printf("%s: of %d outputs, AMX equals: fma chain %d, odd-first chain %d, exact pairs %d, exact 32-blocks %d, "
              "chained 32-blocks %d\n",
              label, M * N, chain, odd_first, pairs_exact, blocks_exact, blocks_chained);
}

}  // namespace

int main() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) {
    std::puts("AMX tile data not permitted (no AMX on this CPU or kernel)");
    return 1;
  }
  probe("normal inputs", 0);
  probe("inputs over many binades", 3);
  return 0;
}
