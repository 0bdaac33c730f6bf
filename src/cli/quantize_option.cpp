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

model::LoadOptions load_options_for(const std::string& quantize) {
  model::LoadOptions options;
  const auto mode = kernels::parse_quantize_mode(quantize);
  if (!mode) throw Error("--quantize {}: expected int8, int4 or fp8", quantize);
  options.quantize = *mode;
  return options;
}

}  // namespace tachyon::cli
