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
}  // namespace

void WeightBinder::bind(Weight* target, const std::string& name, std::vector<int64_t> shape, Use use) {
  bindings_.push_back({target, {name}, {std::move(shape)}, false, nullptr, use});
}

void WeightBinder::bind_remapped(Weight* target, const std::string& name, std::vector<int64_t> shape, Remap remap,
                                 Use use) {
  bindings_.push_back({target, {name}, {std::move(shape)}, false, std::make_shared<Remap>(std::move(remap)), use});
}

void WeightBinder::bind_optional(Weight* target, const std::string& name, std::vector<int64_t> shape) {
  bindings_.push_back({target, {name}, {std::move(shape)}, true, nullptr});
}

void WeightBinder::bind_fused(Weight* target, const std::vector<std::string>& names,
                              const std::vector<std::vector<int64_t>>& shapes, Use use) {
  TACHYON_CHECK(names.size() == shapes.size() && !names.empty(), "bind_fused needs one shape per name");
  bindings_.push_back({target, names, shapes, false, nullptr, use});
}

std::optional<kernels::QuantizedWeight> WeightBinder::quantized_form(Use use, const Weight& host,
                                                                     kernels::QuantizeMode mode) {
  if (use == Use::Matmul && kernels::can_quantize(host, mode)) return kernels::quantize_weight(host, mode);
  // (can_quantize under Int8: a dense float matrix; the group is chosen here, not int4's fixed 64.)
  const bool head = use == Use::TiedHead && (mode == kernels::QuantizeMode::Int8 || mode == kernels::QuantizeMode::Int4);
  if ((use == Use::Expert || head) && mode != kernels::QuantizeMode::None &&
      kernels::can_quantize(host, kernels::QuantizeMode::Int8)) {
    const int32_t group = host.cols % 64 == 0 ? 64 : 32;  // small experts' down projections: 32
    const bool fp8 = mode == kernels::QuantizeMode::Fp8 && use == Use::Expert;
    const bool int4 = mode == kernels::QuantizeMode::Int4 && use == Use::Expert;
    if (fp8 || host.cols % group == 0)
      return fp8 ? kernels::quantize_fp8(host) : int4 ? kernels::quantize_int4(host, group)
                                                      : kernels::quantize_int8_grouped(host, group);
  }
  return std::nullopt;
}

Weight WeightBinder::upload(const Binding& b, const Weight& host) {
  if (b.use == Use::Matmul && backend_.loading_draft_weights()) return backend_.upload_draft_weight(host);
  if (b.use == Use::Router) {
    source_.bound(b.names[0], host);
    return backend_.upload_router_weight(host);
  }
  if (const auto q = quantized_form(b.use, host, source_.matmul_quantization())) {
    source_.bound(b.names[0], q->weight);
    return backend_.upload_weight(q->weight);
  }
  source_.bound(b.names[0], host);
  const Weight uploaded = backend_.upload_weight(host);
  // --quantize-decode: the weight as stored for prefill rows, --quantize's form for decode rows.
  const auto decode = quantized_form(b.use, host, source_.decode_quantization());
  if (!decode) return uploaded;
  source_.bound_decode_copy(b.names[0], decode->weight);
  ++decode_copies_;
  return backend_.with_decode_copy(uploaded, backend_.upload_weight(decode->weight));
}

void WeightBinder::load() {
  std::vector<std::string> problems;
  for (const Binding& b : bindings_) {
    for (size_t i = 0; i < b.names.size(); ++i) {
      const std::string& name = b.names[i];
      if (!source_.has(name)) {
        if (!b.optional) problems.push_back(fmt::format("tensor '{}' is missing (expected shape {})", name,
                                                        shape_string(b.shapes[i])));
        continue;
      }
      const WeightSource::Info t = source_.info(name);
      if (t.shape != b.shapes[i])
        problems.push_back(fmt::format("tensor '{}' in {} has shape {} but the config implies {}", name, t.file,
                                       shape_string(t.shape), shape_string(b.shapes[i])));
    }
    // Parts of a fused weight must share a storage type.
    if (b.names.size() > 1 && problems.empty()) {
      const std::string t0 = source_.info(b.names[0]).type;
      for (const auto& name : b.names)
        if (source_.info(name).type != t0)
          problems.push_back(fmt::format("tensors '{}' ({}) and '{}' ({}) are stored differently", b.names[0], t0,
                                         name, source_.info(name).type));
    }
  }
  // Several weights may be cut from one tensor (remaps): name each problem once.
  std::vector<std::string> unique;
  for (auto& p : problems)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(std::move(p));
  problems = std::move(unique);
  if (!problems.empty()) {
    std::string message = fmt::format("{}: the checkpoint does not match the model config:", source_.location());
    for (const auto& p : problems) message += "\n  " + p;
    throw Error(message);
  }

  for (const Binding& b : bindings_) {
    if (!source_.has(b.names[0])) {
      *b.target = Weight{};
      continue;
    }
    if (b.remap) {
      HostTensor t = source_.load(b.names[0]);
      const Weight& src = t.weight;
      const int64_t total = src.rows * src.cols;
      const Remap& m = *b.remap;
      // Remaps index the logical tensor's flat row-major elements; where one sits in the stored
      // matrix (a source may store a 3-D tensor's matrices transposed: HostTensor::stored_transposed).
      const int64_t A = t.shape.size() == 3 ? t.shape[1] : 0, B = t.shape.size() == 3 ? t.shape[2] : 0;
      auto stored = [&](int64_t from) -> std::pair<int64_t, int64_t> {
        TACHYON_CHECK(from >= 0 && from < total, "remap of '{}' reads outside the tensor", b.names[0]);
        if (!t.stored_transposed) return {from / src.cols, from % src.cols};
        return {from / (A * B) * B + from % B, from / B % A};
      };
      // A quantized tensor whose remap takes whole stored rows (experts cut from a stacked tensor,
      // gate/up de-interleaved) keeps its format: the codes and scales of those rows are gathered.
      if (src.quantized() && !m.to_f32 && m.cols == src.cols) {
        std::vector<int64_t> rows(static_cast<size_t>(m.rows));
        bool whole_rows = true;
        for (int64_t r = 0; r < m.rows && whole_rows; ++r) {
          rows[static_cast<size_t>(r)] = stored(m.source(r, 0)).first;
          for (int64_t c = 0; c < m.cols && whole_rows; ++c)
            whole_rows = stored(m.source(r, c)) == std::pair{rows[static_cast<size_t>(r)], c};
        }
        if (whole_rows) {
          HostTensor gathered = gather_rows(t, rows, b.names[0]);
          if (!gathered.weight.empty()) {
            source_.bound(b.names[0], gathered.weight);
            *b.target = backend_.upload_weight(gathered.weight);
            continue;
          }
        }
      }
      // Otherwise a quantized tensor is read through its dequantization and the result is float32.
      const bool f32 = m.to_f32 || src.quantized();
      const DType dtype = f32 ? DType::F32 : src.dtype;
      const size_t elem = dtype_size(dtype);
      std::vector<uint8_t> host(static_cast<size_t>(m.rows * m.cols) * elem);
      for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t c = 0; c < m.cols; ++c) {
          const auto [sr, sc] = stored(m.source(r, c));
          const int64_t to = r * m.cols + c;
          if (f32)
            reinterpret_cast<float*>(host.data())[to] = kernels::rowwise::load_weight(src, sr, sc);
          else
            std::memcpy(host.data() + to * elem, static_cast<const uint8_t*>(src.data) + (sr * src.cols + sc) * elem, elem);
        }
      const Weight remapped{host.data(), dtype, m.rows, m.cols};
      if (src.quantized()) {  // already as the checkpoint quantized it: not quantized again
        source_.bound(b.names[0], remapped);
        *b.target = backend_.upload_weight(remapped);
      } else {
        *b.target = upload(b, remapped);
      }
      continue;
    }
    if (b.names.size() == 1) {
      HostTensor t = source_.load(b.names[0]);
      *b.target = upload(b, t.weight);
      continue;
    }
    // Fused: concatenate the parts row-wise on the host, then upload once.
    std::vector<HostTensor> parts;
    for (const auto& name : b.names) parts.push_back(source_.load(name));
    HostTensor fused = concat_rows(parts, b.names[0]);
    *b.target = upload(b, fused.weight);
  }
}

HostTensor gather_rows(const HostTensor& t, const std::vector<int64_t>& rows, const std::string& name) {
  const Weight& w = t.weight;
  const auto& q = w.quant;
  HostTensor out;
  if (w.format == kernels::WeightFormat::Fp8Block || w.format == kernels::WeightFormat::Dense) return out;
  if (w.quant.bits == 4 && w.cols % 2 != 0) return out;
  const int64_t groups = w.format == kernels::WeightFormat::Mxfp4 ? w.cols / 32 : w.cols / q.group;
  const size_t code_bytes = static_cast<size_t>(w.cols * q.bits / 8);
  const size_t scale_bytes = static_cast<size_t>(groups) * dtype_size(q.scale_dtype);
  auto gather = [&](const void* from, size_t row_bytes) {
    std::vector<uint8_t> data(rows.size() * row_bytes);
    for (size_t i = 0; i < rows.size(); ++i) {
      TACHYON_CHECK(rows[i] >= 0 && rows[i] < w.rows, "gather of '{}' reads row {} of {}", name, rows[i], w.rows);
      std::memcpy(data.data() + i * row_bytes, static_cast<const uint8_t*>(from) + rows[i] * row_bytes, row_bytes);
    }
    out.owned.push_back(std::move(data));
    return static_cast<const void*>(out.owned.back().data());
  };
  out.owned.reserve(3);
  out.weight = w;
  out.weight.rows = static_cast<int64_t>(rows.size());
  out.weight.data = gather(w.data, code_bytes);
  out.weight.quant.scales = gather(q.scales, scale_bytes);
  if (q.biases) out.weight.quant.biases = gather(q.biases, scale_bytes);
  out.shape = {out.weight.rows, w.cols};
  return out;
}

HostTensor concat_rows(const std::vector<HostTensor>& parts, const std::string& name) {
  TACHYON_CHECK(!parts.empty(), "concat_rows of '{}': no parts", name);
  const Weight& w0 = parts[0].weight;
  HostTensor out;
  out.weight = w0;
  out.weight.rows = 0;
  for (const HostTensor& p : parts) {
    const Weight& w = p.weight;
    TACHYON_CHECK(w.format == w0.format && w.dtype == w0.dtype && w.quant.bits == w0.quant.bits &&
                      w.quant.group == w0.quant.group && w.quant.scale_dtype == w0.quant.scale_dtype &&
                      (p.shape.size() == 1 ? true : w.cols == w0.cols),
                  "cannot fuse '{}': its parts are stored differently", name);
    TACHYON_CHECK(w.format != kernels::WeightFormat::Fp8Block || w.rows % w.quant.group == 0,
                  "cannot fuse '{}': FP8 blocks of {} rows do not tile {} rows", name, w.quant.group, w.rows);
    out.weight.rows += p.shape.size() == 1 ? 1 : w.rows;
  }
  if (parts[0].shape.size() == 1) {  // vectors: one row each, possibly of different lengths
    TACHYON_CHECK(!w0.quantized(), "cannot fuse '{}': quantized vectors", name);
    std::vector<uint8_t> data;
    int64_t cols = 0;
    for (const HostTensor& p : parts) {
      const auto* d = static_cast<const uint8_t*>(p.weight.data);
      data.insert(data.end(), d, d + p.weight.cols * dtype_size(p.weight.dtype));
      cols += p.weight.cols;
    }
    out.owned.push_back(std::move(data));
    out.weight.data = out.owned.back().data();
    out.weight.rows = 1;
    out.weight.cols = cols;
    out.shape = {cols};
    return out;
  }
  auto append = [&](auto bytes_of) {
    std::vector<uint8_t> data;
    for (const HostTensor& p : parts) {
      const auto [ptr, n] = bytes_of(p.weight);
      data.insert(data.end(), static_cast<const uint8_t*>(ptr), static_cast<const uint8_t*>(ptr) + n);
    }
    out.owned.push_back(std::move(data));
    return static_cast<const void*>(out.owned.back().data());
  };
  out.owned.reserve(3);
  const int64_t cols = w0.cols;
  if (!w0.quantized()) {
    out.weight.data = append([&](const Weight& w) {
      return std::pair{w.data, static_cast<size_t>(w.rows * cols) * dtype_size(w.dtype)};
    });
  } else {
    const auto& q = w0.quant;
    const int64_t code_bytes_per_row = cols * q.bits / 8;
    const bool fp8 = w0.format == kernels::WeightFormat::Fp8Block;
    const int64_t scale_rows_div = fp8 ? q.group : 1;
    const int64_t scales_per_row = fp8 ? (cols + q.group - 1) / q.group : cols / q.group;
    const size_t scale_size = w0.format == kernels::WeightFormat::Mxfp4 ? 1 : fp8 ? 4 : dtype_size(q.scale_dtype);
    out.weight.data = append([&](const Weight& w) {
      return std::pair{w.data, static_cast<size_t>(w.rows * code_bytes_per_row)};
    });
    out.weight.quant.scales = append([&](const Weight& w) {
      return std::pair{w.quant.scales, static_cast<size_t>(w.rows / scale_rows_div * scales_per_row) * scale_size};
    });
    if (w0.quant.biases)
      out.weight.quant.biases = append([&](const Weight& w) {
        return std::pair{w.quant.biases, static_cast<size_t>(w.rows * scales_per_row) * scale_size};
      });
  }
  out.shape = {out.weight.rows, cols};
  return out;
}

}  // namespace tachyon::model
