// open_weight_source: which WeightSource reads a model: a GGUF file (or a folder holding one), else a
// directory by its config.json:
//   "quantization" / "quantization_config" with bits + group_size and no quant_method: MLX affine
//   "quantization_config.quant_method": fp8, awq, gptq, compressed-tensors, mxfp4
//   none: plain float safetensors
#include "base/error.h"
#include "model/sources/gguf_source.h"
#include "model/sources/packed_source.h"
#include "model/sources/safetensors_source.h"

namespace tachyon::model {

namespace {
constexpr const char* kSupported = "mlx (affine), fp8, awq, gptq, compressed-tensors, mxfp4";
}  // namespace

std::string quantization_method(const io::ModelConfig& config) {
  const Json& raw = config.raw;
  for (const char* key : {"quantization_config", "quantization"}) {
    if (!raw.contains(key) || !raw[key].is_object()) continue;
    const Json& q = raw[key];
    if (q.contains("quant_method")) return q["quant_method"].get<std::string>();
    if (q.contains("bits") && q.contains("group_size")) return "mlx";
  }
  return "";
}

std::shared_ptr<WeightSource> open_weight_source(const std::string& path, const io::ModelConfig& config) {
  if (auto gguf = open_gguf_source(path, config)) return gguf;  // a .gguf file, or a folder holding one
  auto checkpoint = std::make_shared<io::Checkpoint>(io::Checkpoint::open(path));
  const std::string method = quantization_method(config);
  if (method.empty()) return std::make_shared<SafetensorsSource>(std::move(checkpoint));
  const Json& raw = config.raw;
  const Json& q = raw.contains("quantization_config") && raw["quantization_config"].is_object() &&
                          (method != "mlx" || !raw.contains("quantization"))
                      ? raw["quantization_config"]
                      : raw["quantization"];
  if (method == "mlx") return open_mlx_source(std::move(checkpoint), q);
  if (method == "fp8") return open_fp8_source(std::move(checkpoint), q);
  if (method == "awq") return open_awq_source(std::move(checkpoint), q);
  if (method == "gptq") return open_gptq_source(std::move(checkpoint), q);
  if (method == "compressed-tensors") return open_compressed_tensors_source(std::move(checkpoint), q);
  if (method == "mxfp4") return open_mxfp4_source(std::move(checkpoint), q);
  throw Error("{}: quantization method {} is not supported (supported: {})", config.path, method, kSupported);
}

}  // namespace tachyon::model
