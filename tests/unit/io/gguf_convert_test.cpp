// The architectures with no llama.cpp fixture here (llama, qwen2, qwen3moe): each HF fixture
// (tests/fixtures/hf) is written as a GGUF file the way llama.cpp's convert_hf_to_gguf.py writes
// it (its metadata keys, tensor names, ggml dimension order, llama's q/k rope permutation,
// Llama 3 rope scaling as a rope_freqs tensor, experts stacked into 3-D tensors), in the same
// dtype, and must give bit-identical logits to the safetensors folder: config mapping, name
// mapping and every undone conversion step are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "gguf_builder.h"
#include "io/config.h"
#include "io/gguf_config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;
using io::GgmlType;
using io::GgufValueType;

const std::string kHf = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/";

std::vector<uint8_t> bytes_of(const io::TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return {p, p + t.num_bytes};
}

GgmlType ggml_of(DType d) {
  switch (d) {
    case DType::F32: return GgmlType::F32;
    case DType::F16: return GgmlType::F16;
    case DType::BF16: return GgmlType::BF16;
    default: throw Error("unexpected dtype");
  }
}

// convert_hf_to_gguf.py LlamaModel.permute: rows reshaped (heads, 2, D/2) with the last two
// axes swapped, so row h·D + 2i + j of the result is row h·D + j·D/2 + i of the input.
std::vector<uint8_t> llama_permute(const io::TensorView& t, int64_t heads) {
  const int64_t rows = t.shape[0], d = rows / heads;
  const size_t row_bytes = t.num_bytes / static_cast<size_t>(rows);
  std::vector<uint8_t> out(t.num_bytes);
  const auto* src = static_cast<const uint8_t*>(t.data);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out.data() + (h * d + 2 * i + j) * row_bytes, src + (h * d + j * d / 2 + i) * row_bytes, row_bytes);
  return out;
}

// LlamaModel.generate_extra_tensors: Llama 3 rope scaling as per-frequency divisors.
std::vector<float> llama3_rope_freqs(const io::RopeParams& r, int64_t dim) {
  std::vector<float> f;
  const double low_wavelen = double(*r.original_max_position_embeddings) / r.low_freq_factor;
  const double high_wavelen = double(*r.original_max_position_embeddings) / r.high_freq_factor;
  for (int64_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(r.rope_theta, double(i) / double(dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) f.push_back(1.0f);
    else if (wavelen > low_wavelen) f.push_back(static_cast<float>(r.factor));
    else {
      const double smooth = (double(*r.original_max_position_embeddings) / wavelen - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
      f.push_back(static_cast<float>(1.0 / ((1 - smooth) / r.factor + smooth)));
    }
  }
  return f;
}

std::string write_gguf(const std::string& arch_dir, const std::string& arch, const std::string& out_path) {
  const io::ModelConfig c = io::load_model_config(kHf + arch_dir);
  const auto ckpt = io::Checkpoint::open(kHf + arch_dir);
  io::testing::GgufBuilder b;
  const std::string a = arch + ".";
  b.str("general.architecture", arch)
      .u32(a + "block_count", uint32_t(c.num_hidden_layers))
      .u32(a + "context_length", uint32_t(c.max_position_embeddings))
      .u32(a + "embedding_length", uint32_t(c.hidden_size))
      .u32(a + "attention.head_count", uint32_t(c.num_attention_heads))
      .u32(a + "attention.head_count_kv", uint32_t(c.num_key_value_heads))
      .u32(a + "attention.key_length", uint32_t(c.head_dim))
      .u32(a + "attention.value_length", uint32_t(c.head_dim))
      .f32(a + "attention.layer_norm_rms_epsilon", float(c.rms_norm_eps))
      .f32(a + "rope.freq_base", float(c.rope_for("full_attention").rope_theta));
  if (arch == "qwen3moe") {
    b.u32(a + "expert_count", uint32_t(io::json_int(c.raw, "num_local_experts", "")))
        .u32(a + "expert_used_count", uint32_t(io::json_int(c.raw, "num_experts_per_tok", "")))
        .u32(a + "expert_feed_forward_length", uint32_t(io::json_int(c.raw, "moe_intermediate_size", "")));
  } else {
    b.u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  }
  if (c.bos_token_id) b.u32("tokenizer.ggml.bos_token_id", uint32_t(*c.bos_token_id));
  if (!c.eos_token_ids.empty()) b.u32("tokenizer.ggml.eos_token_id", uint32_t(c.eos_token_ids.front()));
  const io::RopeParams& rope = c.rope_for("full_attention");
  std::vector<float> freqs;
  if (rope.rope_type == "llama3") {
    freqs = llama3_rope_freqs(rope, c.head_dim);
    std::vector<uint8_t> raw(freqs.size() * 4);
    std::memcpy(raw.data(), freqs.data(), raw.size());
    b.tensor("rope_freqs.weight", GgmlType::F32, {int64_t(freqs.size())}, raw);
  }
  auto put = [&](const std::string& gguf_name, const io::TensorView& t, std::vector<uint8_t> data) {
    std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
    b.tensor(gguf_name, ggml_of(t.dtype), dims, data);
  };
  const std::pair<const char*, const char*> layer_names[] = {
      {"input_layernorm.weight", "attn_norm.weight"},         {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},           {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},           {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},               {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},               {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},                {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"}};
  put("token_embd.weight", ckpt.get("model.embed_tokens.weight"), bytes_of(ckpt.get("model.embed_tokens.weight")));
  put("output_norm.weight", ckpt.get("model.norm.weight"), bytes_of(ckpt.get("model.norm.weight")));
  if (ckpt.has("lm_head.weight") && !c.tie_word_embeddings)
    put("output.weight", ckpt.get("lm_head.weight"), bytes_of(ckpt.get("lm_head.weight")));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", gg = "blk." + std::to_string(l) + ".";
    for (const auto& [from, to] : layer_names) {
      if (!ckpt.has(hf + from)) continue;
      const io::TensorView& t = ckpt.get(hf + from);
      std::vector<uint8_t> data = bytes_of(t);
      if (arch == "llama" && std::string(from) == "self_attn.q_proj.weight") data = llama_permute(t, c.num_attention_heads);
      if (arch == "llama" && std::string(from) == "self_attn.k_proj.weight") data = llama_permute(t, c.num_key_value_heads);
      put(gg + to, t, data);
    }
    if (arch == "qwen3moe") {  // experts stacked: [E, rows, cols] → ggml {cols, rows, E}
      const int64_t experts = io::json_int(c.raw, "num_local_experts", "");
      for (const auto& [part, name] : {std::pair{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"},
                                       {"down_proj", "ffn_down_exps"}}) {
        std::vector<uint8_t> all;
        const io::TensorView* first = nullptr;
        for (int64_t e = 0; e < experts; ++e) {
          const io::TensorView& t = ckpt.get(hf + "mlp.experts." + std::to_string(e) + "." + part + ".weight");
          if (!first) first = &t;
          const auto d = bytes_of(t);
          all.insert(all.end(), d.begin(), d.end());
        }
        b.tensor(gg + name + ".weight", ggml_of(first->dtype), {first->shape[1], first->shape[0], experts}, all);
      }
    }
  }
  const auto bytes = b.bytes();
  std::ofstream(out_path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return out_path;
}

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids) {
  auto backend = kernels::make_backend("cpu");
  auto model = model::load_model(path, *backend);
  kv::KvCache kv(*backend, model->kv_layout(4, 16));
  const auto seq = kv.add_sequence();
  kv.reserve(seq, static_cast<int32_t>(ids.size()));
  model::Batch batch;
  batch.add(seq, ids, 0, model::LogitRows::All);
  return model->forward(batch, kv).logits;
}

class GgufConvert : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(GgufConvert, LogitsEqualTheSafetensorsFolder) {
  const auto& [dir, arch] = GetParam();
  const std::string path =
      (fs::temp_directory_path() / ("tachyon-gguf-" + arch + "-" + std::to_string(::getpid()) + ".gguf")).string();
  write_gguf(dir, arch, path);
  const io::ModelConfig hf = io::load_model_config(kHf + dir), g = io::load_model_config(path);
  EXPECT_EQ(g.model_type, hf.model_type);
  EXPECT_EQ(g.tie_word_embeddings, hf.tie_word_embeddings);
  EXPECT_EQ(g.rope_for("full_attention").rope_type, hf.rope_for("full_attention").rope_type);
  const std::vector<int32_t> ids = {1, 17, 33, 250, 9, 400, 3, 77, 128, 5, 64, 300};
  const auto want = logits_of(kHf + dir, ids), got = logits_of(path, ids);
  fs::remove(path);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
  std::printf("%s as GGUF: max|delta| %.3g over %zu logits\n", arch.c_str(), worst, got.size());
  EXPECT_EQ(worst, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Archs, GgufConvert,
                         ::testing::Values(std::pair<std::string, std::string>{"llama", "llama"},
                                           std::pair<std::string, std::string>{"qwen2", "qwen2"},
                                           std::pair<std::string, std::string>{"qwen3", "qwen3"},
                                           std::pair<std::string, std::string>{"qwen3_moe", "qwen3moe"}),
                         [](const auto& info) { return info.param.second; });

TEST(GgufConfig, RefusesUnknownArchitectureAndMissingKeysByName) {
  auto refused = [](io::testing::GgufBuilder b, const std::string& needle) {
    const auto bytes = b.bytes();
    const auto f = io::GgufFile::parse(bytes.data(), bytes.size(), "x.gguf");
    try {
      io::gguf_model_config(*f);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(io::testing::GgufBuilder().str("general.architecture", "mamba"),
          "GGUF architecture 'mamba' is not supported (supported: llama, qwen2, qwen3, qwen3moe, gemma3, deepseek2, "
          "gpt-oss)");
  refused(io::testing::GgufBuilder().str("general.architecture", "qwen3").u32("qwen3.embedding_length", 64),
          "'qwen3.attention.head_count' is missing");
  refused(io::testing::GgufBuilder()
              .str("general.architecture", "llama")
              .u32("llama.embedding_length", 64)
              .u32("llama.attention.head_count", 4)
              .u32("llama.block_count", 1)
              .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
              .str("llama.rope.scaling.type", "longrope")
              .f32("llama.rope.scaling.factor", 4.0f)
              .tensor("token_embd.weight", GgmlType::F32, {64, 2}, std::vector<uint8_t>(512)),
          "rope scaling type 'longrope' is not supported");
  // A crafted layer count is refused before the per-layer lists are sized by it.
  refused(io::testing::GgufBuilder()
              .str("general.architecture", "gemma3")
              .u32("gemma3.embedding_length", 64)
              .u32("gemma3.attention.head_count", 4)
              .u32("gemma3.block_count", 4000000000u)
              .u32("gemma3.attention.sliding_window", 16),
          "block_count 4000000000 is more than the 4096 layers tachyon loads");
}

// deepseek2 files tachyon cannot run the way llama.cpp does are refused naming the key or tensor.
TEST(GgufConfig, RefusesDeepseek2VariantsByName) {
  auto deepseek2 = [] {
    return io::testing::GgufBuilder()
        .str("general.architecture", "deepseek2")
        .u32("deepseek2.embedding_length", 64)
        .u32("deepseek2.attention.head_count", 4)
        .u32("deepseek2.attention.head_count_kv", 1)
        .u32("deepseek2.block_count", 2)
        .f32("deepseek2.attention.layer_norm_rms_epsilon", 1e-6f)
        .u32("deepseek2.rope.dimension_count", 8)
        .u32("deepseek2.attention.kv_lora_rank", 32)
        .u32("deepseek2.attention.key_length", 40)
        .u32("deepseek2.attention.value_length", 32)
        .u32("deepseek2.attention.key_length_mla", 24)
        .u32("deepseek2.attention.value_length_mla", 16)
        .u32("deepseek2.feed_forward_length", 128)
        .u32("deepseek2.expert_feed_forward_length", 32)
        .u32("deepseek2.expert_count", 16)
        .u32("deepseek2.expert_used_count", 4)
        .u32("deepseek2.leading_dense_block_count", 1)
        .tensor("token_embd.weight", GgmlType::F32, {64, 2}, std::vector<uint8_t>(512));
  };
  auto refused = [](io::testing::GgufBuilder b, const std::string& needle) {
    const auto bytes = b.bytes();
    const auto f = io::GgufFile::parse(bytes.data(), bytes.size(), "x.gguf");
    try {
      io::gguf_model_config(*f);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // No gating key: llama.cpp's default for DeepSeek-V2 files is softmax.
  refused(deepseek2(), "'deepseek2.expert_gating_func' is 1 (absent: softmax, DeepSeek-V2)");
  refused(deepseek2().u32("deepseek2.expert_gating_func", 1), "'deepseek2.expert_gating_func' is 1 (softmax)");
  refused(deepseek2().u32("deepseek2.expert_gating_func", 2), "without tensor 'blk.1.exp_probs_b.bias'");
  refused(deepseek2().u32("deepseek2.expert_gating_func", 2).f32("deepseek2.attention.temperature_scale", 0.1f),
          "'deepseek2.attention.temperature_scale' is set");
}

TEST(GgufConfig, ModelFileOfAFolderAndSplitFiles) {
  const fs::path dir = fs::temp_directory_path() / ("tachyon-gguf-dir-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_FALSE(io::gguf_model_file(dir.string()).has_value());
  std::ofstream(dir / "a.gguf") << "GGUF";
  EXPECT_EQ(io::gguf_model_file(dir.string()), (dir / "a.gguf").string());
  std::ofstream(dir / "b.gguf") << "GGUF";
  EXPECT_THROW(io::gguf_model_file(dir.string()), Error);
  std::ofstream(dir / "m-00001-of-00002.gguf") << "GGUF";
  EXPECT_THROW(io::gguf_model_file((dir / "m-00001-of-00002.gguf").string()), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tachyon
