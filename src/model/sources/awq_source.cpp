// AWQ checkpoints (quant_method "awq", version "gemm", as AutoAWQ and llm-awq write them): a
// quantized module X stores, for a weight [out, in] and groups of G input columns,
//   X.qweight  I32 [in, out/8]    eight 4-bit codes per word along the outputs, in AWQ's order:
//                                 output 8j + [0,2,4,6,1,3,5,7][i] in bits 4i..4i+3
//   X.qzeros   I32 [in/G, out/8]  zero points, packed the same way
//   X.scales   F16 [in/G, out]    w[n, k] = (q[k, n] − z[k/G, n]) · s[k/G, n]
// → Affine (b = −z·s; the scales' dtype where b is exact in it, else F32).
#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

// The nibble (0..7) that holds output 8j + i of a packed word.
constexpr int kAwqNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};

class AwqSource : public PackedSource {
 public:
  AwqSource(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) : PackedSource(std::move(ckpt), "awq") {
    const std::string version = q.contains("version") ? q["version"].get<std::string>() : "gemm";
    if (version != "gemm" && version != "GEMM")
      throw Error("{}: AWQ version '{}' is not supported (supported: gemm)", location(), version);
    bits_ = q.contains("bits") ? q["bits"].get<int64_t>() : q.contains("w_bit") ? q["w_bit"].get<int64_t>() : 4;
    if (bits_ != 4) throw Error("{}: AWQ {}-bit weights are not supported (supported: 4)", location(), bits_);
    group_ = q.contains("group_size") ? q["group_size"].get<int64_t>() : q.contains("q_group_size") ? q["q_group_size"].get<int64_t>() : 128;
    if (q.contains("zero_point") && !q["zero_point"].get<bool>())
      throw Error("{}: AWQ without zero points is not supported (supported: zero_point true)", location());
    index();
  }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.name.ends_with(".qweight")) return base(t.name) + ".weight";
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override {
    const std::string m = module_of(logical);
    return {m + ".qzeros", m + ".scales"};
  }

  Info describe(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    expect_dtype(w, {DType::I32}, "AWQ qweight");
    if (w.shape.size() != 2)
      throw Error("tensor '{}' in {} has shape {}; AWQ qweight is [in, out/8]", w.name, w.file, w.shape_string());
    const int64_t cols = w.shape[0], rows = w.shape[1] * 8, group = group_ > 0 ? group_ : cols;
    if (cols % group != 0)
      throw Error("tensor '{}' in {}: {} input columns are not a multiple of group_size {}", w.name, w.file, cols, group);
    const std::string why = fmt::format("'{}' ({} x {}, 4-bit g{})", logical, rows, cols, group);
    const io::TensorView& z = part(logical, m + ".qzeros");
    expect_dtype(z, {DType::I32}, why);
    expect_shape(z, {cols / group, rows / 8}, why);
    const io::TensorView& s = part(logical, m + ".scales");
    expect_dtype(s, {DType::F16, DType::BF16, DType::F32}, why);
    expect_shape(s, {cols / group, rows}, why);
    return {{rows, cols}, fmt::format("AWQ 4-bit g{}", group), w.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const std::string m = module_of(logical);
    const io::TensorView& w = checkpoint().get(primary_of(logical));
    const io::TensorView& z = checkpoint().get(m + ".qzeros");
    const io::TensorView& s = checkpoint().get(m + ".scales");
    const auto* qw = static_cast<const uint32_t*>(w.data);
    const auto* qz = static_cast<const uint32_t*>(z.data);
    IntegerGrid g;
    g.cols = w.shape[0];
    g.rows = w.shape[1] * 8;
    g.bits = 4;
    g.group_size = group_ > 0 ? group_ : g.cols;
    g.group_of_col.resize(static_cast<size_t>(g.cols));
    for (int64_t c = 0; c < g.cols; ++c) g.group_of_col[static_cast<size_t>(c)] = static_cast<int32_t>(c / g.group_size);
    const int64_t words = w.shape[1];
    auto unpack = [](uint32_t word, int64_t n) { return (word >> (4 * kAwqNibbleOf[n % 8])) & 0xfu; };
    g.code = [=](int64_t r, int64_t c) { return unpack(qw[c * words + r / 8], r); };
    g.zero = [=](int64_t grp, int64_t r) { return static_cast<int32_t>(unpack(qz[grp * words + r / 8], r)); };
    g.scale = [&s, rows = g.rows](int64_t grp, int64_t r) { return float_at(s, grp * rows + r); };
    g.scale_dtype = s.dtype;
    return pack_integer_grid(g, nullptr);
  }

 private:
  static std::string base(const std::string& name) { return name.substr(0, name.rfind('.')); }
  static std::string module_of(const std::string& logical) { return base(logical); }
  int64_t bits_ = 4, group_ = 128;
};

}  // namespace

std::shared_ptr<WeightSource> open_awq_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<AwqSource>(std::move(ckpt), q);
}

}  // namespace tachyon::model
