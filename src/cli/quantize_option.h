// `--quantize int8|int4|fp8` of serve, run, chat, logits and info: quantize the model's matmul
// weights at load (kernels/quantize.h says what each format is).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/model.h"

namespace tachyon::cli {

void add_quantize_option(CLI::App& command, std::string& value);
// The load options for a --quantize value ("" = none).
model::LoadOptions load_options_for(const std::string& quantize);

}  // namespace tachyon::cli
