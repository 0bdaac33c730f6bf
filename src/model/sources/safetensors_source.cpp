#include "model/sources/safetensors_source.h"

#include "base/error.h"

namespace tachyon::model {

namespace {
bool is_float_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
}  // namespace

WeightSource::Info SafetensorsSource::info(const std::string& name) const {
  const io::TensorView& t = checkpoint_->get(name);
  return {t.shape, std::string(dtype_name(t.dtype)), t.file, is_float_dtype(t.dtype)};
}

std::vector<std::string> SafetensorsSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : checkpoint_->tensors()) out.push_back(name);
  return out;
}

HostTensor SafetensorsSource::load(const std::string& name) const {
  const io::TensorView& t = checkpoint_->get(name);
  if (!is_float_dtype(t.dtype))
    throw Error("tensor '{}' in {} has dtype {}; expected F32, BF16 or F16", name, t.file, dtype_name(t.dtype));
  // [d0, d1, ...] is d0 rows of d1·d2·... (1-D: one row)
  const int64_t rows = t.shape.size() >= 2 ? t.shape[0] : 1;
  const int64_t cols = rows > 0 ? t.num_elements() / rows : 0;
  HostTensor out;
  out.weight = Weight{t.data, t.dtype, rows, cols};
  out.shape = t.shape;
  return out;
}

}  // namespace tachyon::model
