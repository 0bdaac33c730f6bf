#include "cli/quantize_option.h"

#include "base/error.h"

namespace tachyon::cli {

void add_quantize_option(CLI::App& command, std::string& value) {
  command
      .add_option("--quantize", value,
                  "Quantize the linear layers of a float checkpoint at load: int8 (per-row), int4 (group 64 "
                  "affine) or fp8 (e4m3, 128x128 blocks)")
      ->check(CLI::IsMember({"int8", "int4", "fp8", "none"}));
}

void add_quantize_decode_option(CLI::App& command, std::string& value) {
  command
      .add_option("--quantize-decode", value,
                  "Keep a float checkpoint's linear layers for prefill and add an int8 or int4 copy (as --quantize "
                  "makes) that decode and speculative verify rows read: half or a quarter of the bytes per token")
      ->check(CLI::IsMember({"int8", "int4", "none"}));
}

void add_int8_activations_option(CLI::App& command, std::string& value) {
  command
      .add_option("--int8-activations", value,
                  "Matmuls over integer weights (GGUF Q8_0/Q4_0/..., --quantize int8|int4, int8/int4 checkpoints) "
                  "quantize their inputs to int8 per 32 values as llama.cpp does (per the weight's group up to 128 "
                  "for wider groups: --quantize int8 128, int4 64) and use integer dot products (VNNI, AMX-INT8): "
                  "auto (default: on for GGUF files), on, off. CPU backend")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

model::LoadOptions load_options_for(const std::string& quantize, const std::string& quantize_decode,
                                    const std::string& int8_activations) {
  model::LoadOptions options;
  const auto mode = kernels::parse_quantize_mode(quantize);
  if (!mode) throw Error("--quantize {}: expected int8, int4 or fp8", quantize);
  options.quantize = *mode;
  const auto decode = kernels::parse_quantize_mode(quantize_decode);
  if (!decode || *decode == kernels::QuantizeMode::Fp8)
    throw Error("--quantize-decode {}: expected int8 or int4", quantize_decode);
  options.quantize_decode = *decode;
  const auto int8 = kernels::parse_int8_activation_mode(int8_activations);
  if (!int8) throw Error("--int8-activations {}: expected auto, on or off", int8_activations);
  options.int8_activations = *int8;
  return options;
}

}  // namespace tachyon::cli
