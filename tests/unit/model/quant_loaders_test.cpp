// Quantized checkpoints in each published layout (tests/fixtures/quant, written by
// tools/make_quant_fixtures.py) load through their WeightSource and give the logits and greedy
// continuations of the float model they mean: transformers' (golden.safetensors, written by the
// script's --goldens on the GPU machine) where present, else our own reference-backend run of the
// dequantized model (which matches transformers on the HF fixtures: hf_golden_tests).
// The quantized model runs on the reference backend (every format through the scalar definition
// of kernels/weight_dequant.h).
#include <gtest/gtest.h>

#include "../../diff/hf/model_runner.h"
#include "kernels/reference/rowwise.h"
#include "kernels/weight_dequant.h"
#include "model/sources/packed_source.h"
#include "model/weights.h"
#include "quant_fixture.h"

namespace tachyon::testing {
namespace {

using kernels::Weight;

struct QuantCase {
  std::string name;
  std::string method;       // what open_weight_source detects
  std::string tensor;       // a tensor whose stored format is checked
  std::string format;       // format_name of it after repacking
};
void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.name; }

class QuantFixture : public ::testing::TestWithParam<QuantCase> {};

std::string source_arch(const std::string& name) {
  return read_json_file(quant_fixture(name) / "fixture.json")["source"].get<std::string>();
}

TEST_P(QuantFixture, LogitsAndGreedyMatchTheDequantizedModel) {
  const QuantCase& c = GetParam();
  const fs::path golden_path = quant_fixture(c.name) / "golden.safetensors";
  const bool transformers = fs::exists(golden_path);
  const auto inputs = io::Checkpoint::open_file(
      (fs::path(TACHYON_SOURCE_DIR) / "tests/fixtures/hf" / source_arch(c.name) / "golden.safetensors").string());
  TempModel deq(c.name + "-deq");
  write_dequantized_model(c.name, deq);
  ModelRunner quantized(quant_fixture(c.name).string(), "reference");
  std::unique_ptr<ModelRunner> reference;
  std::unique_ptr<io::Checkpoint> golden;
  if (transformers) golden = std::make_unique<io::Checkpoint>(io::Checkpoint::open_file(golden_path.string()));
  else reference = std::make_unique<ModelRunner>(deq.path(), "reference");
  for (int i = 0; i < 3; ++i) {
    if (transformers && !golden->has("logits_" + std::to_string(i))) continue;  // the goldens keep inputs 0 and 1
    const auto ids = read_ids(inputs, "input_ids_" + std::to_string(i));
    const auto ref = transformers ? read_f32(*golden, "logits_" + std::to_string(i)) : reference->full_logits(ids);
    const double err = relative_error(quantized.full_logits(ids), ref);
    RecordProperty("max_rel_err_" + std::to_string(i), std::to_string(err));
    EXPECT_LE(err, 1e-3) << c.name << " input_ids_" << i << (transformers ? " vs transformers" : " vs dequantized");
  }
  for (int j = 0; j < 2; ++j) {
    const auto prompt = read_ids(inputs, "input_ids_" + std::to_string(j));
    const auto tokens = quantized.greedy(prompt, 16).first;
    const auto expected = transformers ? read_ids(*golden, "greedy_" + std::to_string(j)) : reference->greedy(prompt, 16).first;
    EXPECT_EQ(tokens, expected) << c.name << " greedy_" << j;
  }
}

// The loader keeps the published precision: the tensor is repacked into the expected internal
// format (not dequantized), and its elements are the dequantized checkpoint's exactly.
TEST_P(QuantFixture, RepacksIntoTheInternalFormatExactly) {
  const QuantCase& c = GetParam();
  const io::ModelConfig config = io::load_model_config(quant_fixture(c.name).string());
  EXPECT_EQ(model::quantization_method(config), c.method);
  auto source = model::open_weight_source(quant_fixture(c.name).string(), config);
  const auto deq = io::Checkpoint::open_file((quant_fixture(c.name) / "dequantized.safetensors").string());
  ASSERT_TRUE(source->has(c.tensor));
  const model::HostTensor t = source->load(c.tensor);
  EXPECT_EQ(model::format_name(t.weight), c.format) << c.tensor;
  EXPECT_EQ(source->info(c.tensor).shape, deq.get(c.tensor).shape);
  // Every quantized tensor of the case, element by element (stored_transposed: [E, A, B] logical).
  int64_t checked = 0;
  for (const auto& [name, d] : deq.tensors()) {
    ASSERT_TRUE(source->has(name)) << name;
    const model::HostTensor q = source->load(name);
    const Weight& w = q.weight;
    const int64_t A = d.shape.size() == 3 ? d.shape[1] : 0, B = d.shape.size() == 3 ? d.shape[2] : 0;
    for (int64_t i = 0; i < d.num_elements(); ++i) {
      int64_t r = i / w.cols, col = i % w.cols;
      if (q.stored_transposed) r = i / (A * B) * B + i % B, col = i / B % A;
      const float got = kernels::rowwise::load_weight(w, r, col);
      const float want = d.dtype == DType::F32 ? static_cast<const float*>(d.data)[i]
                                               : bf16_to_f32(static_cast<const uint16_t*>(d.data)[i]);
      ASSERT_EQ(got, want) << name << " element " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // The companions are hidden; names() lists the logical tensors.
  for (const auto& n : source->names()) {
    EXPECT_FALSE(n.ends_with(".qzeros") || n.ends_with(".scales") || n.ends_with("_scale_inv") ||
                 n.ends_with(".weight_packed") || n.ends_with("_blocks"))
        << n;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, QuantFixture,
    ::testing::Values(
        QuantCase{"mlx_qwen3", "mlx", "model.embed_tokens.weight", "Affine 4-bit g64 BF16"},
        QuantCase{"fp8_qwen3_moe", "fp8", "model.layers.0.mlp.experts.3.down_proj.weight", "Fp8Block 32"},
        QuantCase{"awq_qwen3", "awq", "model.layers.0.self_attn.q_proj.weight", "Affine 4-bit g64 F32"},
        QuantCase{"gptq_qwen3", "gptq", "model.layers.0.self_attn.q_proj.weight", "Symmetric 4-bit g32 F16"},
        QuantCase{"gptq8_qwen3", "gptq", "model.layers.1.mlp.up_proj.weight", "Affine 8-bit g64 F32"},
        QuantCase{"gptq_actorder_qwen3", "gptq", "model.layers.1.mlp.down_proj.weight", "F32"},
        QuantCase{"ct_qwen3", "compressed-tensors", "model.layers.1.mlp.down_proj.weight", "Affine 8-bit g64 F32"},
        QuantCase{"mxfp4_gpt_oss", "mxfp4", "model.layers.1.mlp.experts.gate_up_proj", "Mxfp4"}),
    [](const auto& info) { return info.param.name; });

// Per-layer MLX overrides: 8-bit g32 attention in layer 1, a float down_proj (false).
TEST(QuantLoaders, MlxPerLayerOverrides) {
  const std::string dir = quant_fixture("mlx_qwen3").string();
  auto source = model::open_weight_source(dir, io::load_model_config(dir));
  EXPECT_EQ(model::format_name(source->load("model.layers.1.self_attn.k_proj.weight").weight), "Affine 8-bit g32 BF16");
  EXPECT_EQ(model::format_name(source->load("model.layers.0.self_attn.k_proj.weight").weight), "Affine 4-bit g64 BF16");
  EXPECT_EQ(model::format_name(source->load("model.layers.1.mlp.down_proj.weight").weight), "BF16");
}

// Act-order GPTQ: groups made of aligned 32-column blocks stay quantized (g32); a scattered
// permutation is dequantized to F32 and info says so.
TEST(QuantLoaders, GptqActOrderKeepsWhatItCanQuantized) {
  const std::string dir = quant_fixture("gptq_actorder_qwen3").string();
  auto source = model::open_weight_source(dir, io::load_model_config(dir));
  EXPECT_EQ(model::format_name(source->load("model.layers.0.mlp.down_proj.weight").weight), "Symmetric 4-bit g32 F16");
  EXPECT_EQ(model::format_name(source->load("model.layers.0.self_attn.o_proj.weight").weight), "Symmetric 4-bit g64 F16");
  EXPECT_NE(source->info("model.layers.1.mlp.down_proj.weight").type.find("dequantized to F32"), std::string::npos);
}

// gpt-oss's MXFP4 experts are bound as row gathers of codes and scales: each expert's gate_up
// (de-interleaved) and down stay Mxfp4 in the backend.
TEST(QuantLoaders, Mxfp4ExpertsStayMxfp4WhenBound) {
  const std::string dir = quant_fixture("mxfp4_gpt_oss").string();
  const io::ModelConfig config = io::load_model_config(dir);
  auto source = model::open_weight_source(dir, config);
  auto backend = kernels::make_backend("reference");
  const int64_t E = 8, H = config.hidden_size, I = config.intermediate_size;
  Weight gate_up, down;
  model::WeightBinder b(*source, *backend);
  const int64_t e = 5;
  auto unzip = [I](int64_t r) { return r < I ? 2 * r : 2 * (r - I) + 1; };
  b.bind_remapped(&gate_up, "model.layers.0.mlp.experts.gate_up_proj", {E, H, 2 * I},
                  {2 * I, H, [=](int64_t r, int64_t c) { return (e * H + c) * 2 * I + unzip(r); }});
  b.bind_remapped(&down, "model.layers.0.mlp.experts.down_proj", {E, I, H},
                  {H, I, [=](int64_t r, int64_t c) { return (e * I + c) * H + r; }});
  b.load();
  EXPECT_EQ(gate_up.format, kernels::WeightFormat::Mxfp4);
  EXPECT_EQ(down.format, kernels::WeightFormat::Mxfp4);
  const auto deq = io::Checkpoint::open_file((quant_fixture("mxfp4_gpt_oss") / "dequantized.safetensors").string());
  const auto& d = deq.get("model.layers.0.mlp.experts.gate_up_proj");  // [E, H, 2I] bf16
  for (int64_t r = 0; r < 2 * I; ++r)
    for (int64_t c = 0; c < H; ++c)
      ASSERT_EQ(kernels::rowwise::load_weight(gate_up, r, c),
                bf16_to_f32(static_cast<const uint16_t*>(d.data)[(e * H + c) * 2 * I + unzip(r)]))
          << r << ", " << c;
}

// Integer grids: biases −z·s not exact in the published f16 scales are kept as F32.
TEST(QuantLoaders, AffineBiasesFallBackToF32WhenNotExactInTheScaleDtype) {
  model::IntegerGrid g;
  g.rows = 2;
  g.cols = 64;
  g.bits = 4;
  g.group_size = 32;
  g.group_of_col.assign(64, 0);
  for (int c = 32; c < 64; ++c) g.group_of_col[static_cast<size_t>(c)] = 1;
  const float scale = f16_to_f32(f32_to_f16(0.0123f));  // 11 significant bits: 13·s needs more
  g.code = [](int64_t r, int64_t c) { return static_cast<uint32_t>((r * 7 + c) % 16); };
  g.scale = [=](int64_t, int64_t) { return scale; };
  g.zero = [](int64_t grp, int64_t r) { return static_cast<int32_t>(13 + grp - r); };
  g.scale_dtype = DType::F16;
  std::string note;
  const model::HostTensor t = model::pack_integer_grid(g, &note);
  EXPECT_EQ(model::format_name(t.weight), "Affine 4-bit g32 F32") << note;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 64; ++c)
      ASSERT_EQ(kernels::dequantize_element(t.weight, r, c),
                static_cast<float>(static_cast<int64_t>(g.code(r, c)) - g.zero(c / 32, r)) * scale);
}

}  // namespace
}  // namespace tachyon::testing
