#include "model/weights.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::model {

namespace {
std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
bool is_float_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
}  // namespace

void WeightBinder::bind(Weight* target, const std::string& name, std::vector<int64_t> shape, Use use) {
  bindings_.push_back({target, {name}, {std::move(shape)}, false, nullptr, use});
}

void WeightBinder::bind_remapped(Weight* target, const std::string& name, std::vector<int64_t> shape, Remap remap) {
  bindings_.push_back({target, {name}, {std::move(shape)}, false, std::make_shared<Remap>(std::move(remap))});
}

void WeightBinder::bind_optional(Weight* target, const std::string& name, std::vector<int64_t> shape) {
  bindings_.push_back({target, {name}, {std::move(shape)}, true, nullptr});
}

void WeightBinder::bind_fused(Weight* target, const std::vector<std::string>& names,
                              const std::vector<std::vector<int64_t>>& shapes, Use use) {
  TACHYON_CHECK(names.size() == shapes.size() && !names.empty(), "bind_fused needs one shape per name");
  bindings_.push_back({target, names, shapes, false, nullptr, use});
}

Weight WeightBinder::upload(const Binding& b, const Weight& host) {
  if (b.use == Use::Matmul && backend_.loading_draft_weights()) return backend_.upload_draft_weight(host);
  return backend_.upload_weight(host);
}

void WeightBinder::load() {
  std::vector<std::string> problems;
  for (const Binding& b : bindings_) {
    for (size_t i = 0; i < b.names.size(); ++i) {
      const std::string& name = b.names[i];
      if (!checkpoint_.has(name)) {
        if (!b.optional) problems.push_back(fmt::format("tensor '{}' is missing (expected shape {})", name,
                                                        shape_string(b.shapes[i])));
        continue;
      }
      const io::TensorView& t = checkpoint_.get(name);
      if (t.shape != b.shapes[i])
        problems.push_back(fmt::format("tensor '{}' in {} has shape {} but the config implies {}", name, t.file,
                                       t.shape_string(), shape_string(b.shapes[i])));
      else if (!is_float_dtype(t.dtype))
        problems.push_back(fmt::format("tensor '{}' in {} has dtype {}; expected F32, BF16 or F16", name, t.file,
                                       dtype_name(t.dtype)));
    }
    // Parts of a fused weight must share a dtype.
    if (b.names.size() > 1 && problems.empty()) {
      const DType d0 = checkpoint_.get(b.names[0]).dtype;
      for (const auto& name : b.names)
        if (checkpoint_.get(name).dtype != d0)
          problems.push_back(fmt::format("tensors '{}' and '{}' have different dtypes", b.names[0], name));
    }
  }
  // Several weights may be cut from one tensor (remaps): name each problem once.
  std::vector<std::string> unique;
  for (auto& p : problems)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(std::move(p));
  problems = std::move(unique);
  if (!problems.empty()) {
    std::string message = fmt::format("{}: the checkpoint does not match the model config:", checkpoint_.location());
    for (const auto& p : problems) message += "\n  " + p;
    throw Error(message);
  }

  for (const Binding& b : bindings_) {
    if (!checkpoint_.has(b.names[0])) {
      *b.target = Weight{};
      continue;
    }
    if (b.remap) {
      const io::TensorView& t = checkpoint_.get(b.names[0]);
      const Remap& m = *b.remap;
      const size_t elem = dtype_size(t.dtype);
      const DType dtype = m.to_f32 ? DType::F32 : t.dtype;
      std::vector<uint8_t> host(static_cast<size_t>(m.rows * m.cols) * dtype_size(dtype));
      const Weight source{t.data, t.dtype, 1, t.num_elements()};
      for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t c = 0; c < m.cols; ++c) {
          const int64_t from = m.source(r, c), to = r * m.cols + c;
          TACHYON_CHECK(from >= 0 && from < t.num_elements(), "remap of '{}' reads outside the tensor", b.names[0]);
          if (m.to_f32) reinterpret_cast<float*>(host.data())[to] = kernels::rowwise::load_weight(source, from);
          else std::memcpy(host.data() + to * elem, static_cast<const uint8_t*>(t.data) + from * elem, elem);
        }
      *b.target = backend_.upload_weight(Weight{host.data(), dtype, m.rows, m.cols});
      continue;
    }
    if (b.names.size() == 1) {
      const io::TensorView& t = checkpoint_.get(b.names[0]);
      const int64_t cols = t.shape.size() >= 2 ? t.shape[1] : t.shape[0];
      const int64_t rows = t.shape.size() >= 2 ? t.shape[0] : 1;
      *b.target = upload(b, Weight{t.data, t.dtype, rows, cols});
      continue;
    }
    // Fused: concatenate the parts row-wise on the host, then upload once.
    const DType dtype = checkpoint_.get(b.names[0]).dtype;
    const bool is_vector = b.shapes[0].size() == 1;
    int64_t rows = 0, cols = is_vector ? 0 : b.shapes[0][1];
    for (const auto& shape : b.shapes) is_vector ? cols += shape[0] : rows += shape[0];
    if (is_vector) rows = 1;
    std::vector<uint8_t> host;
    for (const auto& name : b.names) {
      const io::TensorView& t = checkpoint_.get(name);
      host.insert(host.end(), static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.num_bytes);
    }
    *b.target = upload(b, Weight{host.data(), dtype, rows, cols});
  }
}

}  // namespace tachyon::model
