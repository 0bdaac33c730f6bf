// Repacking of quantized weights (kernels/weight.h formats) into the CPU backend's Panel64
// layout for quantized formats (documented in kernels/weight.h next to Panel64): codes k-major
// per 64-output panel, scales and biases per (panel, group) with the panel's 64 outputs
// contiguous, so a decode GEMV streams each panel's bytes once, in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/weight.h"

namespace tachyon::kernels::cpu {

struct QuantPanelBytes {
  size_t codes = 0, scales = 0, biases = 0;  // biases: Affine only, else 0
};
// Buffer sizes of the Panel64 repacking of a row-major quantized weight.
QuantPanelBytes quant_panel64_bytes(const Weight& row_major);
// Repacks a row-major quantized weight into the given buffers (sizes from quant_panel64_bytes)
// and returns the packed view: same format, bits and group; Fp8Block's block scales become one
// F32 per (panel, block column, output). Padding rows get code 0 and scale 0.
Weight pack_quant_panel64(const Weight& row_major, void* codes, void* scales, void* biases);

// The int8-activation mode's Panel64Dot (kernels/weight.h) of a weight that int8_dot_eligible
// accepts (cpu/isa/matmul_int8.h). A Dense I8 weight becomes Symmetric 8-bit with one F32 group
// per row (its row scales). Same conventions as above. The compact forms are taken wherever they
// hold the same values: 8-bit codes that fit 6 bits become 6-bit codes (GGUF Q6_K, Q5_K, Q5_0,
// Q5_1 and their widened mixes: 6 instead of 8 bits per weight), and F32 scales and biases that
// are int8 multiples of one factor per row and 256 columns (K-quants' d·sc, dmin·m: checked bit
// for bit per span, else the matrix keeps F32) become int8 multipliers and F32 factors (Q4_K:
// 4.75 instead of 6 bits per weight; Q6_K: 6.6 instead of 10).
QuantPanelBytes quant_panel64_dot_bytes(const Weight& row_major);
Weight pack_quant_panel64_dot(const Weight& row_major, void* codes, void* scales, void* biases);
// The same in two steps, deciding the form once (the two calls above each decide it: a scan of
// every code and scale): the form, its buffer sizes, and the factored scales if it has them.
struct PanelDotPlan {
  Weight form;  // the packed weight without its buffers
  QuantPanelBytes bytes;
  std::vector<int8_t> scale_multipliers, bias_multipliers;  // row-major, as the host's scales
  std::vector<float> scale_factors, bias_factors;           // [rows, cols / 256]
};
PanelDotPlan plan_panel64_dot(const Weight& row_major);
Weight pack_planned_panel64_dot(const PanelDotPlan& plan, const Weight& row_major, void* codes, void* scales,
                               void* biases);

// A standard Panel64Dot copy (4- or 8-bit codes, scales as stored or F32 for factored ones) of
// the panels holding outputs [n_begin, n_end) (n_begin a multiple of 64) of a compact weight,
// for kernels that read only the standard forms (AMX tiles). The view's row 0 is output n_begin;
// its buffers live in `buffers` (grow-only, reused).
struct StandardPanels {
  std::vector<uint8_t> codes, scales, biases;
};
Weight expand_panel64_dot(const Weight& compact, int64_t n_begin, int64_t n_end, StandardPanels& buffers);

}  // namespace tachyon::kernels::cpu
