#include "kernels/cuda/quant_pack.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "kernels/cuda/quant_value.h"
#include "kernels/weight_dequant.h"

namespace tachyon::kernels::cuda {
namespace {

const char* format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Dense:
      return "Dense";
    case WeightFormat::Affine:
      return "Affine";
    case WeightFormat::Symmetric:
      return "Symmetric";
    case WeightFormat::Fp8Block:
      return "Fp8Block";
    case WeightFormat::Mxfp4:
      return "Mxfp4";
  }
  return "?";
}

int scale_type_of(DType d, const Weight& w) {
  switch (d) {
    case DType::F32:
      return kScaleF32;
    case DType::F16:
      return kScaleF16;
    case DType::BF16:
      return kScaleBf16;
    default:
      throw Error("the CUDA backend takes {} scales in F32, F16 or BF16, not {} ({}x{} weight)", format_name(w.format),
                  dtype_name(d), w.rows, w.cols);
  }
}

// e8m0 exponent -> bf16 bits of 2^(e - 127) (exact; 255 is NaN).
uint16_t e8m0_to_bf16_bits(uint8_t e) {
  if (e == 255) return 0x7fc0;
  if (e == 0) return 0x0040;  // 2^-127, a bf16 subnormal
  return static_cast<uint16_t>(e << 7);
}

// Runs fn(first, last) over [0, n) split across the host's cores (the packing of a large matrix).
template <typename Fn>
void parallel_ranges(int64_t n, Fn fn) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  if (n < 64 || threads == 1) return fn(int64_t{0}, n);
  std::vector<std::thread> pool;
  const int64_t step = (n + threads - 1) / threads;
  for (int64_t first = 0; first < n; first += step) pool.emplace_back(fn, first, std::min(n, first + step));
  for (auto& t : pool) t.join();
}

// quant_layout.h's bf16_pairs: 4-bit codes, bf16 scales, every group bf16_pair_exact (padding
// groups are zeros: exact).
bool bf16_pairs_exact(const QuantHostCopy& p) {
  const QuantMatrix& m = p.layout;
  if (m.bits() != 4 || m.kind == kQuantMxfp4 || m.scale_type != kScaleBf16) return false;
  const auto* s = reinterpret_cast<const uint16_t*>(p.scales.data());
  const auto* b = p.biases.empty() ? nullptr : reinterpret_cast<const uint16_t*>(p.biases.data());
  for (size_t i = 0; i < p.scales.size() / 2; ++i)
    if (!bf16_pair_exact(s[i], b ? b[i] : uint16_t{0})) return false;
  return true;
}

}  // namespace

DType quant_scale_dtype(int scale_type) {
  return scale_type == kScaleF16 ? DType::F16 : scale_type == kScaleBf16 ? DType::BF16 : DType::F32;
}

QuantMatrix quant_layout_of(const Weight& w) {
  QuantMatrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  const QuantParams& q = w.quant;
  TACHYON_CHECK(w.rows >= 1 && w.cols >= 2 && w.cols % 2 == 0,
                "the CUDA backend needs a quantized matrix with an even number of columns, got {}x{}", w.rows, w.cols);
  const auto need_group = [&](int64_t g, bool divides) {
    TACHYON_CHECK(g >= 16 && (g & (g - 1)) == 0 && (!divides || w.cols % g == 0),
                  "the CUDA backend takes {} groups of a power of two >= 16 columns{}, got group {} ({}x{} weight)",
                  format_name(w.format), divides ? " and divide the columns" : "", g, w.rows, w.cols);
    m.group = g;
  };
  switch (w.format) {
    case WeightFormat::Dense:
      TACHYON_CHECK(w.dtype == DType::I8 && w.scales != nullptr,
                    "the CUDA quantized upload takes Dense weights only as I8 with per-row scales, got {}",
                    dtype_name(w.dtype));
      m.kind = kQuantInt8Rows;
      m.group = 32;
      return m;
    case WeightFormat::Affine:
    case WeightFormat::Symmetric: {
      TACHYON_CHECK(q.bits == 4 || q.bits == 8, "{} weights of {} bits: the CUDA backend takes 4 or 8",
                    format_name(w.format), q.bits);
      TACHYON_CHECK(q.scales != nullptr && (w.format != WeightFormat::Affine || q.biases != nullptr),
                    "{} weight ({}x{}) without its scales{}", format_name(w.format), w.rows, w.cols,
                    w.format == WeightFormat::Affine ? " or biases" : "");
      need_group(q.group, true);
      m.scale_type = scale_type_of(q.scale_dtype, w);
      const bool affine = w.format == WeightFormat::Affine;
      m.kind = q.bits == 4 ? (affine ? kQuantAffine4 : kQuantSymmetric4) : (affine ? kQuantAffine8 : kQuantSymmetric8);
      return m;
    }
    case WeightFormat::Fp8Block:
      TACHYON_CHECK(q.bits == 8 || q.bits == 0, "Fp8Block weights have 8-bit codes, got {} bits", q.bits);
      TACHYON_CHECK(q.scales != nullptr && q.scale_dtype == DType::F32,
                    "Fp8Block weight ({}x{}) needs f32 block scales", w.rows, w.cols);
      need_group(q.group, false);
      m.kind = kQuantFp8;
      m.scale_type = kScaleF32;
      return m;
    case WeightFormat::Mxfp4:
      TACHYON_CHECK(q.bits == 4 || q.bits == 0, "Mxfp4 weights have 4-bit codes, got {} bits", q.bits);
      TACHYON_CHECK(q.group == 32 || q.group == 0, "Mxfp4 scales cover 32 columns, got group {}", q.group);
      TACHYON_CHECK(q.scales != nullptr, "Mxfp4 weight ({}x{}) without its e8m0 scales", w.rows, w.cols);
      need_group(32, true);
      m.kind = kQuantMxfp4;
      m.scale_type = kScaleBf16;
      return m;
  }
  throw Error("unknown weight format {}", static_cast<int>(w.format));
}

QuantHostCopy pack_quant_weight(const Weight& w) {
  TACHYON_CHECK(w.layout == WeightLayout::RowMajor, "quantized weights arrive row-major");
  QuantHostCopy out;
  out.layout = quant_layout_of(w);
  const QuantMatrix& m = out.layout;
  const int64_t rows = w.rows, cols = w.cols, bits = m.bits();
  out.codes.assign(static_cast<size_t>(m.code_bytes()), 0);

  // Where each column's code goes within a row tile, and the row's own offset: the layout's
  // index split so that the per-element work is one add.
  std::vector<int64_t> col_byte(static_cast<size_t>(cols));
  std::vector<uint8_t> col_shift(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    int shift = 0;
    col_byte[static_cast<size_t>(c)] = m.code_byte(0, c, shift);
    col_shift[static_cast<size_t>(c)] = static_cast<uint8_t>(shift);
  }
  const auto* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = out.codes.data();
  parallel_ranges((rows + 7) / 8, [&](int64_t tile_first, int64_t tile_last) {
    for (int64_t r = tile_first * 8; r < std::min(rows, tile_last * 8); ++r) {
      int unused = 0;
      const int64_t row_byte = m.code_byte(r, 0, unused);
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const uint8_t code =
            bits == 8 ? src[i] : static_cast<uint8_t>(i % 2 == 0 ? src[i / 2] & 0xfu : src[i / 2] >> 4);
        dst[row_byte + col_byte[static_cast<size_t>(c)]] |=
            static_cast<uint8_t>(code << col_shift[static_cast<size_t>(c)]);
      }
    }
  });

  if (m.kind == kQuantInt8Rows) {
    out.row_scales.assign(static_cast<size_t>(m.rows_padded()), 0.f);
    std::memcpy(out.row_scales.data(), w.scales, static_cast<size_t>(rows) * sizeof(float));
    return out;
  }
  const size_t scale_size = m.scale_type == kScaleF32 ? 4 : 2;
  out.scales.assign(static_cast<size_t>(m.scale_count()) * scale_size, 0);
  const QuantParams& q = w.quant;
  if (m.kind == kQuantFp8) {
    const int64_t blocks_per_row = (cols + m.group - 1) / m.group;
    auto* s = reinterpret_cast<float*>(out.scales.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < blocks_per_row; ++g)
        s[m.scale_index(r, g * m.group)] = static_cast<const float*>(q.scales)[(r / m.group) * blocks_per_row + g];
  } else if (m.kind == kQuantMxfp4) {
    auto* s = reinterpret_cast<uint16_t*>(out.scales.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < cols / 32; ++g)
        s[m.scale_index(r, g * 32)] = e8m0_to_bf16_bits(static_cast<const uint8_t*>(q.scales)[r * (cols / 32) + g]);
  } else {
    const bool affine = m.kind == kQuantAffine4 || m.kind == kQuantAffine8;
    if (affine) out.biases.assign(out.scales.size(), 0);
    const int64_t real_groups = cols / m.group;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < real_groups; ++g) {
        const size_t from = static_cast<size_t>(r * real_groups + g) * scale_size,
                     to = static_cast<size_t>(m.scale_index(r, g * m.group)) * scale_size;
        std::memcpy(out.scales.data() + to, static_cast<const uint8_t*>(q.scales) + from, scale_size);
        if (affine) std::memcpy(out.biases.data() + to, static_cast<const uint8_t*>(q.biases) + from, scale_size);
      }
    out.layout.bf16_pairs = bf16_pairs_exact(out);
  }
  return out;
}

}  // namespace tachyon::kernels::cuda
