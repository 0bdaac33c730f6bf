// Portable build of the gated delta rule loops, and the run-time choice between it and AVX2.
#include <cstring>

#include "kernels/cpu/isa/delta_rule_body.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels::cpu {

void delta_recurrent_portable(const DeltaPiece& piece) { recurrent_body(piece); }
void delta_chunked_portable(const DeltaPiece& piece) { chunked_body(piece, gemm_acc_portable); }

const DeltaRuleKernels& delta_rule_kernels() {
  static const DeltaRuleKernels kernels = [] {
#if defined(__x86_64__)
    if (std::strcmp(isa_kernels().name, "portable") != 0) return DeltaRuleKernels{delta_recurrent_avx2, delta_chunked_avx2};
#endif
    return DeltaRuleKernels{delta_recurrent_portable, delta_chunked_portable};
  }();
  return kernels;
}

}  // namespace tachyon::kernels::cpu
