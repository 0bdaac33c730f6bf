// GGUF models against llama.cpp's own outputs (tests/fixtures/gguf, written by llama.cpp: see its
// README): logits at every position of three id sequences within 5e-2·max|ref| (llama.cpp rounds
// activations to Q8 for its quantized dot products; an exact evaluation differs from it by
// 1.5e-2 to 2.7e-2), greedy continuations identical up to a near-tie, and the config read from
// metadata equal to the HF config the demo file was converted from. On the CPU backend the
// int8-activation mode (auto: on for GGUF files) computes as llama.cpp does and must come closer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kernels/weight_dequant.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/sources/gguf_repack.h"
#include "model/sources/gguf_source.h"

namespace tachyon {
namespace {

const std::string kDir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/gguf/";

std::vector<int32_t> ids_of(const io::TensorView& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(static_cast<const int64_t*>(t.data)[i]);
  return out;
}

int32_t argmax(const float* x, int64_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

struct Result {
  double worst_ratio = 0;   // max over sequences of max|Δ| / max|ref| (rows not exempted below)
  int greedy_matched = 0, greedy_total = 0;
  double largest_tie_gap = 0;  // at a greedy divergence: our best logit minus llama.cpp's token's
  int routing_ties = 0;        // rows and greedy steps exempted as routing near-ties
};

// MoE fixtures carry llama.cpp's routing margin per row (route_margin_i) and per greedy decode call
// (greedy_route_margin_i): the smallest gap, over the MoE layers, between the last expert (or
// expert group) it chose and the first it did not, in its selection scores (tools/
// make_gguf_arch_fixtures.py). Our f32 activations differ from llama.cpp's Q8-rounded ones by ~1%,
// so where that gap is tiny the two engines may pick different experts and that row's logits then
// differ by far more than 5e-2 (measured on the deepseek2 and gpt-oss fixtures: 1-4 rows of 7-70,
// margins 4e-5 to 7.5e-3, while llama.cpp's median margin is 6e-3 to 3e-2). Such a row is accepted
// when llama.cpp's margin there is below kRoutingTie, for at most one row plus a tenth of a sequence's.
constexpr double kRoutingTie = 1e-2;

std::vector<float> floats_of(const io::Checkpoint& ref, const std::string& name) {
  if (!ref.has(name)) return {};
  const io::TensorView& t = ref.get(name);
  const auto* p = static_cast<const float*>(t.data);
  return std::vector<float>(p, p + t.num_elements());
}

// Compares logits and greedy continuations of one fixture on `device`. `carry_flips`: a row past
// the bound after a row exempted at a routing near-tie (one that did route differently) is exempted
// too, under the same count: it attends to the flipped row's K and V, which hold the other
// experts' output (see GgufModelCuda.GptOssMxfp4MatchesLlamaCpp).
Result compare_with_llama_cpp(const std::string& name, const std::string& device,
                              kernels::Int8ActivationMode int8 = kernels::Int8ActivationMode::Auto,
                              bool carry_flips = false) {
  auto backend = kernels::make_backend(device);
  model::LoadOptions options;
  options.int8_activations = int8;
  auto model = model::load_model(kDir + name + ".gguf", *backend, options);
  const auto ref = io::Checkpoint::open_file(kDir + name + ".reference.safetensors");
  Result r;
  for (int s = 0; s < 3; ++s) {
    const std::string si = std::to_string(s);
    const std::vector<int32_t> ids = ids_of(ref.get("input_ids_" + si));
    const io::TensorView& ref_logits = ref.get("logits_" + si);
    const std::vector<int32_t> greedy = ids_of(ref.get("greedy_" + si));
    const std::vector<float> route_margin = floats_of(ref, "route_margin_" + si);
    const std::vector<float> greedy_route_margin = floats_of(ref, "greedy_route_margin_" + si);
    const int64_t T = static_cast<int64_t>(ids.size());
    const int64_t V = ref_logits.shape[1];
    const int32_t block = 16;
    kv::KvCache kv(*backend, model->kv_layout(static_cast<int32_t>((T + 40) / block + 2), block));
    const auto seq = kv.add_sequence();
    kv.reserve(seq, static_cast<int32_t>(T));
    model::Batch batch;
    batch.add(seq, ids, 0, model::LogitRows::All);
    const auto out = model->forward(batch, kv);
    EXPECT_EQ(out.vocab_size, V);
    const auto* want = static_cast<const float*>(ref_logits.data);
    double max_ref = 0;
    for (int64_t i = 0; i < T * V; ++i) max_ref = std::max(max_ref, std::abs(double(want[i])));
    double max_diff = 0;
    int exempt = 0;
    bool flipped = false;  // a row of this sequence was exempted at a routing near-tie
    for (int64_t t = 0; t < T; ++t) {
      double row_diff = 0;
      for (int64_t v = 0; v < V; ++v)
        row_diff = std::max(row_diff, std::abs(double(want[t * V + v]) - double(out.logits[static_cast<size_t>(t * V + v)])));
      const bool routing_tie = !route_margin.empty() && route_margin[static_cast<size_t>(t)] < kRoutingTie;
      if (row_diff / max_ref > 5e-2 && routing_tie) {
        std::printf("%s sequence %d row %lld: ratio %.4f at a routing near-tie (llama.cpp's margin %.2g)\n",
                    name.c_str(), s, static_cast<long long>(t), row_diff / max_ref,
                    double(route_margin[static_cast<size_t>(t)]));
        ++exempt;
        flipped = true;
        continue;
      }
      if (row_diff / max_ref > 5e-2 && carry_flips && flipped) {
        std::printf("%s sequence %d row %lld: ratio %.4f after a row that routed differently (margin here %.2g)\n",
                    name.c_str(), s, static_cast<long long>(t), row_diff / max_ref,
                    double(route_margin[static_cast<size_t>(t)]));
        ++exempt;
        continue;
      }
      max_diff = std::max(max_diff, row_diff);
    }
    EXPECT_LE(exempt, 1 + T / 10) << name << " sequence " << s << ": too many rows at routing near-ties";
    r.routing_ties += exempt;
    const double ratio = max_diff / max_ref;
    std::printf("%s sequence %d: max|delta| %.4g, max|ref| %.4g, ratio %.4f (%d rows exempted)\n", name.c_str(), s,
                max_diff, max_ref, ratio, exempt);
    EXPECT_LE(ratio, 5e-2) << name << " sequence " << s;
    r.worst_ratio = std::max(r.worst_ratio, ratio);

    // Greedy: one token per decode call, as llama.cpp made the reference.
    std::vector<float> last(out.logits.end() - V, out.logits.end());
    int32_t pos = static_cast<int32_t>(T);
    for (size_t k = 0; k < greedy.size(); ++k) {
      const int32_t mine = argmax(last.data(), V);
      ++r.greedy_total;
      if (mine != greedy[k]) {
        // A divergence must be a near-tie: llama.cpp's token scores within the error band we
        // accept for the logits (this sequence's measured max|delta|) of our best, or the row
        // these logits came from was routed at a near-tie (see kRoutingTie).
        const double gap = double(last[static_cast<size_t>(mine)]) - double(last[static_cast<size_t>(greedy[k])]);
        const float margin = route_margin.empty() ? 1.f
                             : k == 0            ? route_margin.back()
                                                 : greedy_route_margin[k - 1];
        std::printf("%s sequence %d: greedy diverges at step %zu (ours %d, llama.cpp %d, logit gap %.4f <= %.4f, or "
                    "routing margin %.2g < %.2g?)\n",
                    name.c_str(), s, k, mine, greedy[k], gap, max_diff, double(margin), kRoutingTie);
        r.largest_tie_gap = std::max(r.largest_tie_gap, gap);
        if (gap > max_diff) {
          EXPECT_LT(margin, kRoutingTie) << name << " sequence " << s << " step " << k << ": not a near-tie";
          ++r.routing_ties;
        }
        break;  // the continuations differ from here on
      }
      ++r.greedy_matched;
      kv.reserve(seq, pos + 1);
      model::Batch step;
      step.add(seq, std::vector<int32_t>{mine}, pos, model::LogitRows::Last);
      const auto o = model->forward(step, kv);
      last.assign(o.logits.end() - V, o.logits.end());
      ++pos;
    }
  }
  std::printf("%s on %s (int8 activations %s): worst logits ratio %.4f, greedy %d/%d tokens identical, %d routing near-ties\n",
              name.c_str(), device.c_str(), backend->int8_activation_weights() > 0 ? "on" : "off", r.worst_ratio, r.greedy_matched, r.greedy_total, r.routing_ties);
  return r;
}

TEST(GgufModel, Tiny256Q4_0MatchesLlamaCpp) { compare_with_llama_cpp("tiny256-q4_0", "reference"); }
TEST(GgufModel, Tiny256Q6_KMatchesLlamaCpp) { compare_with_llama_cpp("tiny256-q6_k", "reference"); }
TEST(GgufModel, DemoQ4_K_MMatchesLlamaCpp) { compare_with_llama_cpp("demo-q4_k_m", "reference"); }
// Converted by llama.cpp's convert_hf_to_gguf.py from the HF fixtures (tools/make_gguf_arch_fixtures.py).
TEST(GgufModel, Gemma3Q8_0MatchesLlamaCpp) { compare_with_llama_cpp("gemma3-q8_0", "reference"); }
TEST(GgufModel, Deepseek2Q4_K_MMatchesLlamaCpp) { compare_with_llama_cpp("deepseek2-q4_k_m", "reference"); }
TEST(GgufModel, GptOssMxfp4MatchesLlamaCpp) { compare_with_llama_cpp("gpt-oss-mxfp4", "reference"); }

// The CUDA backend reads the same files through its own quantized kernels: the same bound against
// llama.cpp holds there (run on the GPU machine by bench/cuda/run_cuda_tests.sh).
class GgufModelCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::default_device() != "cuda") GTEST_SKIP() << "no CUDA device visible";
  }
};
TEST_F(GgufModelCuda, Tiny256Q4_0MatchesLlamaCpp) { compare_with_llama_cpp("tiny256-q4_0", "cuda"); }
TEST_F(GgufModelCuda, Tiny256Q6_KMatchesLlamaCpp) { compare_with_llama_cpp("tiny256-q6_k", "cuda"); }
TEST_F(GgufModelCuda, Gemma3Q8_0MatchesLlamaCpp) { compare_with_llama_cpp("gemma3-q8_0", "cuda"); }
TEST_F(GgufModelCuda, Deepseek2Q4_K_MMatchesLlamaCpp) { compare_with_llama_cpp("deepseek2-q4_k_m", "cuda"); }
TEST_F(GgufModelCuda, DemoQ4_K_MMatchesLlamaCpp) { compare_with_llama_cpp("demo-q4_k_m", "cuda"); }
// gpt-oss on CUDA (bf16 matmul operands) routes differently from llama.cpp at 7 of its near-ties
// (margins 3.7e-5 to 7.5e-3; the exact reference backend at 6 of them), and in sequence 1 the
// flipped row 8 (margin 1.5e-3) differs by 1.06·max|ref| (0.28 on the reference backend: CUDA
// flips a second layer's choice there), so a later row that attends to it reached 0.39 on an
// H100. Such rows are exempted under the near-tie count; every other row keeps the 5e-2 bound.
TEST_F(GgufModelCuda, GptOssMxfp4MatchesLlamaCpp) {
  compare_with_llama_cpp("gpt-oss-mxfp4", "cuda", kernels::Int8ActivationMode::Auto, /*carry_flips=*/true);
}

// The CPU backend with int8 activations (the GGUF default) against the same fixtures, next to
// the same backend without them. Worst max|Δ|/max|ref| measured (every ISA gives the same bits):
//   tiny256-q4_0 0.0201 on (0.0182 off), demo-q4_k_m 0.0188 (0.0197), gemma3-q8_0 0.0351 (0.0360);
//   since Q6_K's 16-column groups run in the mode (16-column activation blocks) and the mixed
//   q/k/v of Q4_K_M files with them: demo-q4_k_m 0.0175, tiny256-q6_k 0.0273 (0.0265 off).
// The mode is held to its measured ratio plus ~20% (the 5e-2 bound of every fixture applies too):
// llama.cpp's other roundings (f16 KV cache, f16 activation scales, Q8_K blocks of 256 for
// K-quants) keep it from coming much closer.
void compare_on_cpu(const std::string& name, double bound) {
  const Result off = compare_with_llama_cpp(name, "cpu", kernels::Int8ActivationMode::Off);
  const Result on = compare_with_llama_cpp(name, "cpu", kernels::Int8ActivationMode::Auto);
  std::printf("%s on cpu: worst ratio %.4f with int8 activations, %.4f without\n", name.c_str(), on.worst_ratio,
              off.worst_ratio);
  EXPECT_LE(on.worst_ratio, bound) << name;
}
TEST(GgufModel, Tiny256Q4_0Int8ActivationsOnCpu) { compare_on_cpu("tiny256-q4_0", 0.024); }
TEST(GgufModel, DemoQ4_K_MInt8ActivationsOnCpu) { compare_on_cpu("demo-q4_k_m", 0.023); }
TEST(GgufModel, Gemma3Q8_0Int8ActivationsOnCpu) { compare_on_cpu("gemma3-q8_0", 0.042); }
TEST(GgufModel, Tiny256Q6_KInt8ActivationsOnCpu) { compare_on_cpu("tiny256-q6_k", 0.032); }

// The demo file was converted from models/tachyon-demo: the config read from its metadata equals
// the one read from config.json in everything the model is built from.
TEST(GgufModel, ConfigFromMetadataEqualsHfConfig) {
  const io::ModelConfig hf = io::load_model_config(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo");
  const io::ModelConfig g = io::load_model_config(kDir + "demo-q4_k_m.gguf");
  EXPECT_EQ(g.model_type, hf.model_type);
  EXPECT_EQ(g.architectures, hf.architectures);
  EXPECT_EQ(g.vocab_size, hf.vocab_size);
  EXPECT_EQ(g.hidden_size, hf.hidden_size);
  EXPECT_EQ(g.intermediate_size, hf.intermediate_size);
  EXPECT_EQ(g.num_hidden_layers, hf.num_hidden_layers);
  EXPECT_EQ(g.num_attention_heads, hf.num_attention_heads);
  EXPECT_EQ(g.num_key_value_heads, hf.num_key_value_heads);
  EXPECT_EQ(g.head_dim, hf.head_dim);
  EXPECT_FLOAT_EQ(static_cast<float>(g.rms_norm_eps), static_cast<float>(hf.rms_norm_eps));
  EXPECT_EQ(g.max_position_embeddings, hf.max_position_embeddings);
  EXPECT_EQ(g.tie_word_embeddings, hf.tie_word_embeddings);
  EXPECT_EQ(g.attention_bias, hf.attention_bias);
  EXPECT_EQ(g.layer_types, hf.layer_types);
  EXPECT_FLOAT_EQ(static_cast<float>(g.rope_for("full_attention").rope_theta),
                  static_cast<float>(hf.rope_for("full_attention").rope_theta));
  EXPECT_EQ(g.rope_for("full_attention").rope_type, "default");
  EXPECT_EQ(g.eos_token_ids, hf.eos_token_ids);
  // The untied random model has an output.weight.
  EXPECT_FALSE(io::load_model_config(kDir + "tiny256-q4_0.gguf").tie_word_embeddings);
}

// The deepseek2 and gpt-oss files were converted by llama.cpp from tests/fixtures/hf: the config
// read from their metadata equals the HF one in everything the model is built from (gpt-oss's
// yarn differs on purpose: ggml rounds the correction range, HF's fixture has truncate false).
TEST(GgufModel, Deepseek2AndGptOssConfigsEqualTheirHfConfigs) {
  const std::string hf_dir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/";
  const io::ModelConfig hd = io::load_model_config(hf_dir + "deepseek_v3");
  const io::ModelConfig gd = io::load_model_config(kDir + "deepseek2-q4_k_m.gguf");
  EXPECT_EQ(gd.model_type, "deepseek_v3");
  EXPECT_EQ(gd.num_hidden_layers, hd.num_hidden_layers);
  EXPECT_EQ(gd.num_attention_heads, hd.num_attention_heads);
  EXPECT_EQ(gd.intermediate_size, hd.intermediate_size);
  for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                          "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
                          "first_k_dense_replace", "n_group", "topk_group", "norm_topk_prob", "scoring_func",
                          "topk_method"})
    EXPECT_EQ(gd.raw[key], hd.raw[key]) << key;
  EXPECT_FLOAT_EQ(gd.raw["routed_scaling_factor"].get<float>(), hd.raw["routed_scaling_factor"].get<float>());
  EXPECT_TRUE(gd.raw["rope_interleave"].get<bool>());
  EXPECT_EQ(gd.rope_for("full_attention").rope_type, "default");
  EXPECT_FALSE(gd.tie_word_embeddings);

  const io::ModelConfig ho = io::load_model_config(hf_dir + "gpt_oss");
  const io::ModelConfig go = io::load_model_config(kDir + "gpt-oss-mxfp4.gguf");
  EXPECT_EQ(go.model_type, "gpt_oss");
  EXPECT_EQ(go.num_key_value_heads, ho.num_key_value_heads);
  EXPECT_EQ(go.head_dim, ho.head_dim);
  EXPECT_EQ(go.intermediate_size, ho.intermediate_size);
  EXPECT_EQ(go.raw["num_local_experts"], ho.raw["num_local_experts"]);
  EXPECT_EQ(go.raw["num_experts_per_tok"], ho.raw["num_experts_per_tok"]);
  EXPECT_EQ(go.sliding_window, ho.sliding_window);
  EXPECT_EQ(go.layer_types, ho.layer_types);
  EXPECT_TRUE(go.attention_bias);
  const io::RopeParams& gr = go.rope_for("full_attention");
  const io::RopeParams& hr = ho.rope_for("full_attention");
  EXPECT_EQ(gr.rope_type, "yarn");
  EXPECT_FLOAT_EQ(static_cast<float>(gr.rope_theta), static_cast<float>(hr.rope_theta));
  EXPECT_FLOAT_EQ(static_cast<float>(gr.factor), static_cast<float>(hr.factor));
  EXPECT_EQ(gr.original_max_position_embeddings, hr.original_max_position_embeddings);
  EXPECT_TRUE(gr.truncate);
}

// gpt-oss's experts as the Hub lays them out: gate/up interleaved again, MXFP4 codes kept.
TEST(GgufModel, GptOssExpertsKeepTheirMxfp4Codes) {
  const auto file = io::GgufFile::open(kDir + "gpt-oss-mxfp4.gguf");
  model::GgufSource src(file, io::gguf_model_config(*file));
  const std::string p = "model.layers.1.mlp.experts.";
  EXPECT_EQ(src.info(p + "gate_up_proj").shape, (std::vector<int64_t>{8, 64, 80}));
  EXPECT_EQ(src.info(p + "gate_up_proj").type, "MXFP4");
  EXPECT_EQ(src.info(p + "down_proj").shape, (std::vector<int64_t>{8, 40, 64}));
  EXPECT_EQ(src.info(p + "gate_up_proj_bias").shape, (std::vector<int64_t>{8, 80}));
  const model::HostTensor gu = src.load(p + "gate_up_proj");
  EXPECT_TRUE(gu.stored_transposed);
  EXPECT_EQ(gu.weight.format, kernels::WeightFormat::Mxfp4);
  EXPECT_EQ(gu.weight.rows, 8 * 80);
  // Row 2j of expert 3 is gate row j, row 2j + 1 up row j (GGUF: ffn_{gate,up}_exps {64, 40, 8}).
  const io::GgufTensor& gate = file->tensor("blk.1.ffn_gate_exps.weight");
  const io::GgufTensor& up = file->tensor("blk.1.ffn_up_exps.weight");
  const model::HostTensor g = model::repack_ggml_rows(gate.type, gate.data, 8 * 40, 64, gate.name);
  const model::HostTensor u = model::repack_ggml_rows(up.type, up.data, 8 * 40, 64, up.name);
  for (int64_t j : {0, 17, 39})
    for (int64_t c = 0; c < 64; ++c) {
      EXPECT_EQ(kernels::dequantize_element(gu.weight, 3 * 80 + 2 * j, c), kernels::dequantize_element(g.weight, 3 * 40 + j, c));
      EXPECT_EQ(kernels::dequantize_element(gu.weight, 3 * 80 + 2 * j + 1, c), kernels::dequantize_element(u.weight, 3 * 40 + j, c));
    }
}

// Tensor names, shapes and types as the model asks for them.
TEST(GgufModel, SourceMapsNamesShapesAndTypes) {
  const auto file = io::GgufFile::open(kDir + "tiny256-q4_0.gguf");
  const io::ModelConfig c = io::gguf_model_config(*file);
  model::GgufSource src(file, c);
  EXPECT_EQ(src.info("model.embed_tokens.weight").shape, (std::vector<int64_t>{8192, 256}));
  EXPECT_EQ(src.info("model.layers.1.mlp.down_proj.weight").shape, (std::vector<int64_t>{256, 768}));
  EXPECT_EQ(src.info("model.layers.1.mlp.down_proj.weight").type, "Q4_0");
  EXPECT_EQ(src.info("model.layers.0.self_attn.q_norm.weight").shape, (std::vector<int64_t>{64}));
  EXPECT_TRUE(src.has("lm_head.weight"));
  EXPECT_EQ(src.gguf_tensor("model.layers.0.self_attn.k_proj.weight")->name, "blk.0.attn_k.weight");
  const model::HostTensor q = src.load("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.weight.format, kernels::WeightFormat::Symmetric);
  EXPECT_EQ(q.weight.quant.bits, 4);
  EXPECT_EQ(q.weight.quant.group, 32);
  EXPECT_EQ(q.weight.rows, 256);
  EXPECT_EQ(q.weight.cols, 256);
}

}  // namespace
}  // namespace tachyon
