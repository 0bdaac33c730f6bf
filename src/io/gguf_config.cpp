#include "io/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "base/error.h"

namespace tachyon::io {
namespace {

struct ArchInfo {
  const char* gguf;
  const char* model_type;
  const char* hf_architecture;
};
constexpr ArchInfo kArchitectures[] = {
    {"llama", "llama", "LlamaForCausalLM"},
    {"qwen2", "qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "qwen3", "Qwen3ForCausalLM"},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM"},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM"},
    {"deepseek2", "deepseek_v3", "DeepseekV3ForCausalLM"},
    {"gpt-oss", "gpt_oss", "GptOssForCausalLM"},
};

// Reads `{arch}.*` keys, naming the file and key in every error.
class Meta {
 public:
  Meta(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  const GgufValue* find(const std::string& suffix) const { return f_.find(arch_ + "." + suffix); }
  const GgufValue& get(const std::string& suffix) const { return f_.get(arch_ + "." + suffix); }
  // A per-layer count may be stored as an array (llama.cpp's get_key_or_arr): tachyon needs it
  // uniform.
  int64_t uniform_int(const std::string& suffix) const {
    const GgufValue& v = get(suffix);
    if (!v.is_array()) return v.as_int();
    const std::vector<int64_t> xs = v.as_ints();
    if (xs.empty()) throw Error("{}: '{}.{}' is an empty array", f_.path(), arch_, suffix);
    for (int64_t x : xs)
      if (x != xs.front())
        throw Error("{}: '{}.{}' differs between layers, which tachyon does not support", f_.path(), arch_, suffix);
    return xs.front();
  }
  std::optional<int64_t> optional_int(const std::string& suffix) const {
    return find(suffix) ? std::optional<int64_t>(uniform_int(suffix)) : std::nullopt;
  }
  double float_or(const std::string& suffix, double fallback) const {
    const GgufValue* v = find(suffix);
    return v ? v->as_float() : fallback;
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

const ArchInfo& arch_info(const GgufFile& file, const std::string& arch) {
  for (const ArchInfo& a : kArchitectures)
    if (arch == a.gguf) return a;
  throw Error("{}: GGUF architecture '{}' is not supported (supported: {})", file.path(), arch,
              gguf_supported_architectures());
}

// llama.cpp's llama converter stores Llama-3.1-style rope scaling as a `rope_freqs.weight`
// tensor of per-frequency divisors, not as metadata. Recover the HF parameters that produce
// exactly those divisors (the published models use low 1, high 4 and an original context that
// is a power of two), or refuse.
Json llama3_rope_from_factors(const GgufFile& file, const GgufTensor& t, double theta, int64_t rot_dims) {
  if (t.type != GgmlType::F32 || t.num_elements() != rot_dims / 2)
    throw Error("{}: tensor 'rope_freqs.weight' must be F32 with {} values", file.path(), rot_dims / 2);
  std::vector<float> ff(static_cast<size_t>(rot_dims / 2));
  std::memcpy(ff.data(), t.data, ff.size() * 4);
  const double factor = *std::max_element(ff.begin(), ff.end());
  constexpr double kPi = 3.14159265358979323846;
  for (const double low : {1.0}) {
    for (const double high : {4.0}) {
      for (int64_t orig = 1; orig <= (int64_t{1} << 24); orig *= 2) {
        double worst = 0;
        for (size_t i = 0; i < ff.size(); ++i) {
          const double inv = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dims));
          const double wavelen = 2 * kPi / inv;
          double want;
          if (wavelen < static_cast<double>(orig) / high) want = 1.0;
          else if (wavelen > static_cast<double>(orig) / low) want = factor;
          else {
            const double smooth = (static_cast<double>(orig) / wavelen - low) / (high - low);
            want = 1.0 / ((1 - smooth) / factor + smooth);
          }
          worst = std::max(worst, std::abs(want - ff[i]) / want);
        }
        if (worst < 1e-5)
          return Json{{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", low},
                      {"high_freq_factor", high}, {"original_max_position_embeddings", orig}};
      }
    }
  }
  throw Error("{}: tensor 'rope_freqs.weight' holds rope frequency factors that match no llama3 rope scaling "
              "(factor {}, low 1, high 4, a power-of-two original context); tachyon cannot reproduce them",
              file.path(), factor);
}

Json rope_scaling(const GgufFile& file, const Meta& m, const std::string& arch, double theta, int64_t head_dim) {
  const GgufValue* type_value = m.find("rope.scaling.type");
  std::string type = type_value ? std::string(type_value->as_string()) : "none";
  double factor = m.float_or("rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = m.float_or("rope.scale_linear", 0.0);
  if (!type_value && factor != 0.0 && factor != 1.0) type = "linear";  // llama.cpp's default type
  if (const GgufTensor* freqs = file.find_tensor("rope_freqs.weight")) {
    if (arch != "llama")
      throw Error("{}: tensor 'rope_freqs.weight' (rope frequency factors) is not supported for '{}'", file.path(),
                  arch);
    if (type != "none" && !(type == "linear" && factor == 1.0))
      throw Error("{}: both rope_freqs.weight and rope scaling type '{}' are given", file.path(), type);
    return llama3_rope_from_factors(file, *freqs, theta, m.optional_int("rope.dimension_count").value_or(head_dim));
  }
  if (type == "none" || (type == "linear" && (factor == 0.0 || factor == 1.0))) return nullptr;
  const std::optional<int64_t> orig = m.optional_int("rope.scaling.original_context_length");
  if (type == "linear") return Json{{"rope_type", "linear"}, {"factor", factor}};
  if (type == "yarn") {
    Json r{{"rope_type", "yarn"}, {"factor", factor}};
    if (orig) r["original_max_position_embeddings"] = *orig;
    r["beta_fast"] = m.float_or("rope.scaling.yarn_beta_fast", 32.0);
    r["beta_slow"] = m.float_or("rope.scaling.yarn_beta_slow", 1.0);
    if (const GgufValue* a = m.find("rope.scaling.attn_factor")) r["attention_factor"] = a->as_float();
    if (const GgufValue* mul = m.find("rope.scaling.yarn_log_multiplier")) {
      if (arch != "deepseek2")
        throw Error("{}: '{}.rope.scaling.yarn_log_multiplier' (deepseek-style yarn) is not supported for '{}'",
                    file.path(), arch, arch);
      // The converter stores 0.1·mscale_all_dim. llama.cpp scales the attention by the mscale² of
      // mscale_all_dim and leaves the rotation unscaled: HF's mscale = mscale_all_dim does both.
      r["mscale_all_dim"] = mul->as_float() / 0.1;
      r["mscale"] = mul->as_float() / 0.1;
    } else if (arch == "gpt-oss") {
      // ggml's yarn rounds the correction range to whole dimensions (HF's truncate: true).
      r["truncate"] = true;
    }
    return r;
  }
  throw Error("{}: rope scaling type '{}' is not supported (supported: none, linear, yarn)", file.path(), type);
}

// DeepSeek-V2/V3 multi-head latent attention (llama.cpp's deepseek2): the HF MLA dimensions.
// Files from converters since mid-2025 write the MLA head sizes as key/value_length_mla (and
// key/value_length as the latent MQA head: kv_lora_rank + rope, kv_lora_rank); older ones write
// them as key/value_length. Returns the query-key head size.
int64_t deepseek2_attention(const GgufFile& file, const Meta& m, Json& j) {
  const int64_t rope = m.uniform_int("rope.dimension_count");
  const int64_t kv_lora = m.uniform_int("attention.kv_lora_rank");
  const bool mla_keys = m.find("attention.key_length_mla") != nullptr;
  const int64_t qk = m.uniform_int(mla_keys ? "attention.key_length_mla" : "attention.key_length");
  const int64_t v = m.uniform_int(mla_keys ? "attention.value_length_mla" : "attention.value_length");
  if (rope <= 0 || kv_lora <= 0 || qk <= rope || v <= 0)
    throw Error("{}: deepseek2 attention sizes do not fit together (rope.dimension_count {}, kv_lora_rank {}, "
                "query-key head {}, value head {})",
                file.path(), rope, kv_lora, qk, v);
  if (const auto q_lora = m.optional_int("attention.q_lora_rank")) j["q_lora_rank"] = *q_lora;
  else j["q_lora_rank"] = nullptr;
  j["kv_lora_rank"] = kv_lora;
  j["qk_rope_head_dim"] = rope;
  j["qk_nope_head_dim"] = qk - rope;
  j["v_head_dim"] = v;
  j["head_dim"] = rope;
  // llama.cpp rotates adjacent pairs for deepseek2 and the converter keeps the checkpoint's rows
  // (DeepSeek-V3 stores them for that layout: HF's rope_interleave).
  j["rope_interleave"] = true;
  for (const char* key : {"attention.temperature_scale", "attention.temperature_length", "attention.indexer.head_count"})
    if (m.find(key))
      throw Error("{}: 'deepseek2.{}' is set (a DeepSeek variant tachyon does not support)", file.path(), key);
  return qk;
}

// DeepSeekMoE routing and sizes. tachyon's deepseek_v3 routes with sigmoid scores plus a
// correction bias (noaux_tc); DeepSeek-V2's softmax gating (expert_gating_func 1, or no key:
// llama.cpp's default for old V2 files) is refused.
void deepseek2_moe(const GgufFile& file, const Meta& m, Json& j) {
  j["intermediate_size"] = m.uniform_int("feed_forward_length");
  j["moe_intermediate_size"] = m.uniform_int("expert_feed_forward_length");
  j["n_routed_experts"] = m.uniform_int("expert_count");
  j["num_experts_per_tok"] = m.uniform_int("expert_used_count");
  j["n_shared_experts"] = m.optional_int("expert_shared_count").value_or(0);
  const int64_t dense = m.optional_int("leading_dense_block_count").value_or(0);
  j["first_k_dense_replace"] = dense;
  j["routed_scaling_factor"] = m.float_or("expert_weights_scale", 1.0);
  const GgufValue* norm = m.find("expert_weights_norm");
  j["norm_topk_prob"] = norm ? norm->as_bool() : false;
  j["n_group"] = m.optional_int("expert_group_count").value_or(1);
  j["topk_group"] = m.optional_int("expert_group_used_count").value_or(1);
  const int64_t gating = m.optional_int("expert_gating_func").value_or(1);
  if (gating != 2)
    throw Error("{}: 'deepseek2.expert_gating_func' is {} ({}); tachyon's DeepSeek MoE routes with sigmoid scores "
                "(2, DeepSeek-V3)",
                file.path(), gating, m.find("expert_gating_func") ? "softmax" : "absent: softmax, DeepSeek-V2");
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "noaux_tc";
  const std::string bias = "blk." + std::to_string(dense) + ".exp_probs_b.bias";
  if (!file.find_tensor(bias))
    throw Error("{}: sigmoid-routed deepseek2 without tensor '{}' (the routing correction bias)", file.path(), bias);
}

}  // namespace

std::string gguf_supported_architectures() {
  std::string s;
  for (const ArchInfo& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.gguf);
  return s;
}

std::optional<std::string> gguf_model_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  static const std::regex split(R"(.*-\d{5}-of-\d{5}\.gguf)");
  auto check_split = [&](const fs::path& f) {
    if (std::regex_match(f.filename().string(), split))
      throw Error("{}: a split GGUF file (one of several parts); tachyon loads single-file GGUF models (merge the "
                  "parts with llama-gguf-split --merge)",
                  f.string());
  };
  if (fs::is_regular_file(p, ec)) {
    if (p.extension() != ".gguf") return std::nullopt;
    check_split(p);
    return path;
  }
  if (!fs::is_directory(p, ec) || fs::exists(p / "config.json", ec)) return std::nullopt;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.path().extension() == ".gguf" && e.is_regular_file()) found.push_back(e.path());
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  if (found.size() > 1) {
    std::string names;
    for (const auto& f : found) names += (names.empty() ? "" : ", ") + f.filename().string();
    throw Error("{}: holds {} GGUF files ({}); give the one to load", path, found.size(), names);
  }
  check_split(found.front());
  return found.front().string();
}

Json gguf_hf_config(const GgufFile& file) {
  const std::string arch(file.get("general.architecture").as_string());
  const ArchInfo& info = arch_info(file, arch);
  const Meta m(file, arch);
  Json j = Json::object();
  j["model_type"] = info.model_type;
  j["architectures"] = Json::array({info.hf_architecture});

  const int64_t hidden = m.uniform_int("embedding_length");
  const int64_t heads = m.uniform_int("attention.head_count");
  const int64_t layers = m.uniform_int("block_count");
  if (hidden <= 0 || heads <= 0 || layers <= 0)
    throw Error("{}: embedding_length, attention.head_count and block_count must be positive", file.path());
  if (layers > kMaxHiddenLayers)  // per-layer lists below are sized by it
    throw Error("{}: block_count {} is more than the {} layers tachyon loads", file.path(), layers, kMaxHiddenLayers);
  j["hidden_size"] = hidden;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = m.optional_int("attention.head_count_kv").value_or(heads);
  int64_t head_dim = 0;
  if (arch == "deepseek2") {
    // MLA's latent cache is written as one shared KV head (head_count_kv 1); the model's own
    // heads are the query heads. The block count includes NextN (MTP) layers, which are not loaded.
    j["num_key_value_heads"] = heads;
    j["num_hidden_layers"] = layers - m.optional_int("nextn_predict_layers").value_or(0);
    head_dim = deepseek2_attention(file, m, j);
  } else {
    head_dim = m.optional_int("attention.key_length").value_or(hidden / heads);
    const int64_t v_dim = m.optional_int("attention.value_length").value_or(head_dim);
    if (v_dim != head_dim)
      throw Error("{}: '{}.attention.value_length' {} differs from key_length {}, which '{}' does not support",
                  file.path(), arch, v_dim, head_dim, arch);
    j["head_dim"] = head_dim;
    if (const auto rot = m.optional_int("rope.dimension_count"); rot && *rot != head_dim)
      throw Error(
          "{}: '{}.rope.dimension_count' {} differs from the head size {} (partial rotary is not supported for "
          "'{}')",
          file.path(), arch, *rot, head_dim, arch);
  }
  j["rms_norm_eps"] = m.get("attention.layer_norm_rms_epsilon").as_float();
  j["max_position_embeddings"] = m.optional_int("context_length").value_or(4096);
  const double theta = m.float_or("rope.freq_base", 10000.0);
  j["rope_theta"] = theta;
  Json scaling = rope_scaling(file, m, arch, theta, head_dim);
  if (!scaling.is_null()) j["rope_scaling"] = scaling;

  // The vocabulary is the embedding's row count (ggml order: {hidden, vocab}).
  const GgufTensor& embd = file.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != hidden)
    throw Error("{}: tensor 'token_embd.weight' has dims {}, expected [{}, vocab]", file.path(), embd.dims_string(),
                hidden);
  j["vocab_size"] = embd.dims[1];
  if (const auto v = m.optional_int("vocab_size"); v && *v != embd.dims[1])
    throw Error("{}: '{}.vocab_size' is {} but token_embd.weight has {} rows", file.path(), arch, *v, embd.dims[1]);
  j["tie_word_embeddings"] = file.find_tensor("output.weight") == nullptr;
  j["attention_bias"] = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  j["torch_dtype"] = "bfloat16";

  if (arch == "deepseek2") {
    deepseek2_moe(file, m, j);
  } else if (arch == "gpt-oss") {
    j["num_local_experts"] = m.uniform_int("expert_count");
    j["num_experts_per_tok"] = m.uniform_int("expert_used_count");
    j["intermediate_size"] = m.uniform_int("expert_feed_forward_length");
    // llama.cpp's graph hard-codes gpt-oss's clamp (7) and alpha (1.702); a file naming another
    // limit is a different model.
    if (const GgufValue* limit = m.find("swiglu_clamp_exp"); limit && limit->as_float() != 7.0)
      throw Error("{}: 'gpt-oss.swiglu_clamp_exp' {} differs from gpt-oss's 7, which tachyon does not support",
                  file.path(), limit->as_float());
  } else if (arch == "qwen3moe") {
    j["num_experts"] = m.uniform_int("expert_count");
    j["num_experts_per_tok"] = m.uniform_int("expert_used_count");
    j["moe_intermediate_size"] = m.uniform_int("expert_feed_forward_length");
    j["norm_topk_prob"] = true;  // llama.cpp's qwen3moe graph always renormalises the top-k weights
    j["decoder_sparse_step"] = 1;
    if (const auto ff = m.optional_int("feed_forward_length")) j["intermediate_size"] = *ff;
    if (m.optional_int("expert_shared_count").value_or(0) != 0)
      throw Error("{}: qwen3moe with shared experts is not supported", file.path());
  } else {
    j["intermediate_size"] = m.uniform_int("feed_forward_length");
  }

  if (arch == "gemma3") {
    j["hidden_activation"] = "gelu_pytorch_tanh";
    // llama.cpp scales queries by 1/sqrt(head_dim), except for the 62-layer (27B) model where it is
    // 1/sqrt(hidden / heads): the HF query_pre_attn_scalar of each.
    j["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : head_dim;
    if (const auto window = m.optional_int("attention.sliding_window"); window && *window > 0) {
      j["sliding_window"] = *window;
      const int64_t period = m.optional_int("attention.sliding_window_pattern").value_or(6);
      Json types = Json::array();
      for (int64_t l = 0; l < layers; ++l)
        types.push_back(period == 0 || l % period < period - 1 ? "sliding_attention" : "full_attention");
      j["layer_types"] = types;
      j["rope_local_base_freq"] = m.float_or("rope.freq_base_swa", 10000.0);
    }
    if (const GgufValue* cap = m.find("final_logit_softcapping")) j["final_logit_softcapping"] = cap->as_float();
    if (const GgufValue* cap = m.find("attn_logit_softcapping")) j["attn_logit_softcapping"] = cap->as_float();
  } else if (arch == "gpt-oss") {
    j["hidden_act"] = "silu";
    // llama.cpp: every `period`-th layer (the last of each period) is full, the others slide
    // (default period 2: sliding, full, sliding, ...).
    const int64_t window = m.uniform_int("attention.sliding_window");
    const int64_t period = m.optional_int("attention.sliding_window_pattern").value_or(2);
    if (window <= 0 || period <= 0)
      throw Error("{}: 'gpt-oss.attention.sliding_window' {} and sliding_window_pattern {} must be positive",
                  file.path(), window, period);
    j["sliding_window"] = window;
    Json types = Json::array();
    for (int64_t l = 0; l < layers; ++l)
      types.push_back(l % period < period - 1 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
    if (m.find("rope.freq_base_swa") && m.float_or("rope.freq_base_swa", theta) != theta)
      throw Error("{}: 'gpt-oss.rope.freq_base_swa' differs from rope.freq_base, which tachyon does not support",
                  file.path());
  } else {
    j["hidden_act"] = "silu";
    if (const auto window = m.optional_int("attention.sliding_window"); window && *window > 0)
      throw Error("{}: '{}.attention.sliding_window' is set, which tachyon does not support for '{}'", file.path(),
                  arch, arch);
  }

  const GenerationConfig g = gguf_generation_config(file);
  if (!g.eos_token_ids.empty()) j["eos_token_id"] = g.eos_token_ids;
  if (g.bos_token_id) j["bos_token_id"] = *g.bos_token_id;
  return j;
}

ModelConfig gguf_model_config(const GgufFile& file) {
  return parse_model_config(gguf_hf_config(file), file.path());
}

GenerationConfig gguf_generation_config(const GgufFile& file) {
  GenerationConfig g;
  auto id = [&](const char* key) -> std::optional<int64_t> {
    const GgufValue* v = file.find(key);
    if (!v) return std::nullopt;
    return v->as_int();
  };
  if (auto eos = id("tokenizer.ggml.eos_token_id")) g.eos_token_ids.push_back(*eos);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto x = id(key); x && std::find(g.eos_token_ids.begin(), g.eos_token_ids.end(), *x) == g.eos_token_ids.end())
      g.eos_token_ids.push_back(*x);
  g.bos_token_id = id("tokenizer.ggml.bos_token_id");
  g.pad_token_id = id("tokenizer.ggml.padding_token_id");
  return g;
}

}  // namespace tachyon::io
