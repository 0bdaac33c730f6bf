// `--quantize int8|int4|fp8` of serve, run, chat, logits and info: quantize the model's matmul
// weights at load (kernels/quantize.h says what each format is). `--quantize-decode int8|int4` of
// serve, run, chat and info: keep them as stored for prefill rows and add the form --quantize
// would give them as a decode copy that decode and verification rows read (model::LoadOptions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/model.h"

namespace tachyon::cli {

void add_quantize_option(CLI::App& command, std::string& value);
void add_quantize_decode_option(CLI::App& command, std::string& value);
// `--int8-activations auto|on|off` of serve, run, chat, logits and info (kernels/quantize.h
// Int8ActivationMode; model::LoadOptions::int8_activations).
void add_int8_activations_option(CLI::App& command, std::string& value);
// The load options for a --quantize value, a --quantize-decode value ("" = none) and an
// --int8-activations value ("" = auto); a value outside the choices throws an Error naming its flag.
model::LoadOptions load_options_for(const std::string& quantize, const std::string& quantize_decode = "",
                                    const std::string& int8_activations = "");

}  // namespace tachyon::cli
