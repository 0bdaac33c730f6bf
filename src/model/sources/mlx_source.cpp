// MLX affine checkpoints (mlx-community, written by mlx-lm): a quantized module X stores
//   X.weight  U32 [out, in·bits/32]  codes, 32/bits per word, the first code in the low bits
//   X.scales, X.biases  F16/BF16 [out, in/group_size]   w = code·scale + bias
// config.json: "quantization" (or "quantization_config") {"group_size": 64, "bits": 4,
// "mode": "affine"} plus per-module entries keyed by the module path ("model.layers.0.mlp.gate_proj":
// {"group_size": 64, "bits": 8}, or false for a module left in floats). Embeddings and lm_head are
// quantized the same way.
//
// The word's codes in little-endian byte order are exactly kernels/weight.h's host packing
// (4-bit: two per byte, even column in the low nibble; 8-bit: one per byte), so the codes, scales
// and biases are handed out in place. → Affine.
#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

struct MlxParams {
  int64_t bits = 0, group = 0;
  std::string mode = "affine";
};

class MlxSource : public PackedSource {
 public:
  MlxSource(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) : PackedSource(std::move(ckpt), "MLX"), q_(q) {
    defaults_ = params_from(q_, "quantization", {});
    index();
  }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.dtype == DType::U32 && t.name.size() > 7 && t.name.ends_with(".weight")) return t.name;
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override {
    const std::string m = module_of(logical);
    return {m + ".scales", m + ".biases"};
  }

  Info describe(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const io::TensorView& w = checkpoint().get(logical);
    const MlxParams p = params_of(m);
    if (p.mode != "affine")
      throw Error("tensor '{}': MLX quantization mode '{}' is not supported (supported: affine)", logical, p.mode);
    if (p.bits != 4 && p.bits != 8)
      throw Error("tensor '{}': MLX affine {}-bit weights are not supported (supported: 4, 8)", logical, p.bits);
    if (p.group != 32 && p.group != 64 && p.group != 128)
      throw Error("tensor '{}': MLX group_size {} is not supported (supported: 32, 64, 128)", logical, p.group);
    if (w.shape.size() != 2)
      throw Error("tensor '{}' in {} has shape {}; MLX quantized weights are 2-D (stacked experts are not supported)",
                  logical, w.file, w.shape_string());
    const int64_t rows = w.shape[0], cols = w.shape[1] * 32 / p.bits;
    if (cols % p.group != 0)
      throw Error("tensor '{}' in {}: {} columns are not a multiple of group_size {}", logical, w.file, cols, p.group);
    const std::string why = fmt::format("'{}' ({} x {}, {}-bit g{})", logical, rows, cols, p.bits, p.group);
    for (const char* part : {".scales", ".biases"}) {
      const io::TensorView& s = this->part(logical, m + part);
      expect_dtype(s, {DType::F16, DType::BF16, DType::F32}, why);
      expect_shape(s, {rows, cols / p.group}, why);
    }
    if (checkpoint().get(m + ".scales").dtype != checkpoint().get(m + ".biases").dtype)
      throw Error("tensor '{}': '{}.scales' and '{}.biases' have different dtypes", logical, m, m);
    return {{rows, cols}, fmt::format("MLX affine {}-bit g{}", p.bits, p.group), w.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const MlxParams p = params_of(m);
    const io::TensorView& w = checkpoint().get(logical);
    const io::TensorView& s = checkpoint().get(m + ".scales");
    const io::TensorView& b = checkpoint().get(m + ".biases");
    HostTensor out;
    out.weight = Weight{w.data, DType::U8, w.shape[0], w.shape[1] * 32 / p.bits};
    out.weight.format = kernels::WeightFormat::Affine;
    out.weight.quant = {static_cast<uint8_t>(p.bits), static_cast<int32_t>(p.group), s.dtype, s.data, b.data};
    out.shape = {out.weight.rows, out.weight.cols};
    return out;
  }

 private:
  static std::string module_of(const std::string& logical) { return logical.substr(0, logical.size() - 7); }

  MlxParams params_from(const Json& obj, const std::string& where, const MlxParams& fallback) const {
    MlxParams p = fallback;
    if (obj.contains("bits")) p.bits = obj["bits"].get<int64_t>();
    if (obj.contains("group_size")) p.group = obj["group_size"].get<int64_t>();
    if (obj.contains("mode")) p.mode = obj["mode"].get<std::string>();
    if (p.bits == 0 || p.group == 0)
      throw Error("{}: MLX {} needs bits and group_size", location(), where);
    return p;
  }

  MlxParams params_of(const std::string& module) const {
    if (!q_.contains(module)) return defaults_;
    const Json& entry = q_[module];
    if (entry.is_boolean() && !entry.get<bool>())
      throw Error("tensor '{}.weight' is stored packed (U32) but config.json's quantization says '{}': false",
                  module, module);
    if (!entry.is_object()) return defaults_;
    return params_from(entry, "quantization." + module, defaults_);
  }

  Json q_;
  MlxParams defaults_;
};

}  // namespace

std::shared_ptr<WeightSource> open_mlx_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<MlxSource>(std::move(ckpt), q);
}

}  // namespace tachyon::model
