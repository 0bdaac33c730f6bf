#include "model/sources/packed_source.h"

#include <cmath>
#include <cstring>

#include "base/error.h"

namespace tachyon::model {

using kernels::WeightFormat;

PackedSource::PackedSource(std::shared_ptr<io::Checkpoint> checkpoint, std::string method)
    : checkpoint_(std::move(checkpoint)), method_(std::move(method)) {}

void PackedSource::index() {
  for (const auto& [name, t] : checkpoint_->tensors())
    if (auto logical = logical_name(t)) {
      if (primary_.count(*logical))
        throw Error("{}: tensor '{}' is stored twice ({} and {})", location(), *logical, primary_[*logical], name);
      primary_[*logical] = name;
    }
  for (const auto& [logical, primary] : primary_)
    for (const auto& c : companions(logical)) hidden_[c] = true;
  for (const auto& [logical, primary] : primary_) hidden_.erase(primary);
}

bool PackedSource::has(const std::string& name) const {
  if (primary_.count(name)) return true;
  return checkpoint_->has(name) && !hidden_.count(name) && !logical_name(checkpoint_->get(name));
}

std::vector<std::string> PackedSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : checkpoint_->tensors())
    if (has(name)) out.push_back(name);
  for (const auto& [logical, primary] : primary_)
    if (!checkpoint_->has(logical)) out.push_back(logical);  // else listed above (MLX, FP8: same name)
  return out;
}

namespace {
bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
}  // namespace

WeightSource::Info PackedSource::info(const std::string& name) const {
  if (primary_.count(name)) return describe(name);
  if (!has(name)) throw Error("{}: tensor '{}' is missing", location(), name);
  const io::TensorView& t = checkpoint_->get(name);
  return {t.shape, std::string(dtype_name(t.dtype)), t.file, is_float(t.dtype)};
}

HostTensor PackedSource::load(const std::string& name) const {
  if (primary_.count(name)) {
    describe(name);  // validates every part first
    return repack(name);
  }
  const io::TensorView& t = checkpoint_->get(name);
  if (!is_float(t.dtype))
    throw Error("tensor '{}' in {} has dtype {}; expected F32, BF16 or F16 ({} checkpoint)", name, t.file,
                dtype_name(t.dtype), method_);
  const int64_t rows = t.shape.size() >= 2 ? t.shape[0] : 1;
  HostTensor out;
  out.weight = Weight{t.data, t.dtype, rows, rows > 0 ? t.num_elements() / rows : 0};
  out.shape = t.shape;
  return out;
}

const io::TensorView& PackedSource::part(const std::string& logical, const std::string& stored) const {
  if (!checkpoint_->has(stored))
    throw Error("{}: tensor '{}' is missing (needed by '{}', {} checkpoint)", location(), stored, logical, method_);
  return checkpoint_->get(stored);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void expect_dtype(const io::TensorView& t, std::initializer_list<DType> allowed, const std::string& why) {
  std::string names;
  for (DType d : allowed) {
    if (d == t.dtype) return;
    names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  throw Error("tensor '{}' in {} has dtype {}; {} expects {}", t.name, t.file, dtype_name(t.dtype), why, names);
}

void expect_shape(const io::TensorView& t, const std::vector<int64_t>& shape, const std::string& why) {
  if (t.shape != shape)
    throw Error("tensor '{}' in {} has shape {}; {} implies {}", t.name, t.file, shape_text(t.shape), why,
                shape_text(shape));
}

float float_at(const io::TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return static_cast<const float*>(t.data)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    default: throw Error("tensor '{}' in {}: dtype {} is not a float", t.name, t.file, dtype_name(t.dtype));
  }
}

std::vector<uint8_t> pack_codes(int64_t rows, int64_t cols, int bits,
                                const std::function<uint32_t(int64_t, int64_t)>& code) {
  const int64_t n = rows * cols;
  std::vector<uint8_t> out(static_cast<size_t>(bits == 4 ? (n + 1) / 2 : n), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const uint32_t v = code(r, c);
      if (bits == 8) out[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
      else out[static_cast<size_t>(i / 2)] |= static_cast<uint8_t>((v & 0xfu) << (i % 2 ? 4 : 0));
    }
  return out;
}

HostTensor make_quantized(WeightFormat format, int64_t rows, int64_t cols, int bits, int64_t group, DType scale_dtype,
                          std::vector<uint8_t> codes, std::vector<uint8_t> scales, std::vector<uint8_t> biases,
                          std::vector<int64_t> shape) {
  HostTensor out;
  out.owned.reserve(3);
  out.owned.push_back(std::move(codes));
  out.weight = Weight{out.owned.back().data(), DType::U8, rows, cols};
  out.weight.format = format;
  out.weight.quant.bits = static_cast<uint8_t>(bits);
  out.weight.quant.group = static_cast<int32_t>(group);
  out.weight.quant.scale_dtype = scale_dtype;
  out.owned.push_back(std::move(scales));
  out.weight.quant.scales = out.owned.back().data();
  if (!biases.empty()) {
    out.owned.push_back(std::move(biases));
    out.weight.quant.biases = out.owned.back().data();
  }
  out.shape = std::move(shape);
  return out;
}

std::string format_name(const Weight& w) {
  const auto& q = w.quant;
  switch (w.format) {
    case WeightFormat::Dense: return std::string(dtype_name(w.dtype));
    case WeightFormat::Affine:
      return fmt::format("Affine {}-bit g{} {}", q.bits, q.group, dtype_name(q.scale_dtype));
    case WeightFormat::Symmetric:
      return fmt::format("Symmetric {}-bit g{} {}", q.bits, q.group, dtype_name(q.scale_dtype));
    case WeightFormat::Fp8Block: return fmt::format("Fp8Block {}", q.group);
    case WeightFormat::Mxfp4: return "Mxfp4";
  }
  return "?";
}

namespace {

// Stores `values` (already known exact in `dtype`) as bytes of that dtype.
std::vector<uint8_t> store_floats(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
      continue;
    }
    const uint16_t h = dtype == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

bool exact_in(const std::vector<float>& values, DType dtype) {
  if (dtype == DType::F32) return true;
  for (float v : values) {
    const float back = dtype == DType::F16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
    if (back != v) return false;
  }
  return true;
}

}  // namespace

int64_t uniform_group_block(const std::vector<int32_t>& group_of_col, int64_t group_size) {
  const auto cols = static_cast<int64_t>(group_of_col.size());
  // Kernels handle groups of 32, 64 and 128 columns: a larger group (per channel) repeats its
  // scale over blocks of 128/64/32.
  const bool kernel_group = group_size == 32 || group_size == 64 || group_size == 128;
  for (int64_t block : {kernel_group ? group_size : int64_t{0}, int64_t{128}, int64_t{64}, int64_t{32}}) {
    if (block <= 0 || block > group_size || cols % block != 0) continue;
    bool ok = true;
    for (int64_t c = 0; c < cols && ok; ++c)
      ok = group_of_col[static_cast<size_t>(c)] == group_of_col[static_cast<size_t>(c / block * block)];
    if (ok) return block;
  }
  return 0;
}

HostTensor pack_integer_grid(const IntegerGrid& g, std::string* note) {
  const int64_t half = int64_t{1} << (g.bits - 1);
  const int64_t block = uniform_group_block(g.group_of_col, g.group_size);
  if (block == 0) {
    // Each column's own group is not expressible in aligned groups: dequantize, exactly, to F32.
    std::vector<float> values(static_cast<size_t>(g.rows * g.cols));
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t c = 0; c < g.cols; ++c) {
        const int32_t grp = g.group_of_col[static_cast<size_t>(c)];
        const int64_t z = g.zero ? g.zero(grp, r) : half;
        values[static_cast<size_t>(r * g.cols + c)] = static_cast<float>(static_cast<int64_t>(g.code(r, c)) - z) * g.scale(grp, r);
      }
    HostTensor out;
    out.owned.push_back(store_floats(values, DType::F32));
    out.weight = Weight{out.owned.back().data(), DType::F32, g.rows, g.cols};
    out.shape = {g.rows, g.cols};
    if (note) *note = "F32 (dequantized: act-order groups do not tile the columns)";
    return out;
  }
  const int64_t blocks = g.cols / block;
  std::vector<float> scales(static_cast<size_t>(g.rows * blocks)), biases(scales.size());
  bool symmetric = true;
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t grp = g.group_of_col[static_cast<size_t>(b * block)];
      const float s = g.scale(grp, r);
      const int64_t z = g.zero ? g.zero(grp, r) : half;
      symmetric = symmetric && z == half;
      scales[static_cast<size_t>(r * blocks + b)] = s;
      biases[static_cast<size_t>(r * blocks + b)] = -static_cast<float>(z) * s;  // exact: |z| ≤ 256, s ≤ 24 bits
    }
  if (symmetric) {
    // Signed codes q = code − 2^(bits−1), stored two's complement: code ^ 2^(bits−1).
    auto codes = pack_codes(g.rows, g.cols, g.bits, [&](int64_t r, int64_t c) {
      return g.code(r, c) ^ static_cast<uint32_t>(half);
    });
    if (note) *note = fmt::format("Symmetric {}-bit g{}", g.bits, block);
    return make_quantized(WeightFormat::Symmetric, g.rows, g.cols, g.bits, block, g.scale_dtype,
                          std::move(codes), store_floats(scales, g.scale_dtype), {}, {g.rows, g.cols});
  }
  const DType dtype = exact_in(biases, g.scale_dtype) ? g.scale_dtype : DType::F32;
  auto codes = pack_codes(g.rows, g.cols, g.bits, g.code);
  if (note) *note = fmt::format("Affine {}-bit g{} {}", g.bits, block, dtype_name(dtype));
  return make_quantized(WeightFormat::Affine, g.rows, g.cols, g.bits, block, dtype, std::move(codes),
                        store_floats(scales, dtype), store_floats(biases, dtype), {g.rows, g.cols});
}

}  // namespace tachyon::model
