// The int8-activation matmul (cpu/isa/matmul_int8.h): activation quantization as specified, the
// Panel64Dot packing keeps every element's value, and every ISA path (portable, AVX2, AVX-512
// VNNI, AMX-INT8) gives the bits of a scalar reference of the math computed from the row-major
// weight, for every integer format, any row count (VNNI tiles of 1-3 rows, AMX tiles of 16 and
// their remainders) and panel tails; the AMX path is checked to have run where the CPU has it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "kernels/cpu/isa/cpu_features.h"
#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/cpu/quant_pack.h"
#include "quant_panels.h"
#include "quant_test_data.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

QuantHost pack_dot(const Weight& host) { return pack_panels(host, cpu::quant_panel64_dot_bytes, cpu::pack_quant_panel64_dot); }

// The activation quantization written out independently (std::nearbyint: round to nearest even),
// per `block` columns.
struct RefActivations {
  std::vector<int32_t> q, sum;
  std::vector<float> scale, scaled_sum;
  int64_t block = 32;
};
RefActivations reference_activations(const std::vector<float>& x, int64_t rows, int64_t k, int64_t block) {
  RefActivations r;
  r.block = block;
  const int64_t blocks = k / block;
  r.q.resize(x.size());
  for (int64_t i = 0; i < rows * blocks; ++i) {
    float amax = 0.f;
    for (int64_t t = 0; t < block; ++t) amax = std::max(amax, std::fabs(x[i * block + t]));
    const float d = amax / 127.f, inverse = d != 0.f ? 1.f / d : 0.f;
    int32_t sum = 0;
    for (int64_t t = 0; t < block; ++t) {
      const int32_t q = std::clamp(static_cast<int32_t>(std::nearbyint(x[i * block + t] * inverse)), -127, 127);
      r.q[i * block + t] = q;
      sum += q;
    }
    r.scale.push_back(d);
    r.sum.push_back(sum);
    r.scaled_sum.push_back(d * static_cast<float>(sum));
  }
  return r;
}

// The header's definition over the row-major host weight (Dense I8: its row scales).
std::vector<float> reference_matmul(const RefActivations& a, int64_t rows, const Weight& w) {
  const int64_t k = w.cols, bw = a.block, blocks = k / bw, n = w.rows;
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t isum = 0;
        for (int64_t t = b * bw; t < b * bw + bw; ++t) {
          int32_t code;
          if (w.format == WeightFormat::Dense) code = static_cast<const int8_t*>(w.data)[j * k + t];
          else if (w.format == WeightFormat::Affine) code = static_cast<int32_t>(code_at(w, j, t));
          else code = w.quant.bits == 8 ? static_cast<int8_t>(code_at(w, j, t)) : static_cast<int32_t>(code_at(w, j, t) ^ 8u) - 8;
          isum += code * a.q[m * k + t];
        }
        const float s = w.format == WeightFormat::Dense
                            ? w.scales[j]
                            : load_scale_value(w.quant.scales, w.quant.scale_dtype, scale_index(w, j, b * bw));
        acc = std::fma(s * a.scale[m * blocks + b], static_cast<float>(isum), acc);
        if (w.format == WeightFormat::Affine)
          acc = std::fma(load_scale_value(w.quant.biases, w.quant.scale_dtype, scale_index(w, j, b * bw)),
                         a.scaled_sum[m * blocks + b], acc);
      }
      out[m * n + j] = acc;
    }
  return out;
}

std::vector<QuantCase> int8_cases() {
  std::vector<QuantCase> cases;
  for (WeightFormat f : {WeightFormat::Affine, WeightFormat::Symmetric})
    for (int bits : {4, 8})
      for (int group : {32, 64, 128})
        for (DType s : {DType::F32, DType::F16, DType::BF16}) cases.push_back({f, bits, group, s});
  return cases;
}

struct Kernel {
  cpu::MatmulInt8Fn fn;
  const char* name;
};
std::vector<Kernel> kernels_here() {
  std::vector<Kernel> ks{{cpu::matmul_int8_portable, "portable"}};
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && cpu::cpu_has_f16c()) ks.push_back({cpu::matmul_int8_avx2, "avx2"});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni")) {
    ks.push_back({cpu::matmul_int8_avx512, "avx512-vnni"});
    if (cpu::amx_int8_enabled()) ks.push_back({cpu::matmul_int8_amx, "amx-int8"});
  }
#endif
  return ks;
}

// Every kernel against the reference for `rows` rows of random activations (a few all-zero
// blocks and a large outlier, as real activations have).
void expect_every_kernel_matches(const Weight& host, const Weight& packed, int64_t rows, std::mt19937& rng) {
  const int64_t k = host.cols, n = host.rows;
  auto x = random_vec(static_cast<size_t>(rows * k), rng);
  for (int64_t t = 0; t < 32 && rows > 1; ++t) x[k + t] = 0.f;
  x[0] = 40.f;
  const int64_t block = cpu::int8_activation_block(host);
  EXPECT_EQ(block, cpu::int8_activation_block(packed));
  const RefActivations ref = reference_activations(x, rows, k, block);
  const std::vector<float> want = reference_matmul(ref, rows, host);
  cpu::Int8Activations acts;
  const cpu::Int8Rows a = acts.quantize(x.data(), rows, k, block);
  for (int64_t i = 0; i < rows * k; ++i) ASSERT_EQ(ref.q[i], a.q[i]) << "activation " << i;
  for (int64_t i = 0; i < rows * (k / block); ++i) {
    ASSERT_EQ(0, std::memcmp(&ref.scale[i], &a.scale[i], 4)) << "scale " << i;
    ASSERT_EQ(ref.sum[i], a.sum[i]);
    ASSERT_EQ(0, std::memcmp(&ref.scaled_sum[i], &a.scaled_sum[i], 4));
  }
  for (const Kernel& kernel : kernels_here()) {
    // The AMX tiles read standard weights only (the backend's kernel copies compact panels first).
    if (cpu::compact_dot_weight(packed) && std::string(kernel.name) == "amx-int8") continue;
    std::vector<float> out(want.size());
    kernel.fn(a, packed, 0, n, out.data(), n);
    EXPECT_TRUE(same_bits(out, want)) << kernel.name << ", rows " << rows;
    // From the second panel on, other columns untouched.
    std::vector<float> tail(want.size(), -1.f);
    kernel.fn(a, packed, 64, n, tail.data(), n);
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t j = 0; j < 64; ++j) ASSERT_EQ(-1.f, tail[m * n + j]) << kernel.name;
      EXPECT_EQ(0, std::memcmp(tail.data() + m * n + 64, want.data() + m * n + 64, (n - 64) * 4)) << kernel.name << " row " << m;
    }
  }
}

class Int8Matmul : public ::testing::TestWithParam<QuantCase> {};

TEST_P(Int8Matmul, PackedElementsAreTheScalarDefinition) {
  std::mt19937 rng(1);
  const QuantHost h = random_quant(GetParam(), 70, 256, rng);
  ASSERT_TRUE(cpu::int8_dot_eligible(h.w));
  const QuantHost p = pack_dot(h.w);
  EXPECT_EQ(WeightLayout::Panel64Dot, p.w.layout);
  for (int64_t r = 0; r < h.w.rows; ++r)
    for (int64_t c = 0; c < h.w.cols; ++c) {
      const float a = dequantize_element(h.w, r, c), b = dequantize_element(p.w, r, c);
      ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << r << "," << c;
    }
}

TEST_P(Int8Matmul, EveryIsaGivesTheReferenceBits) {
  std::mt19937 rng(2);
  const QuantHost h = random_quant(GetParam(), 131, 256, rng);
  const QuantHost p = pack_dot(h.w);
  for (int64_t rows : {1, 2, 3, 4, 16, 35}) expect_every_kernel_matches(h.w, p.w, rows, rng);
}

INSTANTIATE_TEST_SUITE_P(Formats, Int8Matmul, ::testing::ValuesIn(int8_cases()),
                         [](const auto& info) { return info.param.name(); });

// Rows of 96 columns (32-column activation blocks) and of 256 (128-column blocks: two 64-column
// AMX tile products per block).
TEST(Int8MatmulDense, DenseI8RowScalesRunAsOneGroupPerRow) {
  std::mt19937 rng(3);
  for (const int64_t k : {96, 256}) {
    const int64_t n = 100;
    const auto wf = random_vec(static_cast<size_t>(n * k), rng);
    const QuantizedWeight qw = quantize_int8(Weight{wf.data(), DType::F32, n, k});
    ASSERT_TRUE(cpu::int8_dot_eligible(qw.weight));
    const QuantHost p = pack_dot(qw.weight);
    EXPECT_EQ(WeightFormat::Symmetric, p.w.format);
    for (int64_t rows : {1, 5, 17, 33}) expect_every_kernel_matches(qw.weight, p.w, rows, rng);
  }
}

TEST(Int8MatmulDense, ActivationQuantizersAgree) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
    GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(7);
  const int64_t values = 64 * 32;
  auto x = random_vec(static_cast<size_t>(values), rng);
  for (int t = 0; t < 128; ++t) x[128 + t] = 0.f;              // an all-zero block at every width
  for (int t = 0; t < 32; ++t) x[320 + t] = 0.5f * float(t - 16);  // ties at ±0.5 steps
  x[600] = -1e30f;
  x[900] = 1e-30f;
  for (const int64_t block : {16, 32, 64, 128}) {
    const int64_t blocks = values / block;
    std::vector<int8_t> q[2];
    std::vector<float> scale[2], scaled[2];
    std::vector<int32_t> sum[2];
    for (int i = 0; i < 2; ++i) {
      q[i].resize(x.size());
      scale[i].resize(blocks);
      scaled[i].resize(blocks);
      sum[i].resize(blocks);
      (i == 0 ? cpu::quantize_blocks_portable : cpu::quantize_blocks_avx512)(x.data(), blocks, block, q[i].data(),
                                                                           scale[i].data(), sum[i].data(), scaled[i].data());
    }
    EXPECT_EQ(q[0], q[1]) << block;
    EXPECT_EQ(sum[0], sum[1]) << block;
    EXPECT_EQ(0, std::memcmp(scale[0].data(), scale[1].data(), blocks * 4)) << block;
    EXPECT_EQ(0, std::memcmp(scaled[0].data(), scaled[1].data(), blocks * 4)) << block;
  }
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// CpuBackend::matmul quantizes a prefill's rows split over threads (prepare, then quantize_rows
// per part): the parts give the bits of one whole quantize, at every block width.
TEST(Int8MatmulDense, RowsQuantizedInPartsAreTheWholeBits) {
  std::mt19937 rng(9);
  const int64_t rows = 37, cols = 256;
  const auto x = random_vec(static_cast<size_t>(rows * cols), rng);
  for (const int64_t block : {32, 64, 128}) {
    cpu::Int8Activations whole_acts, part_acts;
    const cpu::Int8Rows whole = whole_acts.quantize(x.data(), rows, cols, block);
    const cpu::Int8Rows parts = part_acts.prepare(rows, cols, block);
    for (const auto& [first, count] : std::vector<std::pair<int64_t, int64_t>>{{20, 17}, {0, 3}, {3, 17}})
      part_acts.quantize_rows(x.data(), parts, first, count);
    const size_t blocks = static_cast<size_t>(rows * cols / block);
    EXPECT_EQ(0, std::memcmp(whole.q, parts.q, static_cast<size_t>(rows * cols))) << block;
    EXPECT_EQ(0, std::memcmp(whole.scale, parts.scale, blocks * sizeof(float))) << block;
    EXPECT_EQ(0, std::memcmp(whole.sum, parts.sum, blocks * sizeof(int32_t))) << block;
    EXPECT_EQ(0, std::memcmp(whole.scaled_sum, parts.scaled_sum, blocks * sizeof(float))) << block;
  }
}

// The activation block is the largest of 128, 64, 32, 16 dividing the weight's group (Dense I8:
// its row): GGUF's 32-column groups keep llama.cpp's 32, Q6_K's 16-column ones take 16.
TEST(Int8MatmulDense, ActivationBlockFollowsTheWeightGroup) {
  std::mt19937 rng(8);
  for (const auto& [group, block] :
       std::vector<std::pair<int, int64_t>>{{32, 32}, {64, 64}, {128, 128}, {256, 128}, {96, 32}, {16, 16}, {48, 16}}) {
    const QuantHost h = random_quant({WeightFormat::Symmetric, 4, group, DType::F16}, 64, 768, rng);
    EXPECT_EQ(block, cpu::int8_activation_block(h.w)) << group;
  }
  for (const auto& [cols, block] : std::vector<std::pair<int64_t, int64_t>>{{1024, 128}, {96, 32}, {192, 64}}) {
    const auto wf = random_vec(static_cast<size_t>(8 * cols), rng);
    EXPECT_EQ(block, cpu::int8_activation_block(quantize_int8(Weight{wf.data(), DType::F32, 8, cols}).weight)) << cols;
  }
}

TEST(Int8MatmulDense, IneligibleWeightsAreNamed) {
  std::mt19937 rng(4);
  const QuantHost g8 = random_quant({WeightFormat::Symmetric, 4, 8, DType::F16}, 64, 256, rng);
  EXPECT_FALSE(cpu::int8_dot_eligible(g8.w));  // 8-column scales: no 16-column activation block
  const QuantHost mx = random_quant({WeightFormat::Mxfp4, 4, 32, DType::U8}, 64, 256, rng);
  EXPECT_FALSE(cpu::int8_dot_eligible(mx.w));
  const auto wf = random_vec(64 * 40, rng);
  const QuantizedWeight odd = quantize_int8(Weight{wf.data(), DType::F32, 64, 40});
  EXPECT_FALSE(cpu::int8_dot_eligible(odd.weight));  // 40 columns: not whole 32-blocks
}

// The mode's numerics stay close to the f32 product (llama.cpp's Q8_0 activations: ~0.5% of the
// output scale on random data).
TEST(Int8MatmulDense, CloseToTheFloatProduct) {
  std::mt19937 rng(5);
  const QuantHost h = random_quant({WeightFormat::Symmetric, 8, 32, DType::F16}, 64, 512, rng);
  const QuantHost p = pack_dot(h.w);
  const int64_t rows = 4;
  const auto x = random_vec(static_cast<size_t>(rows * 512), rng);
  const std::vector<float> exact = canonical_matmul(x.data(), rows, dequantized(h.w), 64, 512);
  cpu::Int8Activations acts;
  std::vector<float> out(exact.size());
  cpu::matmul_int8_kernel()(acts.quantize(x.data(), rows, 512, cpu::int8_activation_block(p.w)), p.w, 0, 64, out.data(), 64);
  float max_ref = 0.f, max_diff = 0.f;
  for (size_t i = 0; i < out.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(exact[i]));
    max_diff = std::max(max_diff, std::fabs(out[i] - exact[i]));
  }
  EXPECT_LT(max_diff, 1e-2f * max_ref);
  EXPECT_GT(max_diff, 0.f);  // it is the int8 product, not the f32 one
}

TEST(Int8MatmulDense, AmxTilesEngageWhereTheCpuHasThem) {
#if defined(__x86_64__)
  if (!cpu::amx_int8_enabled()) GTEST_SKIP() << "no AMX-INT8 on this CPU (or the kernel refused the tile state)";
  EXPECT_STREQ("amx-int8", cpu::matmul_int8_kernel_name());
  std::mt19937 rng(6);
  const QuantHost h = random_quant({WeightFormat::Symmetric, 4, 32, DType::F16}, 128, 128, rng);
  const QuantHost p = pack_dot(h.w);
  const int64_t before = cpu::amx_int8_rows_run();
  expect_every_kernel_matches(h.w, p.w, 20, rng);
  EXPECT_EQ(before + 32, cpu::amx_int8_rows_run());  // 16 rows, twice (from panel 0 and from panel 1)
  // --quantize int8's rows: 128-column activation blocks through the 64-column tiles.
  const auto wf = random_vec(128 * 256, rng);
  const QuantizedWeight qw = quantize_int8(Weight{wf.data(), DType::F32, 128, 256});
  const QuantHost dense = pack_dot(qw.weight);
  ASSERT_EQ(128, cpu::int8_activation_block(dense.w));
  expect_every_kernel_matches(qw.weight, dense.w, 20, rng);
  EXPECT_EQ(before + 64, cpu::amx_int8_rows_run());
#else
  GTEST_SKIP() << "AMX is x86-64 only";
#endif
}

// GGUF K-quants as gguf_repack.h repacks them (F32 scales d·sc and biases −dmin·m, one f16 d
// and dmin per 256 columns; Q6_K's 8-bit codes q − 32 in 16-column groups; Q5_K's 5-bit codes;
// a fused q/k/v mixing Q4_K and Q6_K parts, widened to Affine 8-bit g16), and Q5_0's codes.
enum class KQuant { Q4K, Q5K, Q6K, MixedQ4KQ6K, Q5_0 };
struct KQuantHost {
  std::vector<uint8_t> codes;
  std::vector<float> scales, biases;
  std::vector<uint16_t> f16_scales;
  Weight w;
};
KQuantHost kquant_like(KQuant kind, int64_t rows, int64_t cols, std::mt19937& rng) {
  KQuantHost h;
  const bool eight = kind != KQuant::Q4K, affine = kind != KQuant::Q6K && kind != KQuant::Q5_0;
  const int group = kind == KQuant::Q6K || kind == KQuant::MixedQ4KQ6K ? 16 : 32;
  std::uniform_int_distribution<int> u6(0, 63), s8(-128, 127), u4(0, 15), u5(0, 31), s6(-32, 31), s5(-16, 15);
  std::uniform_real_distribution<float> unit(0.5f, 2.f);
  const auto f16 = [](float v) { return f16_to_f32(f32_to_f16(v)); };
  h.codes.assign(static_cast<size_t>(eight ? rows * cols : rows * cols / 2), 0);
  const int64_t groups = cols / group;
  h.scales.resize(static_cast<size_t>(rows * groups));
  if (affine) h.biases.resize(h.scales.size());
  for (int64_t r = 0; r < rows; ++r) {
    const bool q6 = kind == KQuant::Q6K || (kind == KQuant::MixedQ4KQ6K && r % 3 == 2);
    for (int64_t t = 0; t < cols / 256; ++t) {
      const float d = f16(0.01f * unit(rng) * (q6 && r % 5 == 0 ? -1.f : 1.f)), dmin = f16(0.003f * unit(rng));
      int q4_sc = 0, q4_m = 0;
      for (int64_t g = t * (256 / group); g < (t + 1) * (256 / group); ++g) {
        const size_t at = static_cast<size_t>(r * groups + g);
        if (q6) {
          const float s = d * static_cast<float>(g % 7 == 3 ? 0 : s8(rng));
          h.scales[at] = s;
          if (affine) h.biases[at] = -32.f * s;  // the widened Q6_K part: u = q + 32
        } else {
          // A 16-column group of the mixed weight repeats its Q4_K sub-block's 32-column pair.
          if (group == 32 || g % 2 == 0) q4_sc = g % 11 == 4 ? 0 : u6(rng), q4_m = g % 13 == 6 ? 0 : u6(rng);
          h.scales[at] = d * static_cast<float>(q4_sc);
          if (affine) h.biases[at] = -(dmin * static_cast<float>(q4_m));
        }
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      int code;
      switch (kind) {
        case KQuant::Q4K: code = u4(rng); break;
        case KQuant::Q5K: code = u5(rng); break;
        case KQuant::Q6K: code = s6(rng); break;
        case KQuant::Q5_0: code = s5(rng); break;
        default: code = q6 ? s6(rng) + 32 : u4(rng); break;
      }
      if (eight) h.codes[i] = static_cast<uint8_t>(code);
      else h.codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code : code << 4);
    }
  }
  h.w = Weight{h.codes.data(), DType::U8, rows, cols};
  h.w.format = affine ? WeightFormat::Affine : WeightFormat::Symmetric;
  h.w.quant.bits = static_cast<uint8_t>(eight ? 8 : 4);
  h.w.quant.group = group;
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = affine ? h.biases.data() : nullptr;
  if (kind == KQuant::Q5_0) {  // F16 scales: 6-bit codes only
    for (float s : h.scales) h.f16_scales.push_back(f32_to_f16(s * 0.01f));
    h.w.quant.scale_dtype = DType::F16;
    h.w.quant.scales = h.f16_scales.data();
  }
  return h;
}

std::string kquant_name(KQuant kind) {
  static const char* kNames[] = {"Q4_K", "Q5_K", "Q6_K", "MixedQ4_KQ6_K", "Q5_0"};
  return kNames[static_cast<int>(kind)];
}

class Int8CompactForms : public ::testing::TestWithParam<KQuant> {};

// The compact Panel64Dot forms engage for K-quant data (6-bit codes, factored scales, fewer
// bytes), keep every element's value, and every kernel gives the reference's bits on odd shapes
// (131 outputs: a panel tail; 512 columns: two factor spans).
TEST_P(Int8CompactForms, EngageAndGiveTheReferenceBits) {
  const KQuant kind = GetParam();
  std::mt19937 rng(11 + static_cast<int>(kind));
  const KQuantHost h = kquant_like(kind, 131, 512, rng);
  ASSERT_TRUE(cpu::int8_dot_eligible(h.w));
  const QuantHost p = pack_dot(h.w);
  EXPECT_EQ(kind == KQuant::Q4K ? 4 : 6, p.w.quant.bits);
  EXPECT_EQ(kind == KQuant::Q5_0 ? DType::F16 : DType::I8, p.w.quant.scale_dtype);
  EXPECT_TRUE(cpu::compact_dot_weight(p.w));
  // Bytes per weight: Q4_K 4.75 (F32 form: 6), Q6_K 6.625 (8-bit g16 F32: 10).
  const double bits = 8.0 * static_cast<double>(p.codes.size() + p.scales.size() + p.biases.size()) / (192.0 * 512.0);
  if (kind == KQuant::Q4K) {
    EXPECT_LT(bits, 4.8);
  }
  if (kind == KQuant::Q6K) {
    EXPECT_LT(bits, 6.7);
  }
  for (int64_t r = 0; r < h.w.rows; ++r)
    for (int64_t c = 0; c < h.w.cols; ++c) {
      const float a = dequantize_element(h.w, r, c), b = dequantize_element(p.w, r, c);
      ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << r << "," << c << ": " << a << " vs " << b << ", codes " << code_at(h.w, r, c)
                                           << " / " << code_at(p.w, r, c);
    }
  for (int64_t rows : {1, 2, 3, 4, 16, 35}) expect_every_kernel_matches(h.w, p.w, rows, rng);
  // The kernel the backend runs: on AMX CPUs, tiles over a standard copy of the panels for
  // 32-column activation blocks, the VNNI kernel for Q6_K's 16.
  auto x = random_vec(static_cast<size_t>(35 * 512), rng);
  const int64_t block = cpu::int8_activation_block(p.w);
  const std::vector<float> want = reference_matmul(reference_activations(x, 35, 512, block), 35, h.w);
  cpu::Int8Activations acts;
  std::vector<float> out(want.size());
#if defined(__x86_64__)
  const int64_t before = cpu::amx_int8_enabled() ? cpu::amx_int8_rows_run() : 0;
#endif
  cpu::matmul_int8_kernel()(acts.quantize(x.data(), 35, 512, block), p.w, 64, 131, out.data(), 131);
  for (int64_t m = 0; m < 35; ++m)
    EXPECT_EQ(0, std::memcmp(out.data() + m * 131 + 64, want.data() + m * 131 + 64, 67 * 4)) << "row " << m;
#if defined(__x86_64__)
  if (std::string(cpu::matmul_int8_kernel_name()) == "amx-int8") {
    EXPECT_EQ(before + (block >= 32 ? 32 : 0), cpu::amx_int8_rows_run());
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(KQuants, Int8CompactForms,
                         ::testing::Values(KQuant::Q4K, KQuant::Q5K, KQuant::Q6K, KQuant::MixedQ4KQ6K, KQuant::Q5_0),
                         [](const auto& info) { return kquant_name(info.param); });

// Scales that are no int8 multiple of one factor per 256 columns (random F32) keep their F32 form.
TEST(Int8CompactForms, UnfactorableScalesStayF32) {
  std::mt19937 rng(12);
  const QuantHost h = random_quant({WeightFormat::Affine, 4, 32, DType::F32}, 64, 512, rng);
  const QuantHost p = pack_dot(h.w);
  EXPECT_EQ(DType::F32, p.w.quant.scale_dtype);
  EXPECT_EQ(4, p.w.quant.bits);
  EXPECT_FALSE(cpu::compact_dot_weight(p.w));
}

}  // namespace
}  // namespace tachyon::kernels
