// Fail-closed loading of quantized checkpoints: a missing scale, a wrong group size, a shape
// mismatch or an unsupported method refuses the load with a message naming the tensor (or the
// method and the supported ones).
#include <gtest/gtest.h>

#include "base/error.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "quant_fixture.h"

namespace tachyon::testing {
namespace {

std::string load_error(const std::string& dir) {
  auto backend = kernels::make_backend("reference");
  try {
    model::load_model(dir, *backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

void drop(std::vector<io::TensorToWrite>& t, const std::string& name) {
  const size_t before = t.size();
  std::erase_if(t, [&](const auto& x) { return x.name == name; });
  ASSERT_EQ(t.size() + 1, before) << name << " is not in the fixture";
}

// Replaces `name`'s shape (same data pointer, fewer elements: a valid file with a wrong shape).
void reshape(std::vector<io::TensorToWrite>& t, const std::string& name, std::vector<int64_t> shape) {
  for (auto& x : t)
    if (x.name == name) {
      x.shape = std::move(shape);
      return;
    }
  FAIL() << name << " is not in the fixture";
}

struct FailCase {
  std::string label;
  std::string fixture;
  std::function<void(Json&)> config;
  std::function<void(std::vector<io::TensorToWrite>&)> tensors;
  std::string expected;  // a part of the message
};
void PrintTo(const FailCase& c, std::ostream* os) { *os << c.label; }

class QuantFailClosed : public ::testing::TestWithParam<FailCase> {};

TEST_P(QuantFailClosed, RefusesNamingTheProblem) {
  const FailCase& c = GetParam();
  TempModel m(c.label);
  write_edited_case(c.fixture, m, c.config, c.tensors);
  const std::string msg = load_error(m.path());
  EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
}

const std::string L0 = "model.layers.0.";

INSTANTIATE_TEST_SUITE_P(
    Loaders, QuantFailClosed,
    ::testing::Values(
        // MLX
        FailCase{"mlx_missing_scales", "mlx_qwen3", nullptr,
                 [](auto& t) { drop(t, L0 + "self_attn.q_proj.scales"); },
                 "tensor 'model.layers.0.self_attn.q_proj.scales' is missing (needed by "
                 "'model.layers.0.self_attn.q_proj.weight'"},
        FailCase{"mlx_wrong_group", "mlx_qwen3", [](Json& c) { c["quantization"]["group_size"] = 32; },
                 nullptr, "tensor 'model.embed_tokens.scales'"},
        FailCase{"mlx_shape", "mlx_qwen3", nullptr,
                 [](auto& t) { reshape(t, L0 + "mlp.up_proj.biases", {96, 2}); },
                 "tensor 'model.layers.0.mlp.up_proj.biases'"},
        FailCase{"mlx_3bit", "mlx_qwen3",
                 [](Json& c) {
                   c["quantization"]["bits"] = 3;
                   c.erase("quantization_config");
                 },
                 nullptr, "MLX affine 3-bit weights are not supported (supported: 4, 8)"},
        FailCase{"mlx_false_but_packed", "mlx_qwen3",
                 [](Json& c) {
                   c["quantization"]["model.layers.0.mlp.gate_proj"] = false;
                   c.erase("quantization_config");
                 },
                 nullptr, "'model.layers.0.mlp.gate_proj.weight' is stored packed"},
        // FP8
        FailCase{"fp8_missing_scale", "fp8_qwen3_moe", nullptr,
                 [](auto& t) { drop(t, L0 + "mlp.experts.2.up_proj.weight_scale_inv"); },
                 "tensor 'model.layers.0.mlp.experts.2.up_proj.weight_scale_inv' is missing"},
        FailCase{"fp8_wrong_block", "fp8_qwen3_moe",
                 [](Json& c) { c["quantization_config"]["weight_block_size"] = {128, 128}; }, nullptr,
                 "_scale_inv' in "},
        FailCase{"fp8_not_square", "fp8_qwen3_moe",
                 [](Json& c) { c["quantization_config"]["weight_block_size"] = {32, 64}; }, nullptr,
                 "fp8 weight_block_size [32, 64] is not supported"},
        // AWQ
        FailCase{"awq_missing_zeros", "awq_qwen3", nullptr, [](auto& t) { drop(t, L0 + "mlp.down_proj.qzeros"); },
                 "tensor 'model.layers.0.mlp.down_proj.qzeros' is missing"},
        FailCase{"awq_wrong_group", "awq_qwen3", [](Json& c) { c["quantization_config"]["group_size"] = 32; },
                 nullptr, ".qzeros' in "},
        FailCase{"awq_gemv", "awq_qwen3", [](Json& c) { c["quantization_config"]["version"] = "gemv"; }, nullptr,
                 "AWQ version 'gemv' is not supported (supported: gemm)"},
        // GPTQ
        FailCase{"gptq_missing_scales", "gptq_qwen3", nullptr,
                 [](auto& t) { drop(t, L0 + "self_attn.o_proj.scales"); },
                 "tensor 'model.layers.0.self_attn.o_proj.scales' is missing"},
        FailCase{"gptq_wrong_group", "gptq_qwen3", [](Json& c) { c["quantization_config"]["group_size"] = 64; },
                 nullptr, ".qzeros' in "},
        FailCase{"gptq_g_idx_shape", "gptq_actorder_qwen3", nullptr,
                 [](auto& t) { reshape(t, L0 + "mlp.down_proj.g_idx", {96}); },
                 "tensor 'model.layers.0.mlp.down_proj.g_idx'"},
        FailCase{"gptq_3bit", "gptq_qwen3", [](Json& c) { c["quantization_config"]["bits"] = 3; }, nullptr,
                 "GPTQ 3-bit weights are not supported (supported: 4, 8)"},
        // compressed-tensors
        FailCase{"ct_missing_zero_point", "ct_qwen3", nullptr,
                 [](auto& t) { drop(t, L0 + "mlp.up_proj.weight_zero_point"); },
                 "tensor 'model.layers.0.mlp.up_proj.weight_zero_point' is missing"},
        FailCase{"ct_wrong_group", "ct_qwen3",
                 [](Json& c) { c["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64; },
                 nullptr, "self_attn.q_proj.weight_scale' in "},
        FailCase{"ct_shape", "ct_qwen3", nullptr,
                 [](auto& t) { reshape(t, L0 + "self_attn.k_proj.weight_packed", {32, 8}); },
                 "tensor 'model.layers.0.self_attn.k_proj.weight_packed'"},
        FailCase{"ct_float_quantized", "ct_qwen3",
                 [](Json& c) { c["quantization_config"]["format"] = "float-quantized"; }, nullptr,
                 "compressed-tensors format 'float-quantized' is not supported (supported: pack-quantized)"},
        // MXFP4
        FailCase{"mxfp4_missing_scales", "mxfp4_gpt_oss", nullptr,
                 [](auto& t) { drop(t, L0 + "mlp.experts.down_proj_scales"); },
                 "tensor 'model.layers.0.mlp.experts.down_proj_scales' is missing"},
        FailCase{"mxfp4_shape", "mxfp4_gpt_oss", nullptr,
                 [](auto& t) { reshape(t, L0 + "mlp.experts.gate_up_proj_scales", {8, 64, 1}); },
                 "tensor 'model.layers.0.mlp.experts.gate_up_proj_scales'"},
        // Anything else
        FailCase{"bitsandbytes", "awq_qwen3",
                 [](Json& c) { c["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}; },
                 nullptr,
                 "quantization method bitsandbytes is not supported (supported: mlx (affine), fp8, awq, gptq, "
                 "compressed-tensors, mxfp4)"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace tachyon::testing
