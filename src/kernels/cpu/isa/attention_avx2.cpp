// attend_item (cpu/attention_rows.h) compiled for AVX2 + FMA (the compiler vectorises its lane loops).
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/isa/matmul.h"

namespace tachyon::kernels::cpu {

void attend_items_avx2(const AttentionItem* items, size_t count) {
  for (size_t i = 0; i < count; ++i) attend_item(items[i]);
}

}  // namespace tachyon::kernels::cpu
