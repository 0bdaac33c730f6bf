// GPTQ checkpoints (quant_method "gptq": AutoGPTQ, GPTQModel, optimum): a quantized module X
// stores, for a weight [out, in], b bits (32/b codes per word, the first in the low bits) and
// groups of G input columns,
//   X.qweight  I32 [in·b/32, out]        codes packed along the inputs
//   X.qzeros   I32 [groups, out·b/32]    zero points packed along the outputs; checkpoint_format
//                                        "gptq" (the default, v1) stores z − 1, "gptq_v2" z
//   X.scales   F16 [groups, out]
//   X.g_idx    I32 [in]                  the group of each input column (optional: k / G)
//   w[n, k] = (q[k, n] − z[g(k), n]) · s[g(k), n]
// With desc_act (act-order) g_idx need not be k / G. The input order of the weight is kept (the
// activations are not permuted); each column reads its own group's scale and zero. That is exact
// as Affine/Symmetric groups whenever each aligned block of columns shares one group; otherwise
// the weight is dequantized to F32 (exact, 4-8x the bytes) and info's type says so.
#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

class GptqSource : public PackedSource {
 public:
  GptqSource(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) : PackedSource(std::move(ckpt), "gptq") {
    bits_ = q.contains("bits") ? q["bits"].get<int64_t>() : 4;
    if (bits_ != 4 && bits_ != 8)
      throw Error("{}: GPTQ {}-bit weights are not supported (supported: 4, 8)", location(), bits_);
    group_ = q.contains("group_size") ? q["group_size"].get<int64_t>() : 128;
    const std::string format = q.contains("checkpoint_format") ? q["checkpoint_format"].get<std::string>() : "gptq";
    if (format != "gptq" && format != "gptq_v2")
      throw Error("{}: GPTQ checkpoint_format '{}' is not supported (supported: gptq, gptq_v2)", location(), format);
    zero_offset_ = format == "gptq" ? 1 : 0;
    index();
  }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.name.ends_with(".qweight")) return base(t.name) + ".weight";
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override {
    const std::string m = base(logical);
    return {m + ".qzeros", m + ".scales", m + ".g_idx"};
  }

  Info describe(const std::string& logical) const override {
    const std::string m = base(logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    expect_dtype(w, {DType::I32}, "GPTQ qweight");
    if (w.shape.size() != 2)
      throw Error("tensor '{}' in {} has shape {}; GPTQ qweight is [in·bits/32, out]", w.name, w.file, w.shape_string());
    const int64_t pack = 32 / bits_, rows = w.shape[1], cols = w.shape[0] * pack;
    const int64_t group = group_ > 0 ? group_ : cols, groups = (cols + group - 1) / group;
    const std::string why = fmt::format("'{}' ({} x {}, {}-bit g{})", logical, rows, cols, bits_, group);
    if (rows % pack != 0) throw Error("tensor '{}' in {}: {} outputs do not pack {} per word", w.name, w.file, rows, pack);
    const io::TensorView& z = part(logical, m + ".qzeros");
    expect_dtype(z, {DType::I32}, why);
    expect_shape(z, {groups, rows / pack}, why);
    const io::TensorView& s = part(logical, m + ".scales");
    expect_dtype(s, {DType::F16, DType::BF16, DType::F32}, why);
    expect_shape(s, {groups, rows}, why);
    std::string type = fmt::format("GPTQ {}-bit g{}", bits_, group);
    if (checkpoint().has(m + ".g_idx")) {
      const io::TensorView& gi = checkpoint().get(m + ".g_idx");
      expect_dtype(gi, {DType::I32}, why);
      expect_shape(gi, {cols}, why);
      const auto* idx = static_cast<const int32_t*>(gi.data);
      bool sequential = true;
      for (int64_t c = 0; c < cols; ++c) {
        if (idx[c] < 0 || idx[c] >= groups)
          throw Error("tensor '{}' in {}: g_idx[{}] = {} is outside the {} groups", gi.name, gi.file, c, idx[c], groups);
        sequential = sequential && idx[c] == c / group;
      }
      if (!sequential)
        type += uniform_group_block(std::vector<int32_t>(idx, idx + cols), group) ? " act-order"
                                                                                   : " act-order (dequantized to F32)";
    }
    return {{rows, cols}, type, w.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const std::string m = base(logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    const io::TensorView& z = checkpoint().get(m + ".qzeros");
    const io::TensorView& s = checkpoint().get(m + ".scales");
    const int64_t pack = 32 / bits_, bits = bits_;
    const uint32_t mask = (1u << bits_) - 1;
    const auto* qw = static_cast<const uint32_t*>(w.data);
    const auto* qz = static_cast<const uint32_t*>(z.data);
    IntegerGrid g;
    g.rows = w.shape[1];
    g.cols = w.shape[0] * pack;
    g.bits = static_cast<int>(bits_);
    g.group_size = group_ > 0 ? group_ : g.cols;
    g.group_of_col.resize(static_cast<size_t>(g.cols));
    const int32_t* idx = checkpoint().has(m + ".g_idx") ? static_cast<const int32_t*>(checkpoint().get(m + ".g_idx").data) : nullptr;
    for (int64_t c = 0; c < g.cols; ++c)
      g.group_of_col[static_cast<size_t>(c)] = idx ? idx[c] : static_cast<int32_t>(c / g.group_size);
    const int64_t rows = g.rows, zero_words = rows / pack, offset = zero_offset_;
    g.code = [=](int64_t r, int64_t c) { return (qw[(c / pack) * rows + r] >> (bits * (c % pack))) & mask; };
    g.zero = [=](int64_t grp, int64_t r) {
      return static_cast<int32_t>(((qz[grp * zero_words + r / pack] >> (bits * (r % pack))) & mask) + offset);
    };
    g.scale = [&s, rows](int64_t grp, int64_t r) { return float_at(s, grp * rows + r); };
    g.scale_dtype = s.dtype;
    return pack_integer_grid(g, nullptr);
  }

 private:
  static std::string base(const std::string& name) { return name.substr(0, name.rfind('.')); }
  int64_t bits_ = 4, group_ = 128, zero_offset_ = 1;
};

}  // namespace

std::shared_ptr<WeightSource> open_gptq_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<GptqSource>(std::move(ckpt), q);
}

}  // namespace tachyon::model
