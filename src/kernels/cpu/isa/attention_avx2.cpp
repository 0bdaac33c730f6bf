// attend_item (cpu/attention_rows.h) compiled for AVX2 + FMA (the compiler vectorises its lane loops).
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/top_two_row.h"

namespace tachyon::kernels::cpu {

void attend_items_avx2(const AttentionItem* items, size_t count) {
  for (size_t i = 0; i < count; ++i) attend_item(items[i]);
}

TopTwo top_two_row_avx2(const float* row, int64_t n) { return top_two_row(row, n); }

}  // namespace tachyon::kernels::cpu
