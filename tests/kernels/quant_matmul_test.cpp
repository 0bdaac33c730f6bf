// Quantized weights on the CPU and reference backends: every ISA path gives the canonical bits
// (the scalar definition's f32 weights through the dense fma chain) for every format, bits,
// group and scale dtype, row count (register tiles, and the dequantized f32 panel of many rows)
// and output count (panel tails); embeddings, MoE experts and cpu-bf16 on quantized
// weights; uploads own their bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/quant_pack.h"
#include "quant_panels.h"
#include "quant_test_data.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

QuantHost pack(const Weight& host) { return pack_panels(host, cpu::quant_panel64_bytes, cpu::pack_quant_panel64); }

class QuantMatmul : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantMatmul, PackedElementsAreTheScalarDefinition) {
  std::mt19937 rng(1);
  const QuantHost h = random_quant(GetParam(), 131, 256, rng);
  const QuantHost p = pack(h.w);
  for (int64_t r = 0; r < h.w.rows; ++r)
    for (int64_t c = 0; c < h.w.cols; ++c) {
      const float a = dequantize_element(h.w, r, c), b = dequantize_element(p.w, r, c);
      ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << r << "," << c;
    }
}

TEST_P(QuantMatmul, EveryIsaGivesTheCanonicalBits) {
  std::mt19937 rng(2);
  const QuantCase qc = GetParam();
  // Fp8Block's blocks may be partial: 200 columns. Other formats: 256 (every group divides it).
  const int64_t n = 131, k = qc.format == WeightFormat::Fp8Block ? 200 : 256;
  const QuantHost h = random_quant(qc, n, k, rng);
  const QuantHost p = pack(h.w);
  const std::vector<float> w = dequantized(h.w);
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
  // 1..7: register tiles; 13 and 25: past the AVX2 / AVX-512 limits, a dequantized f32 panel.
  for (int64_t rows : {1, 2, 5, 6, 7, 13, 25, 64}) {
    const auto x = random_vec(static_cast<size_t>(rows * k), rng);
    const std::vector<float> want = canonical_matmul(x.data(), rows, w, n, k);
    auto run = [&](cpu::MatmulRangeFn fn, const Weight& wt, int64_t n_begin) {
      std::vector<float> out(want.size());
      if (n_begin > 0) std::copy(want.begin(), want.end(), out.begin());  // columns before n_begin: not written
      fn(x.data(), rows, wt, n_begin, n, out.data(), n);
      return out;
    };
    EXPECT_TRUE(same_bits(run(cpu::matmul_range_portable, h.w, 0), want)) << "portable row-major, rows " << rows;
    EXPECT_TRUE(same_bits(run(cpu::matmul_range_portable, p.w, 0), want)) << "portable Panel64, rows " << rows;
#if defined(__x86_64__)
    if (avx2) {
      EXPECT_TRUE(same_bits(run(cpu::matmul_range_avx2, p.w, 0), want)) << "avx2, rows " << rows;
      EXPECT_TRUE(same_bits(run(cpu::matmul_range_avx2, p.w, 64), want)) << "avx2 from panel 1, rows " << rows;
    }
    if (avx512) {
      EXPECT_TRUE(same_bits(run(cpu::matmul_range_avx512, p.w, 0), want)) << "avx512, rows " << rows;
      EXPECT_TRUE(same_bits(run(cpu::matmul_range_avx512, p.w, 64), want)) << "avx512 from panel 1, rows " << rows;
    }
#endif
  }
}

TEST_P(QuantMatmul, BackendsMatchTheDequantizedDenseWeight) {
  std::mt19937 rng(3);
  const QuantCase qc = GetParam();
  const int64_t n = 77, k = 128;
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  QuantHost h = random_quant(qc, n, k, rng);
  std::vector<float> dense = dequantized(h.w);
  const Weight qcpu = cpu->upload_weight(h.w), qref = ref->upload_weight(h.w);
  const Weight dcpu = cpu->upload_weight(Weight{dense.data(), DType::F32, n, k});
  // Uploads own their bytes: the loaders' host buffers are transient.
  std::fill(h.codes.begin(), h.codes.end(), uint8_t{0x11});
  std::fill(h.scales.begin(), h.scales.end(), uint8_t{0x22});
  std::fill(h.biases.begin(), h.biases.end(), uint8_t{0x33});
  for (int64_t rows : {1, 3, 6, 9}) {
    const auto x = random_vec(static_cast<size_t>(rows * k), rng);
    std::vector<float> a(static_cast<size_t>(rows * n)), b(a.size()), c(a.size());
    cpu->matmul(x.data(), rows, qcpu, nullptr, a.data());
    cpu->matmul(x.data(), rows, dcpu, nullptr, b.data());
    ref->matmul(x.data(), rows, qref, nullptr, c.data());
    EXPECT_TRUE(same_bits(a, b)) << "cpu quantized vs cpu dense, rows " << rows;
    EXPECT_TRUE(same_bits(a, canonical_matmul(x.data(), rows, dense, n, k))) << "rows " << rows;
    EXPECT_LT(max_rel(a, c), 1e-5) << "cpu vs reference, rows " << rows;
  }
}

TEST_P(QuantMatmul, EmbeddingRowsAreTheDequantizedRows) {
  std::mt19937 rng(4);
  const int64_t vocab = 100, dim = 128;
  const QuantHost h = random_quant(GetParam(), vocab, dim, rng);
  const std::vector<float> w = dequantized(h.w);
  const std::vector<int32_t> ids = {0, 63, 64, 99, 7};
  for (const char* name : {"cpu", "reference", "cpu-bf16"}) {
    auto be = make_backend(name);
    const Weight table = be->upload_weight(h.w);
    std::vector<float> out(ids.size() * dim), want(out.size());
    be->embedding(table, ids.data(), static_cast<int64_t>(ids.size()), 0.75f, out.data());
    for (size_t r = 0; r < ids.size(); ++r)
      for (int64_t i = 0; i < dim; ++i) want[r * dim + i] = w[ids[r] * dim + i] * 0.75f;
    EXPECT_TRUE(same_bits(out, want)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantMatmul, ::testing::ValuesIn(all_quant_cases()),
                         [](const auto& info) { return info.param.name(); });

// cpu-bf16 keeps quantized weights as they are and rounds only the inputs.
TEST(QuantCpuBf16, RoundsInputsOnly) {
  std::mt19937 rng(5);
  const int64_t n = 70, k = 64, rows = 3;
  const QuantHost h = random_quant({WeightFormat::Symmetric, 4, 32, DType::F16}, n, k, rng);
  auto bf = make_backend("cpu-bf16"), cpu = make_backend("cpu");
  const Weight wb = bf->upload_weight(h.w), wc = cpu->upload_weight(h.w);
  EXPECT_TRUE(wb.quantized());
  auto x = random_vec(static_cast<size_t>(rows * k), rng);
  std::vector<float> a(static_cast<size_t>(rows * n)), b(a.size());
  bf->matmul(x.data(), rows, wb, nullptr, a.data());
  for (float& v : x) v = round_to_bf16(v);
  cpu->matmul(x.data(), rows, wc, nullptr, b.data());
  EXPECT_TRUE(same_bits(a, b));
}

// Quantized experts (the grouped matmul runs them through matmul_range): the bits of the same
// experts as dense f32 weights, and the reference within rounding.
TEST(QuantMoe, QuantizedExpertsMatchDenseAndReference) {
  std::mt19937 rng(6);
  const int64_t E = 4, H = 64, I = 96, top_k = 2;
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  for (const QuantCase& qc : {QuantCase{WeightFormat::Affine, 4, 32, DType::F16}, QuantCase{WeightFormat::Mxfp4, 4, 32, DType::U8},
                              QuantCase{WeightFormat::Symmetric, 8, 32, DType::BF16}}) {
    std::vector<QuantHost> hosts;
    std::vector<std::vector<float>> dense;
    std::vector<Weight> qc_gu, qc_dn, qr_gu, qr_dn, d_gu, d_dn;
    for (int64_t e = 0; e < E; ++e) {
      hosts.push_back(random_quant(qc, 2 * I, H, rng));
      hosts.push_back(random_quant(qc, H, I, rng));
      for (int j = 0; j < 2; ++j) dense.push_back(dequantized(hosts[hosts.size() - 2 + j].w));
    }
    for (int64_t e = 0; e < E; ++e) {
      qc_gu.push_back(cpu->upload_weight(hosts[2 * e].w));
      qc_dn.push_back(cpu->upload_weight(hosts[2 * e + 1].w));
      qr_gu.push_back(ref->upload_weight(hosts[2 * e].w));
      qr_dn.push_back(ref->upload_weight(hosts[2 * e + 1].w));
      d_gu.push_back(cpu->upload_weight(Weight{dense[2 * e].data(), DType::F32, 2 * I, H}));
      d_dn.push_back(cpu->upload_weight(Weight{dense[2 * e + 1].data(), DType::F32, H, I}));
    }
    MoeExperts q{qc_gu.data(), qc_dn.data(), nullptr, nullptr, E, I, H};
    MoeExperts r{qr_gu.data(), qr_dn.data(), nullptr, nullptr, E, I, H};
    MoeExperts d{d_gu.data(), d_dn.data(), nullptr, nullptr, E, I, H};
    for (int64_t rows : {1, 5, 13}) {
      const auto x = random_vec(static_cast<size_t>(rows * H), rng);
      std::vector<int32_t> ids;
      std::vector<float> weights;
      for (int64_t i = 0; i < rows; ++i) {
        const int32_t a = static_cast<int32_t>(i % E), b = static_cast<int32_t>((i * 3 + 1) % E);
        ids.push_back(a);
        ids.push_back(a == b ? (a + 1) % static_cast<int32_t>(E) : b);
        weights.push_back(0.6f);
        weights.push_back(0.4f);
      }
      std::vector<float> a(static_cast<size_t>(rows * H)), b(a.size()), c(a.size());
      cpu->moe_experts(x.data(), rows, ids.data(), weights.data(), top_k, q, a.data());
      cpu->moe_experts(x.data(), rows, ids.data(), weights.data(), top_k, d, b.data());
      ref->moe_experts(x.data(), rows, ids.data(), weights.data(), top_k, r, c.data());
      EXPECT_TRUE(same_bits(a, b)) << qc.name() << " rows " << rows;
      EXPECT_LT(max_rel(a, c), 1e-5) << qc.name() << " rows " << rows;
    }
  }
}

// NaN codes (e4m3fn 0x7f / 0xff) and NaN scales (e8m0 255) give NaN outputs on every path,
// and leave the other outputs' bits alone.
TEST(QuantMatmulNaN, NaNCodesAndScalesPropagate) {
  std::mt19937 rng(8);
  for (const QuantCase& qc : {QuantCase{WeightFormat::Fp8Block, 8, 16, DType::F32}, QuantCase{WeightFormat::Mxfp4, 4, 32, DType::U8}}) {
    const int64_t n = 69, k = 64;
    QuantHost h = random_quant(qc, n, k, rng);
    for (int64_t r = 0; r < n; r += 3) {
      if (qc.format == WeightFormat::Fp8Block) h.codes[static_cast<size_t>(r * k + r % k)] = r % 2 ? 0xff : 0x7f;
      else h.scales[static_cast<size_t>(r * (k / 32))] = 255;
    }
    const QuantHost p = pack(h.w);
    const auto x = random_vec(static_cast<size_t>(7 * k), rng);
    std::vector<cpu::MatmulRangeFn> paths = {cpu::matmul_range_portable};
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) paths.push_back(cpu::matmul_range_avx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) paths.push_back(cpu::matmul_range_avx512);
#endif
    std::vector<float> first;
    for (auto fn : paths)
      for (int64_t rows : {1, 2, 7}) {
        std::vector<float> out(static_cast<size_t>(rows * n));
        fn(x.data(), rows, p.w, 0, n, out.data(), n);
        for (int64_t m = 0; m < rows; ++m)
          for (int64_t r = 0; r < n; ++r) EXPECT_EQ(std::isnan(out[m * n + r]), r % 3 == 0) << qc.name() << " " << r;
        if (first.empty()) first.assign(out.begin(), out.begin() + n);
        for (int64_t r = 1; r < n; r += 3) EXPECT_EQ(out[r], first[r]) << qc.name() << " " << r;
      }
  }
}

TEST(QuantUpload, RefusesInconsistentParameters) {
  std::mt19937 rng(7);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  QuantHost h = random_quant({WeightFormat::Affine, 4, 32, DType::F16}, 8, 64, rng);
  h.w.quant.group = 48;  // does not divide 64 columns
  EXPECT_THROW(cpu->upload_weight(h.w), Error);
  EXPECT_THROW(ref->upload_weight(h.w), Error);
  h.w.quant.group = 32;
  h.w.quant.biases = nullptr;  // Affine needs biases
  EXPECT_THROW(cpu->upload_weight(h.w), Error);
  h.w.quant.biases = h.biases.data();
  h.w.quant.bits = 3;
  EXPECT_THROW(ref->upload_weight(h.w), Error);
}

}  // namespace
}  // namespace tachyon::kernels
