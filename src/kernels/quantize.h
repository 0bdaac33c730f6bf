// Load-time quantizers (`--quantize int8|int4|fp8`) and the size and shape rules of the
// quantized formats of kernels/weight.h. Input: a row-major float weight (F32, BF16 or F16);
// output: a host weight in one of the formats, owning its bytes, ready for Backend::upload_weight.
// Every quantizer refuses a weight with a non-finite element (Error naming the element).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/weight.h"

namespace tachyon::kernels {

// Bytes of a row-major quantized weight's codes (4-bit: two per byte, rounded up).
int64_t quant_code_bytes(const Weight& w);
// Entries of its `quant.scales` (and Affine `quant.biases`).
int64_t quant_scale_count(const Weight& w);
// Throws an Error naming what is wrong when a quantized weight's parameters do not describe a
// format kernels can run (bits, group, scale dtype, missing scales or biases, cols vs group).
void check_quantized_weight(const Weight& w);

// A host weight and the buffers it points into (moving keeps the pointers valid).
struct QuantizedWeight {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;  // F32 / F16 entries as raw bytes
  std::vector<uint8_t> biases;
  Weight weight;
  QuantizedWeight() = default;
  QuantizedWeight(QuantizedWeight&&) = default;
  QuantizedWeight& operator=(QuantizedWeight&&) = default;
  QuantizedWeight(const QuantizedWeight&) = delete;
  QuantizedWeight& operator=(const QuantizedWeight&) = delete;
};

// int8 per output channel: Dense I8 with one f32 scale per row (`Weight::scales`),
// scale = max|w[r, :]| / 127, q = round-to-nearest(w / scale) (a zero row: scale 0, codes 0).
QuantizedWeight quantize_int8(const Weight& w);
// int4 Affine, `group` columns per F16 scale and bias (cols must be a multiple of group): per
// group bias = f16(min), scale = f16((max − min) / 15), q = clamp(round((w − bias) / scale), 0, 15).
QuantizedWeight quantize_int4(const Weight& w, int32_t group = 64);
// int8 Symmetric (like GGUF Q8_0), `group` columns per F16 scale (cols a multiple of group): scale =
// f16(max|w| / 127), q = round(w / scale). For weights the per-row I8 form does not serve: MoE
// experts (the grouped expert kernels read the group formats) and an embedding table that is
// also the LM head.
QuantizedWeight quantize_int8_grouped(const Weight& w, int32_t group = 64);
// FP8 Fp8Block, `block` x `block` blocks (edges may be partial): scale = max|w| / 448 (f32),
// q = e4m3(w / scale) rounded to nearest even (an all-zero block: scale 0, codes 0).
QuantizedWeight quantize_fp8(const Weight& w, int32_t block = 128);

// `--int8-activations auto|on|off`: whether matmuls over integer weight formats (Symmetric /
// Affine 4- and 8-bit, --quantize int8's rows) quantize their input rows to int8 per 32 columns
// and run integer dot products (llama.cpp's numerics; the CPU backend's Panel64Dot kernels,
// cpu/isa/matmul_int8.h). Auto: on where the checkpoint's own runtime computes that way (GGUF).
enum class Int8ActivationMode : uint8_t { Auto, On, Off };
std::optional<Int8ActivationMode> parse_int8_activation_mode(std::string_view name);  // "auto", "on", "off"
std::string_view int8_activation_mode_name(Int8ActivationMode mode);

// `--quantize`: which quantizer a float checkpoint's matmul weights go through at load.
enum class QuantizeMode : uint8_t { None, Int8, Int4, Fp8 };
// "int8", "int4", "fp8" (or "none"/""); nothing for another name.
std::optional<QuantizeMode> parse_quantize_mode(std::string_view name);
std::string_view quantize_mode_name(QuantizeMode mode);
// Whether `w` can be quantized in `mode` (a row-major dense float matrix; int4: columns a
// multiple of its group of 64); a weight that cannot stays as it is.
bool can_quantize(const Weight& w, QuantizeMode mode);
// quantize_int8 / quantize_int4 (group 64) / quantize_fp8 (blocks of 128) by mode. Throws
// tachyon::Error when !can_quantize.
QuantizedWeight quantize_weight(const Weight& w, QuantizeMode mode);

// The int8 rows of quantize_int8 into caller buffers: `q` rows·cols, `scales` rows. False (q and
// scales unspecified) when a weight is not finite (a drafter's weight then stays as stored).
bool quantize_rows_i8(const Weight& row_major, int8_t* q, float* scales);

}  // namespace tachyon::kernels
