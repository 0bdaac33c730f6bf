// ggml's tensor types repacked into the weight formats of kernels/weight.h, once, at load.
//
// Block layouts are ggml-common.h's (little-endian; `d`, `m`, `dmin` are f16). What each becomes,
// per row of `cols` values (a group is a run of columns sharing one scale / bias):
//   F32, F16, BF16  Dense, as stored (no copy).
//   Q8_0   {d, int8 q[32]}             Symmetric 8-bit g32, F16 scale d: q·d, exactly ggml's.
//   Q4_0   {d, nibbles[16]}            Symmetric 4-bit g32, F16 scale d, code q − 8: exactly ggml's.
//   Q5_0   {d, qh[4], nibbles[16]}     Symmetric 8-bit g32 (5-bit q − 16 fits int8), F16 d: exact.
//   Q4_1   {d, m, nibbles[16]}         Affine 4-bit g32, F16 scale d and bias m.
//   Q5_1   {d, m, qh[4], nibbles[16]}  Affine 8-bit g32, F16 scale d and bias m.
//   Q4_K   {d, dmin, 6-bit sc/m x 8, nibbles[128]} per 256: Affine 4-bit g32, F32 scale d·sc and
//          bias −dmin·m. F32 holds both products exactly (an f16 times a 6-bit integer needs up to
//          17 significant bits). Measured on the demo Q4_K_M file: F16 would round 93% of the
//          scales and 92% of the biases (relative error up to 4.9e-4), so F32 it is, at 2 bits per
//          weight for scale + bias (F16: 1): 6 bits per weight where the file stores 4.5.
//   Q5_K   as Q4_K with a fifth bit per value (qh[32]): Affine 8-bit g32, F32 scale and bias.
//   Q6_K   {ql[128], qh[64], int8 sc[16], d} per 256: Symmetric 8-bit g16, F32 scale d·sc (exact),
//          code q − 32.
//   MXFP4  {e8m0 e, nibbles[16]} per 32 (gpt-oss experts): Mxfp4 with the same codes and e; ggml's
//          kvalues (2·e2m1) times 2^(e − 128) are e2m1 · 2^(e − 127) exactly. e = 255 is refused.
// Host sizes per weight (file → repacked): Q8_0 8.5 → 8.5, Q4_0 4.5 → 4.5, Q4_1 5 → 5, Q5_0 5.5 → 8.5,
// Q5_1 6 → 9, Q4_K 4.5 → 6, Q5_K 5.5 → 10, Q6_K 6.56 → 10, MXFP4 4.25 → 4.25 bits: the 5- and 6-bit codes take a byte.
// Affine values are fma(q, s, b) in f32 (kernels/weight_dequant.h); ggml computes s·q − m with two
// roundings, so an Affine element may differ from ggml's dequantization by one f32 rounding of
// the product. Everything else is bit-identical to ggml's dequantize_row_*.
// Other types (Q2_K, Q3_K, IQ*, TQ*, NVFP4, ...) are refused, naming the tensor, its type and
// the supported ones. Every block's f16 scales are checked finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/sources/weight_source.h"

namespace tachyon::model {

bool ggml_type_supported(io::GgmlType type);
std::string supported_ggml_types();  // "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4"

// How `type` is held after repacking, for `info` and messages ("Symmetric 4-bit g32 F16").
std::string repacked_format_name(io::GgmlType type);

// `rows` rows of `cols` values of `type` starting at `data` (the rows are contiguous in ggml)
// as a host row-major Weight. Dense types point at `data`; quantized ones are built in
// out.owned. Throws naming `name` for an unsupported type or a non-finite block scale.
HostTensor repack_ggml_rows(io::GgmlType type, const uint8_t* data, int64_t rows, int64_t cols,
                            const std::string& name);

// The same values as Affine 8-bit codes with F32 scales and biases in groups of `group` columns
// (which must divide the tensor's group): exact for every Affine and Symmetric input (a signed
// code q becomes q + z with bias −z·s, z = 2^(bits−1) or 32 where every q is in [−32, 31], whose
// fma rounds once to f32(q·s)).
// Used when the parts of one fused weight (q/k/v, gate/up) come in different GGUF types.
HostTensor widen_to_affine8(const HostTensor& t, int32_t group);

// The same values as Dense F32 (for a fused weight mixing float and quantized parts).
HostTensor to_dense_f32(const HostTensor& t);

// Row r of the result is row perm[r] of `t` (the llama q/k rope permutation undone).
HostTensor permute_rows(const HostTensor& t, const std::vector<int64_t>& perm);

}  // namespace tachyon::model
