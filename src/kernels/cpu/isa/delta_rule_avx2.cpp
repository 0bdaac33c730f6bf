// AVX2/FMA build of the gated delta rule loops (isa/delta_rule_body.h, vectorised by the
// compiler) with a register-tiled gemm_acc: a 4 x 16 tile of C stays in 8 registers while
// the i loop streams A and B. Each element is still one in-order fma chain over i, so the
// bits equal gemm_acc_portable's.
#include <immintrin.h>

#include "kernels/cpu/isa/delta_rule_body.h"

namespace tachyon::kernels::cpu {
namespace {

void gemm_acc_avx2(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc) {
  constexpr int64_t MR = 4, NR = 16;
  const int64_t m_full = m / MR * MR, n_full = n / NR * NR;
  for (int64_t r = 0; r < m_full; r += MR) {
    for (int64_t j = 0; j < n_full; j += NR) {
      __m256 c[MR][2];
      for (int64_t x = 0; x < MR; ++x)
        c[x][0] = _mm256_loadu_ps(C + (r + x) * ldc + j), c[x][1] = _mm256_loadu_ps(C + (r + x) * ldc + j + 8);
      for (int64_t i = 0; i < k; ++i) {
        const __m256 b0 = _mm256_loadu_ps(B + i * ldb + j), b1 = _mm256_loadu_ps(B + i * ldb + j + 8);
        for (int64_t x = 0; x < MR; ++x) {
          const __m256 a = _mm256_broadcast_ss(A + (r + x) * lda + i);
          c[x][0] = _mm256_fmadd_ps(a, b0, c[x][0]);
          c[x][1] = _mm256_fmadd_ps(a, b1, c[x][1]);
        }
      }
      for (int64_t x = 0; x < MR; ++x)
        _mm256_storeu_ps(C + (r + x) * ldc + j, c[x][0]), _mm256_storeu_ps(C + (r + x) * ldc + j + 8, c[x][1]);
    }
    if (n_full < n) gemm_acc_portable(MR, n - n_full, k, A + r * lda, lda, B + n_full, ldb, C + r * ldc + n_full, ldc);
  }
  if (m_full < m) gemm_acc_portable(m - m_full, n, k, A + m_full * lda, lda, B, ldb, C + m_full * ldc, ldc);
}

}  // namespace

void delta_recurrent_avx2(const DeltaPiece& piece) { recurrent_body(piece); }
void delta_chunked_avx2(const DeltaPiece& piece) { chunked_body(piece, gemm_acc_avx2); }

}  // namespace tachyon::kernels::cpu
