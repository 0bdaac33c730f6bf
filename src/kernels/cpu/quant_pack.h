// Repacking of quantized weights (kernels/weight.h formats) into the CPU backend's Panel64
// layout for quantized formats (documented in kernels/weight.h next to Panel64): codes k-major
// per 64-output panel, scales and biases per (panel, group) with the panel's 64 outputs
// contiguous, so a decode GEMV streams each panel's bytes once, in order.
#pragma once

#include <cstddef>

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
// per row (its row scales). Same conventions as above.
QuantPanelBytes quant_panel64_dot_bytes(const Weight& row_major);
Weight pack_quant_panel64_dot(const Weight& row_major, void* codes, void* scales, void* biases);

}  // namespace tachyon::kernels::cpu
