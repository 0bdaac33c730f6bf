#include "model/sources/bare_model_source.h"

namespace tachyon::model {

namespace {

constexpr std::string_view kWrapper = "model.";

class BareModelSource final : public WeightSource {
 public:
  explicit BareModelSource(std::shared_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  const std::string& location() const override { return inner_->location(); }
  bool has(const std::string& name) const override { return inner_->has(bare(name)); }
  Info info(const std::string& name) const override { return inner_->info(bare(name)); }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const std::string& n : inner_->names()) out.push_back(std::string(kWrapper) + n);
    return out;
  }
  HostTensor load(const std::string& name) const override { return inner_->load(bare(name)); }
  kernels::QuantizeMode matmul_quantization() const override { return inner_->matmul_quantization(); }
  void bound(const std::string& name, const Weight& host) const override { inner_->bound(bare(name), host); }

 private:
  static std::string bare(const std::string& name) {
    return name.starts_with(kWrapper) ? name.substr(kWrapper.size()) : name;
  }
  std::shared_ptr<WeightSource> inner_;
};

}  // namespace

std::shared_ptr<WeightSource> wrap_bare_model(std::shared_ptr<WeightSource> inner) {
  if (inner->has("model.embed_tokens.weight") || !inner->has("embed_tokens.weight")) return inner;
  return std::make_shared<BareModelSource>(std::move(inner));
}

}  // namespace tachyon::model
