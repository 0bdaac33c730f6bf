// MXFP4 checkpoints (quant_method "mxfp4": gpt-oss's own release): the experts' fused tensors
// P.gate_up_proj and P.down_proj are stored as
//   P.<name>_blocks  U8 [E, R, C/32, 16]  e2m1 codes of E matrices [R (out), C (in)], two per
//                                         byte, the even column in the low nibble
//   P.<name>_scales  U8 [E, R, C/32]      e8m0 exponents, one per 32 columns
// while the float release stores P.<name> as [E, C, R] (x·W). The source lists P.<name> with that
// logical shape and hands out the E·R rows x C columns as they are (they are exactly
// kernels/weight.h's Mxfp4 host packing) with HostTensor::stored_transposed set; WeightBinder's
// remaps then cut experts and de-interleave gate/up as row gathers of codes and scales.
// Everything else (attention, router, embeddings, biases) is bf16. → Mxfp4.
#include "base/error.h"
#include "model/sources/packed_source.h"

namespace tachyon::model {

namespace {

class Mxfp4Source : public PackedSource {
 public:
  Mxfp4Source(std::shared_ptr<io::Checkpoint> ckpt, const Json&) : PackedSource(std::move(ckpt), "mxfp4") { index(); }

 protected:
  std::optional<std::string> logical_name(const io::TensorView& t) const override {
    if (t.name.ends_with("_blocks")) return t.name.substr(0, t.name.size() - 7);
    return std::nullopt;
  }
  std::vector<std::string> companions(const std::string& logical) const override { return {logical + "_scales"}; }

  Info describe(const std::string& logical) const override {
    const io::TensorView& b = checkpoint().get(primary_of(logical));
    expect_dtype(b, {DType::U8}, "MXFP4 blocks");
    if (b.shape.size() != 4 || b.shape[3] != 16)
      throw Error("tensor '{}' in {} has shape {}; MXFP4 blocks are [experts, rows, cols/32, 16]", b.name, b.file,
                  b.shape_string());
    const int64_t E = b.shape[0], R = b.shape[1], C = b.shape[2] * 32;
    const io::TensorView& s = part(logical, logical + "_scales");
    const std::string why = fmt::format("'{}' ({} experts x {} x {}, MXFP4)", logical, E, R, C);
    expect_dtype(s, {DType::U8}, why);
    expect_shape(s, {E, R, C / 32}, why);
    return {{E, C, R}, "MXFP4", b.file, false};
  }

  HostTensor repack(const std::string& logical) const override {
    const io::TensorView& b = checkpoint().get(primary_of(logical));
    const io::TensorView& s = checkpoint().get(logical + "_scales");
    const int64_t E = b.shape[0], R = b.shape[1], C = b.shape[2] * 32;
    HostTensor out;
    out.weight = Weight{b.data, DType::U8, E * R, C};
    out.weight.format = kernels::WeightFormat::Mxfp4;
    out.weight.quant = {4, 32, DType::U8, s.data, nullptr};
    out.shape = {E, C, R};
    out.stored_transposed = true;
    return out;
  }
};

}  // namespace

std::shared_ptr<WeightSource> open_mxfp4_source(std::shared_ptr<io::Checkpoint> ckpt, const Json& q) {
  return std::make_shared<Mxfp4Source>(std::move(ckpt), q);
}

}  // namespace tachyon::model
