#include "io/config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>

#include "base/error.h"
#include "io/gguf_config.h"

namespace tachyon::io {

namespace {

bool present(const Json& obj, const std::string& key) { return obj.contains(key) && !obj[key].is_null(); }

std::vector<int64_t> read_id_list(const Json& obj, const std::string& key, const std::string& path) {
  if (!present(obj, key)) return {};
  const Json& v = obj[key];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array()) {
    std::vector<int64_t> ids;
    for (const Json& x : v) {
      if (!x.is_number_integer()) throw Error("{}: '{}' must hold integers", path, key);
      ids.push_back(x.get<int64_t>());
    }
    return ids;
  }
  throw Error("{}: '{}' must be an integer or a list of integers", path, key);
}

RopeParams parse_rope(const Json& p, double fallback_theta, const std::string& path, const std::string& field) {
  if (!p.is_object()) throw Error("{}: '{}' must be an object", path, field);
  RopeParams r;
  const std::string where = path + " (" + field + ")";
  r.rope_theta = json_double_or(p, "rope_theta", fallback_theta, where);
  if (present(p, "rope_type")) r.rope_type = p["rope_type"].get<std::string>();
  else if (present(p, "type")) r.rope_type = p["type"].get<std::string>();
  r.factor = json_double_or(p, "factor", 1.0, where);
  r.low_freq_factor = json_double_or(p, "low_freq_factor", 1.0, where);
  r.high_freq_factor = json_double_or(p, "high_freq_factor", 4.0, where);
  if (present(p, "original_max_position_embeddings"))
    r.original_max_position_embeddings = json_int(p, "original_max_position_embeddings", where);
  if (present(p, "attention_factor")) r.attention_factor = json_double_or(p, "attention_factor", 1.0, where);
  r.beta_fast = json_double_or(p, "beta_fast", 32.0, where);
  r.beta_slow = json_double_or(p, "beta_slow", 1.0, where);
  if (present(p, "mscale")) r.mscale = json_double_or(p, "mscale", 1.0, where);
  if (present(p, "mscale_all_dim")) r.mscale_all_dim = json_double_or(p, "mscale_all_dim", 0.0, where);
  r.truncate = json_bool_or(p, "truncate", true, where);
  r.partial_rotary_factor = json_double_or(p, "partial_rotary_factor", 1.0, where);
  static const char* kKnown[] = {"default", "linear", "dynamic", "llama3", "yarn", "longrope", "proportional"};
  bool known = false;
  for (const char* k : kKnown) known |= (r.rope_type == k);
  if (!known) throw Error("{}: unsupported rope_type '{}' in '{}'", path, r.rope_type, field);
  return r;
}

}  // namespace

int64_t json_int(const Json& obj, const std::string& key, const std::string& path) {
  if (!present(obj, key)) throw Error("{}: required field '{}' is missing", path, key);
  const Json& v = obj[key];
  // Only a number inside int64's range converts: casting any other double is undefined behaviour
  // (UBSan, found by fuzzing config.json), and a uint64 past INT64_MAX would wrap to a negative.
  constexpr double kInt64End = 9223372036854775808.0;  // 2^63
  const bool out_of_range = (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) ||
                            (v.is_number_float() && !(v.get<double>() >= -kInt64End && v.get<double>() < kInt64End));
  if (out_of_range) throw Error("{}: field '{}' is out of range for an integer: {}", path, key, v.dump());
  if (!v.is_number_integer()) {
    if (v.is_number_float() && v.get<double>() == std::trunc(v.get<double>())) return static_cast<int64_t>(v.get<double>());
    throw Error("{}: field '{}' must be an integer, got {}", path, key, v.dump());
  }
  return v.get<int64_t>();
}

int64_t json_int_or(const Json& obj, const std::string& key, int64_t fallback, const std::string& path) {
  return present(obj, key) ? json_int(obj, key, path) : fallback;
}

double json_double_or(const Json& obj, const std::string& key, double fallback, const std::string& path) {
  if (!present(obj, key)) return fallback;
  if (!obj[key].is_number()) throw Error("{}: field '{}' must be a number, got {}", path, key, obj[key].dump());
  return obj[key].get<double>();
}

bool json_bool_or(const Json& obj, const std::string& key, bool fallback, const std::string& path) {
  if (!present(obj, key)) return fallback;
  if (!obj[key].is_boolean()) throw Error("{}: field '{}' must be true or false, got {}", path, key, obj[key].dump());
  return obj[key].get<bool>();
}

const RopeParams& ModelConfig::rope_for(const std::string& layer_type) const {
  auto it = rope.find(layer_type);
  if (it != rope.end()) return it->second;
  it = rope.find("");
  if (it == rope.end()) throw Error("{}: no rope parameters for layer type '{}'", path, layer_type);
  return it->second;
}

ModelConfig parse_model_config(const Json& j, const std::string& path) {
  if (!j.is_object()) throw Error("{}: config is not a JSON object", path);
  ModelConfig c;
  c.raw = j;
  c.path = path;
  if (!present(j, "model_type") || !j["model_type"].is_string())
    throw Error("{}: required field 'model_type' is missing", path);
  c.model_type = j["model_type"].get<std::string>();
  if (present(j, "architectures") && j["architectures"].is_array())
    for (const Json& a : j["architectures"])
      if (a.is_string()) c.architectures.push_back(a.get<std::string>());
  c.vocab_size = json_int(j, "vocab_size", path);
  c.hidden_size = json_int(j, "hidden_size", path);
  c.intermediate_size = json_int_or(j, "intermediate_size", 0, path);
  c.num_hidden_layers = json_int(j, "num_hidden_layers", path);
  c.num_attention_heads = json_int(j, "num_attention_heads", path);
  c.num_key_value_heads = json_int_or(j, "num_key_value_heads", c.num_attention_heads, path);
  if (c.num_attention_heads <= 0 || c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.vocab_size <= 0)
    throw Error("{}: vocab_size, hidden_size, num_hidden_layers and num_attention_heads must be positive", path);
  // Per-layer lists are built from num_hidden_layers before any tensor is read: a crafted count
  // would allocate without bound (found by fuzzing). The largest published models have ~160 layers.
  if (c.num_hidden_layers > kMaxHiddenLayers)
    throw Error("{}: num_hidden_layers {} is more than the {} layers tachyon loads", path, c.num_hidden_layers,
                kMaxHiddenLayers);
  c.head_dim = json_int_or(j, "head_dim", c.hidden_size / c.num_attention_heads, path);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    throw Error("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", path,
                c.num_attention_heads, c.num_key_value_heads);
  c.rms_norm_eps = json_double_or(j, "rms_norm_eps", 1e-6, path);
  c.max_position_embeddings = json_int_or(j, "max_position_embeddings", 4096, path);
  c.tie_word_embeddings = json_bool_or(j, "tie_word_embeddings", false, path);
  c.attention_bias = json_bool_or(j, "attention_bias", false, path);
  if (present(j, "sliding_window")) c.sliding_window = json_int(j, "sliding_window", path);
  c.dtype = present(j, "dtype") ? j["dtype"].get<std::string>()
                                : (present(j, "torch_dtype") ? j["torch_dtype"].get<std::string>() : "float32");
  c.eos_token_ids = read_id_list(j, "eos_token_id", path);
  if (present(j, "bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_token_id = j["bos_token_id"].get<int64_t>();

  // layer_types: explicit (v5), else derived the way transformers derives it.
  if (present(j, "layer_types")) {
    for (const Json& t : j["layer_types"]) c.layer_types.push_back(t.get<std::string>());
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)
      throw Error("{}: layer_types has {} entries but num_hidden_layers is {}", path, c.layer_types.size(),
                  c.num_hidden_layers);
  } else {
    const bool sliding_everywhere = c.model_type == "mistral" && c.sliding_window.has_value();
    const bool qwen_sliding = json_bool_or(j, "use_sliding_window", false, path) && c.sliding_window.has_value();
    const int64_t max_window_layers = json_int_or(j, "max_window_layers", c.num_hidden_layers, path);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool sliding = sliding_everywhere || (qwen_sliding && i >= max_window_layers);
      c.layer_types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
  }

  // RoPE: v5 rope_parameters (flat, or one object per layer type); v4 rope_theta + rope_scaling.
  const double legacy_theta = json_double_or(j, "rope_theta", 10000.0, path);
  if (present(j, "rope_parameters")) {
    const Json& rp = j["rope_parameters"];
    if (!rp.is_object()) throw Error("{}: 'rope_parameters' must be an object", path);
    bool per_type = !rp.empty();
    for (auto it = rp.begin(); it != rp.end(); ++it) per_type &= it.value().is_object();
    if (per_type) {
      for (auto it = rp.begin(); it != rp.end(); ++it)
        c.rope[it.key()] = parse_rope(it.value(), legacy_theta, path, "rope_parameters." + it.key());
    } else {
      c.rope[""] = parse_rope(rp, legacy_theta, path, "rope_parameters");
    }
  } else {
    RopeParams base = present(j, "rope_scaling") ? parse_rope(j["rope_scaling"], legacy_theta, path, "rope_scaling")
                                                 : RopeParams{};
    base.rope_theta = legacy_theta;
    c.rope[""] = base;
    if (present(j, "rope_local_base_freq")) {  // gemma3: sliding layers use their own base, unscaled
      RopeParams local;
      local.rope_theta = json_double_or(j, "rope_local_base_freq", 10000.0, path);
      c.rope["sliding_attention"] = local;
      c.rope["full_attention"] = base;
    }
  }
  if (present(j, "partial_rotary_factor"))
    for (auto& [type, r] : c.rope) r.partial_rotary_factor = json_double_or(j, "partial_rotary_factor", 1.0, path);
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  // Model resolution hands GGUF files and folders through (io/model_resolve.h); the loader is
  // where they stop, with the file named.
  std::error_code ec;
  if (const auto gguf = gguf_model_file(model_dir)) return gguf_model_config(*GgufFile::open(*gguf));
  if (!fs::is_directory(model_dir, ec)) throw Error("{}: not a model directory", model_dir);
  const std::string path = (fs::path(model_dir) / "config.json").string();
  if (!fs::exists(path)) {
    throw Error("{}: no config.json in the model directory", model_dir);
  }
  return parse_model_config(parse_json(read_file(path), path), path);
}

GenerationConfig load_generation_config(const std::string& model_dir) {
  if (const auto gguf = gguf_model_file(model_dir)) return gguf_generation_config(*GgufFile::open(*gguf));
  GenerationConfig g;
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return g;
  const Json j = parse_json(read_file(path), path);
  if (!j.is_object()) throw Error("{}: not a JSON object", path);
  g.eos_token_ids = read_id_list(j, "eos_token_id", path);
  if (present(j, "bos_token_id") && j["bos_token_id"].is_number_integer()) g.bos_token_id = j["bos_token_id"].get<int64_t>();
  if (present(j, "pad_token_id") && j["pad_token_id"].is_number_integer()) g.pad_token_id = j["pad_token_id"].get<int64_t>();
  g.do_sample = json_bool_or(j, "do_sample", false, path);
  if (present(j, "temperature")) g.temperature = json_double_or(j, "temperature", 1.0, path);
  if (present(j, "top_p")) g.top_p = json_double_or(j, "top_p", 1.0, path);
  if (present(j, "top_k")) g.top_k = json_int(j, "top_k", path);
  if (present(j, "min_p")) g.min_p = json_double_or(j, "min_p", 0.0, path);
  if (present(j, "repetition_penalty")) g.repetition_penalty = json_double_or(j, "repetition_penalty", 1.0, path);
  return g;
}

}  // namespace tachyon::io
