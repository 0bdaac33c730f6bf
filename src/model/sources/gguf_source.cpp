#include "model/sources/gguf_source.h"

#include <cstring>
#include <numeric>
#include <regex>

#include "base/error.h"
#include "io/gguf_config.h"
#include "model/sources/gguf_repack.h"
#include "model/weights.h"

namespace tachyon::model {

using io::GgmlType;
using io::GgufTensor;

namespace {

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Groups of columns per scale after repacking (0: a float type).
int32_t repacked_group(GgmlType t) {
  if (is_float_type(t)) return 0;
  return t == GgmlType::Q6_K ? 16 : 32;
}

struct LayerName {
  const char* gguf;
  const char* hf;
  const char* sibling;  // fused with the others of the same sibling name (nullptr: alone)
};

// Per-layer tensors ("blk.N.<gguf>.{weight,bias}" ↔ "model.layers.N.<hf>.{weight,bias}").
constexpr LayerName kLayerNames[] = {
    {"attn_norm", "input_layernorm", nullptr},
    {"attn_q", "self_attn.q_proj", "attn_qkv"},
    {"attn_k", "self_attn.k_proj", "attn_qkv"},
    {"attn_v", "self_attn.v_proj", "attn_qkv"},
    {"attn_output", "self_attn.o_proj", nullptr},
    {"attn_q_norm", "self_attn.q_norm", nullptr},
    {"attn_k_norm", "self_attn.k_norm", nullptr},
    {"ffn_gate", "mlp.gate_proj", "ffn_gate_up"},
    {"ffn_up", "mlp.up_proj", "ffn_gate_up"},
    {"ffn_down", "mlp.down_proj", nullptr},
    {"ffn_gate_inp", "mlp.gate", nullptr},
};
// Gemma3's four norms per layer.
constexpr LayerName kGemmaNorms[] = {
    {"post_attention_norm", "post_attention_layernorm", nullptr},
    {"ffn_norm", "pre_feedforward_layernorm", nullptr},
    {"post_ffw_norm", "post_feedforward_layernorm", nullptr},
};
constexpr LayerName kExperts[] = {
    {"ffn_gate_exps", "gate_proj", "exps_gate_up"},
    {"ffn_up_exps", "up_proj", "exps_gate_up"},
    {"ffn_down_exps", "down_proj", nullptr},
};

}  // namespace

GgufSource::GgufSource(std::shared_ptr<const io::GgufFile> file, const io::ModelConfig& config)
    : file_(std::move(file)) {
  const std::string arch(file_->get("general.architecture").as_string());
  const bool gemma = arch == "gemma3";
  const bool deepseek = arch == "deepseek2";
  const bool gpt_oss = arch == "gpt-oss";
  const bool llama_rope = arch == "llama";  // converted with LlamaModel.permute
  static const std::regex layer_re(R"(blk\.(\d+)\.([a-z_0-9]+)\.(weight|bias))");
  std::vector<std::string> unmapped;
  for (const GgufTensor& t : file_->tensors()) {
    const std::string& n = t.name;
    if (n == "token_embd.weight") { add("model.embed_tokens.weight", t, -1, Fix::None, 0); continue; }
    if (n == "output_norm.weight") {
      add("model.norm.weight", t, -1, gemma ? Fix::GemmaNormShift : Fix::None, 0);
      continue;
    }
    if (n == "output.weight") { add("lm_head.weight", t, -1, Fix::None, 0); continue; }
    if (n == "rope_freqs.weight") continue;  // turned into rope scaling parameters by io::gguf_hf_config
    std::smatch m;
    if (!std::regex_match(n, m, layer_re)) { unmapped.push_back(n); continue; }
    const std::string layer = m[1].str(), part = m[2].str(), kind = m[3].str();
    const std::string prefix = "model.layers." + layer + ".";
    if (deepseek && std::stoll(layer) >= config.num_hidden_layers) continue;  // NextN (MTP) blocks
    if (deepseek && add_deepseek2(prefix, part, kind, t)) continue;
    if (gpt_oss && add_gpt_oss(prefix, part, kind, t)) continue;
    bool mapped = false;
    for (const LayerName& ln : kExperts) {
      if (part != ln.gguf || kind != "weight") continue;
      if (t.dims.size() != 3)
        throw Error("{}: tensor '{}' has dims {}, expected [cols, rows, experts]", file_->path(), n, t.dims_string());
      for (int64_t e = 0; e < t.dims[2]; ++e)
        add(prefix + "mlp.experts." + std::to_string(e) + "." + ln.hf + ".weight", t, e, Fix::None, 0);
      mapped = true;
    }
    if (gemma)
      for (const LayerName& ln : kGemmaNorms)
        if (part == ln.gguf) {
          add(prefix + ln.hf + "." + kind, t, -1, Fix::GemmaNormShift, 0);
          mapped = true;
        }
    if (!mapped && !gemma && part == "ffn_norm") {
      add(prefix + "post_attention_layernorm." + kind, t, -1, Fix::None, 0);
      mapped = true;
    }
    for (const LayerName& ln : kLayerNames) {
      if (mapped || part != ln.gguf) continue;
      Fix fix = Fix::None;
      int64_t heads = 0;
      if (llama_rope && (part == "attn_q" || part == "attn_k")) {
        fix = Fix::LlamaRopeRows;
        heads = part == "attn_q" ? config.num_attention_heads : config.num_key_value_heads;
      }
      if (gemma && (part == "attn_norm" || part == "attn_q_norm" || part == "attn_k_norm")) fix = Fix::GemmaNormShift;
      add(prefix + ln.hf + "." + kind, t, -1, fix, heads);
      if (ln.sibling) entries_[prefix + ln.hf + "." + kind].sibling_group = "blk." + layer + "." + ln.sibling + "." + kind;
      mapped = true;
    }
    if (!mapped) unmapped.push_back(n);
  }
  // The tensors rebuilt from two GGUF parts, once both are known.
  for (const auto& [name, parts] : pairs_) {
    const auto [a, b] = parts;
    if (!a || !b)
      throw Error("{}: tensor '{}' has no partner '{}' to rebuild '{}' from", file_->path(), (a ? a : b)->name,
                  (a ? a : b)->name.find("k_b") != std::string::npos   ? "attn_v_b"
                  : (a ? a : b)->name.find("v_b") != std::string::npos ? "attn_k_b"
                  : (a ? a : b)->name.find("gate") != std::string::npos ? "ffn_up_exps"
                                                                         : "ffn_gate_exps",
                  name);
    const bool bias = name.ends_with("_bias");
    if (name.ends_with("kv_b_proj.weight")) {
      // k_b {nope, kv_lora, H}, v_b {kv_lora, v, H}
      if (a->dims.size() != 3 || b->dims.size() != 3 || a->dims[1] != b->dims[0] || a->dims[2] != b->dims[2])
        throw Error("{}: tensors '{}' {} and '{}' {} do not fit together as k_b {{nope, kv_lora, heads}} and v_b "
                    "{{kv_lora, v, heads}}",
                    file_->path(), a->name, a->dims_string(), b->name, b->dims_string());
      add_rebuilt(name, *a, b, Fix::MlaKvB, {a->dims[2] * (a->dims[0] + b->dims[1]), a->dims[1]});
    } else {
      if (a->dims != b->dims || a->dims.size() != (bias ? 2u : 3u))
        throw Error("{}: tensors '{}' {} and '{}' {} must have equal dims {}", file_->path(), a->name,
                    a->dims_string(), b->name, b->dims_string(), bias ? "{I, experts}" : "{hidden, I, experts}");
      if (bias) add_rebuilt(name, *a, b, Fix::InterleavedBias, {a->dims[1], 2 * a->dims[0]});
      else add_rebuilt(name, *a, b, Fix::InterleavedExperts, {a->dims[2], a->dims[0], 2 * a->dims[1]});
    }
  }
  // Experts' gate/up are fused per expert.
  for (auto& [name, e] : entries_)
    if (e.expert >= 0 && (name.ends_with("gate_proj.weight") || name.ends_with("up_proj.weight")))
      e.sibling_group = e.tensor->name.substr(0, e.tensor->name.find(".ffn_")) + ".exps_gate_up." + std::to_string(e.expert);
  if (!unmapped.empty()) {
    std::string list;
    for (const auto& n : unmapped) list += (list.empty() ? "" : ", ") + n;
    throw Error("{}: GGUF tensors that tachyon cannot place in a '{}' model: {}", file_->path(), arch, list);
  }
  resolve_groups();
}

void GgufSource::add(const std::string& hf_name, const GgufTensor& t, int64_t expert, Fix fix, int64_t rope_heads) {
  Entry e;
  e.tensor = &t;
  e.expert = expert;
  e.fix = fix;
  e.rope_heads = rope_heads;
  if (t.dims.size() == 1) e.shape = {t.dims[0]};
  else e.shape = {t.dims[1], t.dims[0]};  // 2-D, or one expert of a 3-D tensor
  if (t.dims.size() > 3 || (t.dims.size() == 3 && expert < 0))
    throw Error("{}: tensor '{}' has dims {}, which tachyon cannot use as '{}'", file_->path(), t.name,
                t.dims_string(), hf_name);
  if (fix == Fix::LlamaRopeRows && (rope_heads <= 0 || e.shape[0] % (2 * rope_heads) != 0))
    throw Error("{}: tensor '{}' has {} rows, not a whole number of {} heads of even size", file_->path(), t.name,
                e.shape[0], rope_heads);
  entries_[hf_name] = std::move(e);
}

void GgufSource::add_rebuilt(const std::string& hf_name, const GgufTensor& t, const GgufTensor* second, Fix fix,
                             std::vector<int64_t> shape) {
  Entry e;
  e.tensor = &t;
  e.second = second;
  e.fix = fix;
  e.shape = std::move(shape);
  entries_[hf_name] = std::move(e);
}

bool GgufSource::add_deepseek2(const std::string& prefix, const std::string& part, const std::string& kind,
                               const GgufTensor& t) {
  struct Name {
    const char* gguf;
    const char* hf;
    const char* sibling;
  };
  static constexpr Name kNames[] = {
      {"attn_q_a", "self_attn.q_a_proj", nullptr},
      {"attn_q_a_norm", "self_attn.q_a_layernorm", nullptr},
      {"attn_q_b", "self_attn.q_b_proj", nullptr},
      {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa", nullptr},
      {"attn_kv_a_norm", "self_attn.kv_a_layernorm", nullptr},
      {"attn_kv_b", "self_attn.kv_b_proj", nullptr},
      {"ffn_gate_shexp", "mlp.shared_experts.gate_proj", "shexp_gate_up"},
      {"ffn_up_shexp", "mlp.shared_experts.up_proj", "shexp_gate_up"},
      {"ffn_down_shexp", "mlp.shared_experts.down_proj", nullptr},
  };
  if (part == "attn_k_b" || part == "attn_v_b") {
    if (kind != "weight") return false;
    auto& pair = pairs_[prefix + "self_attn.kv_b_proj.weight"];
    (part == "attn_k_b" ? pair.first : pair.second) = &t;
    return true;
  }
  if (part == "exp_probs_b" && kind == "bias") {
    add(prefix + "mlp.gate.e_score_correction_bias", t, -1, Fix::None, 0);
    return true;
  }
  for (const Name& n : kNames) {
    if (part != n.gguf) continue;
    const std::string hf = prefix + n.hf + "." + kind;
    add(hf, t, -1, Fix::None, 0);
    if (n.sibling) entries_[hf].sibling_group = prefix + n.sibling + "." + kind;
    return true;
  }
  return false;
}

bool GgufSource::add_gpt_oss(const std::string& prefix, const std::string& part, const std::string& kind,
                             const GgufTensor& t) {
  if (part == "post_attention_norm") {
    add(prefix + "post_attention_layernorm." + kind, t, -1, Fix::None, 0);
    return true;
  }
  if (part == "attn_sinks" && kind == "weight") {
    add(prefix + "self_attn.sinks", t, -1, Fix::None, 0);
    return true;
  }
  if (part == "ffn_gate_inp") {
    add(prefix + "mlp.router." + kind, t, -1, Fix::None, 0);
    return true;
  }
  if (part == "ffn_down_exps") {
    if (kind == "bias") {
      add(prefix + "mlp.experts.down_proj_bias", t, -1, Fix::None, 0);
    } else {
      if (t.dims.size() != 3)
        throw Error("{}: tensor '{}' has dims {}, expected [I, hidden, experts]", file_->path(), t.name,
                    t.dims_string());
      add_rebuilt(prefix + "mlp.experts.down_proj", t, nullptr, Fix::ExpertsTransposed,
                  {t.dims[2], t.dims[0], t.dims[1]});
    }
    return true;
  }
  if (part == "ffn_gate_exps" || part == "ffn_up_exps") {
    auto& pair = pairs_[prefix + (kind == "bias" ? "mlp.experts.gate_up_proj_bias" : "mlp.experts.gate_up_proj")];
    (part == "ffn_gate_exps" ? pair.first : pair.second) = &t;
    return true;
  }
  return false;
}

void GgufSource::resolve_groups() {
  std::map<std::string, std::vector<GgmlType>> types;
  for (const auto& [name, e] : entries_)
    if (!e.sibling_group.empty()) types[e.sibling_group].push_back(e.tensor->type);
  for (const auto& [group, ts] : types) {
    GroupFormat f;
    for (GgmlType t : ts) f.mixed |= t != ts.front();
    if (f.mixed) {
      std::string names;
      for (GgmlType t : ts) {
        f.dense_f32 |= is_float_type(t);
        if (!is_float_type(t)) f.group = std::gcd(f.group, repacked_group(t));
        const std::string n = io::ggml_type_name(t);
        if (names.find(n) == std::string::npos) names += (names.empty() ? "" : "+") + n;
      }
      f.type = names + (f.dense_f32 ? " as F32" : " as Affine 8-bit g" + std::to_string(f.group) + " F32");
    }
    groups_[group] = f;
  }
}

WeightSource::Info GgufSource::info(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("{}: tensor '{}' is missing", file_->path(), name);
  const Entry& e = it->second;
  Info out;
  out.shape = e.shape;
  out.file = file_->path();
  out.type = io::ggml_type_name(e.tensor->type);
  out.dense = is_float_type(e.tensor->type) && e.fix != Fix::GemmaNormShift;
  if (e.second) {
    const GgmlType a = e.tensor->type, b = e.second->type;
    const bool f32 = e.fix != Fix::InterleavedExperts || a != b;
    if (a != b) out.type += "+" + io::ggml_type_name(b);
    if (f32 && !(a == GgmlType::F32 && b == GgmlType::F32)) out.type += " as F32";
    out.dense = f32 || is_float_type(a);
  }
  if (!e.sibling_group.empty()) {
    const GroupFormat& g = groups_.at(e.sibling_group);
    if (g.mixed) {
      out.type = g.type;
      out.dense = false;
    }
  }
  return out;
}

std::vector<std::string> GgufSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const GgufTensor* GgufSource::gguf_tensor(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.tensor;
}

HostTensor GgufSource::load(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("{}: tensor '{}' is missing", file_->path(), name);
  return load_entry(name, it->second);
}

HostTensor GgufSource::load_entry(const std::string& name, const Entry& e) const {
  if (e.second || e.fix == Fix::ExpertsTransposed) return load_rebuilt(e);
  const GgufTensor& t = *e.tensor;
  const int64_t cols = t.dims[0];
  const int64_t rows = t.dims.size() == 1 ? 1 : t.dims[1];
  const uint8_t* data = t.data;
  if (e.expert >= 0) data += static_cast<uint64_t>(e.expert) * (t.num_bytes / static_cast<uint64_t>(t.dims[2]));
  const std::string label = t.name + (e.expert >= 0 ? " (expert " + std::to_string(e.expert) + ")" : "");
  if (!ggml_type_supported(t.type))
    throw Error("{}: tensor '{}' has GGUF type {}, which tachyon does not support (supported: {})", file_->path(),
                t.name, io::ggml_type_name(t.type), supported_ggml_types());
  HostTensor out = repack_ggml_rows(t.type, data, rows, cols, label);
  out.shape = e.shape;

  if (e.fix == Fix::GemmaNormShift) {
    HostTensor f = to_dense_f32(out);
    auto* v = const_cast<float*>(static_cast<const float*>(f.weight.data));
    for (int64_t i = 0; i < rows * cols; ++i) v[i] -= 1.0f;
    out = std::move(f);
  }
  if (e.fix == Fix::LlamaRopeRows) {
    // llama.cpp's row h·D + 2i + j holds transformers' row h·D + j·D/2 + i (i < D/2, j ∈ {0, 1}).
    const bool vector = t.dims.size() == 1;
    const int64_t n = vector ? cols : rows, d = n / e.rope_heads;
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t h = 0; h < e.rope_heads; ++h)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t i = 0; i < d / 2; ++i) perm[static_cast<size_t>(h * d + j * d / 2 + i)] = h * d + 2 * i + j;
    if (vector) {  // a bias: permute its elements (as F32)
      HostTensor f = to_dense_f32(out);
      const auto* src = static_cast<const float*>(f.weight.data);
      std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
      auto* dst = reinterpret_cast<float*>(bytes.data());
      for (int64_t k = 0; k < n; ++k) dst[k] = src[perm[static_cast<size_t>(k)]];
      HostTensor p;
      p.owned.push_back(std::move(bytes));
      p.weight = Weight{p.owned.back().data(), DType::F32, 1, n};
      p.shape = e.shape;
      out = std::move(p);
    } else {
      out = permute_rows(out, perm);
    }
  }
  if (!e.sibling_group.empty()) {
    const GroupFormat& g = groups_.at(e.sibling_group);
    if (g.mixed) out = g.dense_f32 ? to_dense_f32(out) : widen_to_affine8(out, g.group);
  }
  (void)name;
  return out;
}

namespace {

// All rows of a GGUF tensor (3-D: every expert's, one after another) in a kernels/weight.h form.
HostTensor repack_all(const io::GgufFile& file, const GgufTensor& t) {
  if (!ggml_type_supported(t.type))
    throw Error("{}: tensor '{}' has GGUF type {}, which tachyon does not support (supported: {})", file.path(),
                t.name, io::ggml_type_name(t.type), supported_ggml_types());
  int64_t rows = 1;
  for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
  HostTensor out = repack_ggml_rows(t.type, t.data, rows, t.dims[0], t.name);
  out.shape = {rows, t.dims[0]};
  return out;
}

const float* f32_data(const HostTensor& t) { return static_cast<const float*>(t.weight.data); }

HostTensor f32_tensor(std::vector<float> values, int64_t rows, int64_t cols) {
  HostTensor out;
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  out.owned.push_back(std::move(bytes));
  out.weight = Weight{out.owned.back().data(), DType::F32, rows, cols};
  return out;
}

}  // namespace

HostTensor GgufSource::load_rebuilt(const Entry& e) const {
  const GgufTensor& a = *e.tensor;
  switch (e.fix) {
    case Fix::ExpertsTransposed: {  // {in, out, E}: E matrices [out, in], the transpose of HF's [E, in, out]
      HostTensor out = repack_all(*file_, a);
      out.shape = e.shape;
      out.stored_transposed = true;
      return out;
    }
    case Fix::InterleavedExperts: {
      // gate and up {H, I, E} → E matrices [2I, H] whose row 2j is gate row j and 2j + 1 up row j
      // (the Hub's interleaved gate_up_proj, stored transposed).
      HostTensor gate = repack_all(*file_, a), up = repack_all(*file_, *e.second);
      if (a.type != e.second->type) {  // one storage for both halves
        gate = to_dense_f32(gate);
        up = to_dense_f32(up);
      }
      const int64_t I = a.dims[1], E = a.dims[2];
      HostTensor both = concat_rows({gate, up}, a.name);
      std::vector<int64_t> perm(static_cast<size_t>(2 * E * I));
      for (int64_t x = 0; x < E; ++x)
        for (int64_t j = 0; j < I; ++j) {
          perm[static_cast<size_t>(x * 2 * I + 2 * j)] = x * I + j;
          perm[static_cast<size_t>(x * 2 * I + 2 * j + 1)] = E * I + x * I + j;
        }
      HostTensor out = permute_rows(both, perm);  // copies every row: nothing points into `both`
      out.shape = e.shape;
      out.stored_transposed = true;
      return out;
    }
    case Fix::InterleavedBias: {  // {I, E} x2 → [E, 2I], gate at even columns
      const HostTensor gate = to_dense_f32(repack_all(*file_, a)), up = to_dense_f32(repack_all(*file_, *e.second));
      const int64_t I = a.dims[0], E = a.dims[1];
      std::vector<float> v(static_cast<size_t>(2 * E * I));
      for (int64_t x = 0; x < E; ++x)
        for (int64_t j = 0; j < I; ++j) {
          v[static_cast<size_t>(x * 2 * I + 2 * j)] = f32_data(gate)[x * I + j];
          v[static_cast<size_t>(x * 2 * I + 2 * j + 1)] = f32_data(up)[x * I + j];
        }
      HostTensor out = f32_tensor(std::move(v), E, 2 * I);
      out.shape = e.shape;
      return out;
    }
    case Fix::MlaKvB: {
      // k_b {nope, kv_lora, H}: per head W_uk_hᵀ [kv_lora, nope]; v_b {kv_lora, v, H}: W_uv_h [v, kv_lora].
      // kv_b_proj rows per head: nope rows of W_uk_h, then v rows of W_uv_h.
      const HostTensor kb = to_dense_f32(repack_all(*file_, a)), vb = to_dense_f32(repack_all(*file_, *e.second));
      const int64_t nope = a.dims[0], r = a.dims[1], H = a.dims[2], v = e.second->dims[1];
      std::vector<float> out(static_cast<size_t>(H * (nope + v) * r));
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < nope; ++i)
          for (int64_t c = 0; c < r; ++c)
            out[static_cast<size_t>((h * (nope + v) + i) * r + c)] = f32_data(kb)[(h * r + c) * nope + i];
        for (int64_t j = 0; j < v; ++j)
          for (int64_t c = 0; c < r; ++c)
            out[static_cast<size_t>((h * (nope + v) + nope + j) * r + c)] = f32_data(vb)[(h * v + j) * r + c];
      }
      HostTensor t = f32_tensor(std::move(out), H * (nope + v), r);
      t.shape = e.shape;
      return t;
    }
    default: break;
  }
  throw Error("{}: tensor '{}' cannot be rebuilt", file_->path(), a.name);
}

std::shared_ptr<WeightSource> open_gguf_source(const std::string& path, const io::ModelConfig& config) {
  const auto file = io::gguf_model_file(path);
  if (!file) return nullptr;
  return std::make_shared<GgufSource>(io::GgufFile::open(*file), config);
}

}  // namespace tachyon::model
