// compressed-tensors "pack-quantized" checkpoints (quant_method "compressed-tensors", written by
// llm-compressor: W4A16 / W8A16, symmetric or asymmetric, group or channel strategy): a
// quantized module X stores, for a weight [out, in] and b bits (32/b codes per word, the first in
// the low bits, each code stored as the signed value + 2^(b−1)),
//   X.weight_packed      I32 [out, ceil(in·b/32)]
//   X.weight_scale       F16/BF16/F32 [out, groups]   (channel: groups = 1)
//   X.weight_zero_point  I32 [ceil(out·b/32), groups] asymmetric only: packed along the outputs
//   X.weight_shape       I32/I64 [2] = [out, in]
//   X.weight_g_idx       I32 [in] (optional, activation ordering)
//   w = (q − zp) · s with q, zp signed (unsigned codes: (code − zp_code) · s)
// Quantization arguments come from config_groups (the group whose targets name "Linear" or
// match the module). → Symmetric (symmetric) or Affine (asymmetric).
#include <regex>

#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

struct CtArgs {
  int64_t bits = 0, group = 0;  // group 0: channel
  bool symmetric = true;
};

class CompressedTensorsSource : public PackedSource {
 public:
  CompressedTensorsSource(std::shared_ptr<io::Checkpoint> ckpt, const Json& q)
      : PackedSource(std::move(ckpt), "compressed-tensors") {
    const std::string format = q.contains("format") ? q["format"].get<std::string>() : "pack-quantized";
    if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
      throw Error("{}: compressed-tensors quantization_config has no config_groups", location());
    for (const auto& [name, group] : q["config_groups"].items()) {
      const std::string f = group.contains("format") && group["format"].is_string() ? group["format"].get<std::string>() : format;
      if (f != "pack-quantized")
        throw Error("{}: compressed-tensors format '{}' is not supported (supported: pack-quantized)", location(), f);
      if (group.contains("input_activations") && !group["input_activations"].is_null())
        throw Error("{}: compressed-tensors config group '{}' quantizes activations, which is not supported "
                    "(supported: weight-only W4A16, W8A16)", location(), name);
      if (!group.contains("weights") || !group["weights"].is_object())
        throw Error("{}: compressed-tensors config group '{}' has no weights arguments", location(), name);
      const Json& w = group["weights"];
      const std::string type = w.value("type", std::string("int"));
      const std::string strategy = w.value("strategy", std::string("group"));
      if (type != "int")
        throw Error("{}: compressed-tensors weight type '{}' is not supported (supported: int)", location(), type);
      if (strategy != "group" && strategy != "channel")
        throw Error("{}: compressed-tensors strategy '{}' is not supported (supported: group, channel)", location(), strategy);
      CtArgs a;
      a.bits = w.value("num_bits", int64_t{0});
      if (a.bits != 4 && a.bits != 8)
        throw Error("{}: compressed-tensors {}-bit weights are not supported (supported: 4, 8)", location(), a.bits);
      a.symmetric = w.value("symmetric", true);
      a.group = strategy == "group" ? w.value("group_size", int64_t{0}) : 0;
      if (strategy == "group" && a.group <= 0)
        throw Error("{}: compressed-tensors config group '{}': group strategy without group_size", location(), name);
      std::vector<std::string> targets;
      if (group.contains("targets"))
        for (const auto& t : group["targets"]) targets.push_back(t.get<std::string>());
      groups_.push_back({std::move(targets), a});
    }
    index();
  }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.name.ends_with(".weight_packed")) return module_of(t.name) + ".weight";
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override {
    const std::string m = module_of(logical);
    return {m + ".weight_scale", m + ".weight_zero_point", m + ".weight_shape", m + ".weight_g_idx"};
  }

  Info describe(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const CtArgs a = args_of(m, logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    expect_dtype(w, {DType::I32}, "compressed-tensors weight_packed");
    const io::TensorView& shape = part(logical, m + ".weight_shape");
    expect_dtype(shape, {DType::I32, DType::I64}, "compressed-tensors weight_shape");
    expect_shape(shape, {2}, "compressed-tensors weight_shape");
    const int64_t rows = int_at(shape, 0), cols = int_at(shape, 1), pack = 32 / a.bits;
    const int64_t group = a.group > 0 ? a.group : cols;
    const std::string why = fmt::format("'{}' ({} x {}, {}-bit {})", logical, rows, cols, a.bits,
                                        a.group > 0 ? fmt::format("g{}", a.group) : std::string("per channel"));
    expect_shape(w, {rows, (cols + pack - 1) / pack}, why);
    if (cols % group != 0)
      throw Error("tensor '{}' in {}: {} input columns are not a multiple of group_size {}", w.name, w.file, cols, group);
    const io::TensorView& s = part(logical, m + ".weight_scale");
    expect_dtype(s, {DType::F16, DType::BF16, DType::F32}, why);
    expect_shape(s, {rows, cols / group}, why);
    if (!a.symmetric) {
      const io::TensorView& z = part(logical, m + ".weight_zero_point");
      expect_dtype(z, {DType::I32}, why);
      expect_shape(z, {(rows + pack - 1) / pack, cols / group}, why);
    }
    if (checkpoint().has(m + ".weight_g_idx")) {
      const io::TensorView& gi = checkpoint().get(m + ".weight_g_idx");
      expect_dtype(gi, {DType::I32}, why);
      expect_shape(gi, {cols}, why);
      for (int64_t c = 0; c < cols; ++c)
        if (static_cast<const int32_t*>(gi.data)[c] < 0 || static_cast<const int32_t*>(gi.data)[c] >= cols / group)
          throw Error("tensor '{}' in {}: weight_g_idx[{}] is outside the {} groups", gi.name, gi.file, c, cols / group);
    }
    return {{rows, cols},
            fmt::format("compressed-tensors {}-bit {} {}", a.bits, a.symmetric ? "sym" : "asym",
                        a.group > 0 ? fmt::format("g{}", a.group) : std::string("channel")),
            w.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const CtArgs a = args_of(m, logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    const io::TensorView& shape = checkpoint().get(m + ".weight_shape");
    const io::TensorView& s = checkpoint().get(m + ".weight_scale");
    IntegerGrid g;
    g.rows = int_at(shape, 0);
    g.cols = int_at(shape, 1);
    g.bits = static_cast<int>(a.bits);
    g.group_size = a.group > 0 ? a.group : g.cols;
    const int64_t pack = 32 / a.bits, bits = a.bits, words = w.shape[1], groups = g.cols / g.group_size;
    const uint32_t mask = (1u << a.bits) - 1;
    g.group_of_col.resize(static_cast<size_t>(g.cols));
    const int32_t* idx = checkpoint().has(m + ".weight_g_idx")
                             ? static_cast<const int32_t*>(checkpoint().get(m + ".weight_g_idx").data) : nullptr;
    for (int64_t c = 0; c < g.cols; ++c)
      g.group_of_col[static_cast<size_t>(c)] = idx ? idx[c] : static_cast<int32_t>(c / g.group_size);
    const auto* qw = static_cast<const uint32_t*>(w.data);
    g.code = [=](int64_t r, int64_t c) { return (qw[r * words + c / pack] >> (bits * (c % pack))) & mask; };
    if (!a.symmetric) {
      const auto* qz = static_cast<const uint32_t*>(checkpoint().get(m + ".weight_zero_point").data);
      g.zero = [=](int64_t grp, int64_t r) {
        return static_cast<int32_t>((qz[(r / pack) * groups + grp] >> (bits * (r % pack))) & mask);
      };
    }
    g.scale = [&s, groups](int64_t grp, int64_t r) { return float_at(s, r * groups + grp); };
    g.scale_dtype = s.dtype;
    return pack_integer_grid(g, nullptr);
  }

 private:
  static std::string module_of(const std::string& name) { return name.substr(0, name.rfind('.')); }
  static int64_t int_at(const io::TensorView& t, int64_t i) {
    return t.dtype == DType::I64 ? static_cast<const int64_t*>(t.data)[i] : static_cast<const int32_t*>(t.data)[i];
  }

  // The arguments of the config group that targets `module` ("Linear", its name, or "re:...").
  CtArgs args_of(const std::string& module, const std::string& logical) const {
    for (const auto& [targets, args] : groups_)
      for (const auto& t : targets) {
        if (t == "Linear" || t == module) return args;
        if (t.starts_with("re:") &&
            std::regex_search(module, std::regex(t.substr(3)), std::regex_constants::match_continuous))
          return args;
      }
    if (groups_.size() == 1) return groups_[0].second;
    throw Error("tensor '{}': no compressed-tensors config group targets module '{}'", logical, module);
  }

  std::vector<std::pair<std::vector<std::string>, CtArgs>> groups_;
};

}  // namespace

std::shared_ptr<WeightSource> open_compressed_tensors_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<CompressedTensorsSource>(std::move(ckpt), q);
}

}  // namespace tachyon::model
