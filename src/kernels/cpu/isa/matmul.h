// ISA-specific matmul and dot kernels, selected at run time by CPU features.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <type_traits>
#include <cstdint>

#include "kernels/ops.h"
#include "kernels/quantize.h"
#include "kernels/weight.h"

namespace tachyon::kernels::cpu {

// out[m, n] for m in [0, rows), n in [n_begin, n_end) (no bias); `ldo` is out's row stride.
// For Panel64 weights n_begin must be a multiple of 64. Reduction order: cpu/dot.h.
using MatmulRangeFn = void (*)(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end,
                               float* out, int64_t ldo);
using DotF32Fn = float (*)(const float* a, const float* b, int64_t k);
// One (row, KV head) of attention: the query heads sharing that KV head (cpu/attention_rows.h).
struct AttentionItem {
  const float* q;          // [group, head_dim]: the row's query heads of this KV head
  const PagedKv* kv;
  const int32_t* table;    // the row's sequence block table
  int64_t kv_head;
  int64_t group;           // query heads per KV head
  int32_t lo, pos;         // keys [lo, pos]
  float scale, softcap;
  const float* sinks;      // [group] (this KV head's), or null
  float* out;              // [group, head_dim]
  int32_t tree_base = -1;            // tree rows: logical positions >= tree_base map through tree_path
  const int32_t* tree_path = nullptr;  // [kMaxTreeDepth] (see kernels/ops.h)
};

using AttendFn = void (*)(const AttentionItem* items, size_t count);
using TopTwoFn = TopTwo (*)(const float* row, int64_t n);  // cpu/top_two_row.h

void matmul_range_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo);
float dot_f32_portable(const float* a, const float* b, int64_t k);
void attend_items_portable(const AttentionItem* items, size_t count);
TopTwo top_two_row_portable(const float* row, int64_t n);

// Quantized weights (cpu/isa/matmul_quant.h); the matmul_range functions hand them over.
// Portable: row-major or Panel64; the others: Panel64 only.
void matmul_quant_portable(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                           int64_t ldo);

#if defined(__x86_64__)
void matmul_quant_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo);
void matmul_quant_avx512(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                         int64_t ldo);
// The dense f32 tiles over one f32 panel (k steps of 64 outputs, output order), `valid` outputs
// stored: the quantized kernels' many-row path over a panel they dequantized.
void matmul_f32_panel_avx2(const float* x, int64_t rows, int64_t k, const float* panel, float* out, int64_t ldo,
                           int valid);
void matmul_f32_panel_avx512(const float* x, int64_t rows, int64_t k, const float* panel, float* out, int64_t ldo,
                             int valid);
// Panel64 weights only.
void matmul_range_avx2(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                       int64_t ldo);
float dot_f32_avx2(const float* a, const float* b, int64_t k);
void attend_items_avx2(const AttentionItem* items, size_t count);
TopTwo top_two_row_avx2(const float* row, int64_t n);
void matmul_range_avx512(const float* x, int64_t rows, const Weight& w, int64_t n_begin, int64_t n_end, float* out,
                         int64_t ldo);
// Consecutive items of one sequence's rows and KV head (same first key, f32 cache, no tree) are
// attended together, each key read once for up to 16 rows; the bits are those of one at a time.
void attend_items_avx512(const AttentionItem* items, size_t count);
// Rows that went through a shared pass in this process (tests check that the path engaged).
int64_t attention_shared_rows_run();
TopTwo top_two_row_avx512(const float* row, int64_t n);
#endif

struct IsaKernels {
  MatmulRangeFn matmul_range;
  DotF32Fn dot_f32;
  AttendFn attend;
  TopTwoFn top_two_row;
  const char* name;
};
const IsaKernels& isa_kernels();  // best for this CPU; TACHYON_ISA=avx2|portable forces a fallback

// The highest instruction set any CPU kernel may use. TACHYON_ISA lowers it (avx512: no AMX tiles;
// avx2; portable) so that tests and benches can run the fallbacks on a CPU that has more; it is
// read once, here, for every kernel family.
enum class IsaCeiling { Portable, Avx2, Avx512, Any };
IsaCeiling isa_ceiling();

// Calls fn(std::integral_constant<DType, d>{}) with a Panel64 weight's dtype d (the ISA files
// instantiate their kernels per dtype this way); aborts on another layout or dtype.
template <class Fn>
void with_panel_dtype(const Weight& w, Fn&& fn) {
  if (w.layout != WeightLayout::Panel64) std::abort();  // the CPU backend packs every matrix
  switch (w.dtype) {
    case DType::F32: return fn(std::integral_constant<DType, DType::F32>{});
    case DType::BF16: return fn(std::integral_constant<DType, DType::BF16>{});
    case DType::F16: return fn(std::integral_constant<DType, DType::F16>{});
    case DType::I8: return fn(std::integral_constant<DType, DType::I8>{});
    default: std::abort();
  }
}

// I8 weights: the kernels reduce the raw int8 values (the same sequential chains), then each
// output is multiplied by its row's scale here, so every ISA path gives the same bits.
inline void scale_i8_outputs(const Weight& w, int64_t rows, int64_t n_begin, int64_t n_end, float* out, int64_t ldo) {
  if (w.dtype != DType::I8 || !w.scales) return;
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = n_begin; n < n_end; ++n) out[m * ldo + n] *= w.scales[n];
}

// Repacks a row-major weight into Panel64 (same dtype, rows zero-padded to a multiple of 64).
// `dst` holds padded_rows(rows) · cols elements.
int64_t panel64_padded_rows(int64_t rows);
void pack_panel64(const Weight& row_major, void* dst);

// Row-major int8 of a row-major float weight (kernels/quantize.h).
using ::tachyon::kernels::quantize_rows_i8;

}  // namespace tachyon::kernels::cpu
