// Block-scaled FP8 checkpoints (quant_method "fp8": Qwen3-*-FP8, DeepSeek-V3/R1): a quantized
// module X stores
//   X.weight            F8_E4M3 [out, in]
//   X.weight_scale_inv  F32 (or BF16) [ceil(out/B), ceil(in/B)]   w = f32(q) · scale_inv
// with B from config.json's quantization_config.weight_block_size [B, B]; modules in
// `modules_to_not_convert` stay in floats (they simply have no F8 weight). → Fp8Block, the codes
// handed out in place, scales as f32.
#include <cstring>

#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

class Fp8Source : public PackedSource {
 public:
  Fp8Source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) : PackedSource(std::move(ckpt), "fp8") {
    if (!q.contains("weight_block_size") || !q["weight_block_size"].is_array() || q["weight_block_size"].size() != 2)
      throw Error("{}: quantization method fp8 without weight_block_size [B, B] (per-tensor scales) is not supported "
                  "(supported: block-scaled fp8)", location());
    const int64_t br = q["weight_block_size"][0].get<int64_t>(), bc = q["weight_block_size"][1].get<int64_t>();
    if (br != bc || br <= 0)
      throw Error("{}: fp8 weight_block_size [{}, {}] is not supported (supported: square blocks)", location(), br, bc);
    if (q.contains("fmt") && q["fmt"].get<std::string>() != "e4m3")
      throw Error("{}: fp8 format '{}' is not supported (supported: e4m3)", location(), q["fmt"].get<std::string>());
    block_ = br;
    index();
  }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.dtype == DType::F8_E4M3) return t.name;
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override { return {logical + "_scale_inv"}; }

  Info describe(const std::string& logical) const override {
    const io::TensorView& w = checkpoint().get(logical);
    if (w.shape.size() != 2)
      throw Error("tensor '{}' in {} has shape {}; fp8 block-scaled weights are 2-D", logical, w.file, w.shape_string());
    const int64_t rows = w.shape[0], cols = w.shape[1];
    const io::TensorView& s = part(logical, logical + "_scale_inv");
    const std::string why = fmt::format("'{}' ({} x {}, blocks {})", logical, rows, cols, block_);
    expect_dtype(s, {DType::F32, DType::BF16, DType::F16}, why);
    expect_shape(s, {(rows + block_ - 1) / block_, (cols + block_ - 1) / block_}, why);
    return {{rows, cols}, fmt::format("FP8 e4m3 block {}", block_), w.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const io::TensorView& w = checkpoint().get(logical);
    const io::TensorView& s = checkpoint().get(logical + "_scale_inv");
    std::vector<uint8_t> scales(static_cast<size_t>(s.num_elements()) * 4);
    for (int64_t i = 0; i < s.num_elements(); ++i) {
      const float v = float_at(s, i);
      std::memcpy(scales.data() + 4 * i, &v, 4);
    }
    HostTensor out;
    out.owned.push_back(std::move(scales));
    out.weight = Weight{w.data, DType::U8, w.shape[0], w.shape[1]};
    out.weight.format = kernels::WeightFormat::Fp8Block;
    out.weight.quant = {8, static_cast<int32_t>(block_), DType::F32, out.owned.back().data(), nullptr};
    out.shape = w.shape;
    return out;
  }

 private:
  int64_t block_ = 0;
};

}  // namespace

std::shared_ptr<WeightSource> open_fp8_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<Fp8Source>(std::move(ckpt), q);
}

}  // namespace tachyon::model
