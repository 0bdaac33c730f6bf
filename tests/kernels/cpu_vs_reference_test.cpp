// Every op of the CPU backend against the scalar reference, for every weight dtype, on
// awkward sizes (tails of the 8-wide SIMD loop, rows not a multiple of the tile).
// Plus the exactness property of DESIGN.md: a row's bits do not depend on the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/backend.h"
#include "test_data.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {
namespace {

struct HostWeight {
  std::vector<uint16_t> half;
  std::vector<float> full;
  Weight view;
};

HostWeight random_weight(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.5f);
  HostWeight w;
  w.full.resize(static_cast<size_t>(rows * cols));
  for (auto& x : w.full) x = dist(rng);
  if (dtype == DType::F32) {
    w.view = {w.full.data(), dtype, rows, cols};
  } else {
    for (float x : w.full) w.half.push_back(dtype == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x));
    w.view = {w.half.data(), dtype, rows, cols};
  }
  return w;
}

class Kernels : public ::testing::TestWithParam<DType> {
 protected:
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  std::mt19937 rng{42};
};

TEST_P(Kernels, MatmulMatchesReference) {
  for (auto [rows, n, k] : {std::tuple{1, 37, 19}, {3, 50, 64}, {4, 24, 8}, {7, 101, 130}, {65, 33, 72}}) {
    auto w = random_weight(GetParam(), n, k, rng);
    auto bias = random_weight(GetParam(), 1, n, rng);
    auto x = random_vec(static_cast<size_t>(rows * k), rng);
    std::vector<float> a(static_cast<size_t>(rows * n)), b(a.size());
    const Weight packed = cpu->upload_weight(w.view), packed_bias = cpu->upload_weight(bias.view);
    cpu->matmul(x.data(), rows, packed, &packed_bias, a.data());
    ref->matmul(x.data(), rows, w.view, &bias.view, b.data());
    EXPECT_LT(max_rel(a, b), 1e-5) << rows << "x" << n << "x" << k;
  }
}

TEST_P(Kernels, MatmulRowIsBitIdenticalWhateverTheBatch) {
  const int64_t n = 77, k = 203;
  auto w = random_weight(GetParam(), n, k, rng);
  auto x = random_vec(static_cast<size_t>(40 * k), rng);
  const Weight packed = cpu->upload_weight(w.view);
  std::vector<float> batched(static_cast<size_t>(40 * n));
  cpu->matmul(x.data(), 40, packed, nullptr, batched.data());
  for (int64_t r : {0, 3, 17, 39}) {
    std::vector<float> alone(static_cast<size_t>(n));
    cpu->matmul(x.data() + r * k, 1, packed, nullptr, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + r * n, n * sizeof(float))) << "row " << r;
  }
}

// A drafter's weights (Backend::upload_draft_weight): int8 per row on the CPU, within the
// quantisation error of the exact product (|w − q·s| <= s/2 per weight, s = max|row| / 127),
// the stored values exact, and every row's bits independent of the batch.
TEST_P(Kernels, DraftWeightsAreInt8PerRowWithinTheQuantisationError) {
  const int64_t n = 131, k = 203;
  auto w = random_weight(GetParam(), n, k, rng);
  const Weight draft = cpu->upload_draft_weight(w.view);
  ASSERT_EQ(draft.dtype, DType::I8);
  ASSERT_NE(draft.scales, nullptr);
  for (int64_t r : {0, 64, 130}) {
    float peak = 0.f;
    for (int64_t c = 0; c < k; ++c) peak = std::max(peak, std::fabs(rowwise::load_weight(w.view, r, c)));
    EXPECT_FLOAT_EQ(draft.scales[r], peak / 127.f) << "row " << r;
    for (int64_t c = 0; c < k; c += 17)
      EXPECT_LE(std::fabs(rowwise::load_weight(draft, r, c) - rowwise::load_weight(w.view, r, c)),
                0.5f * draft.scales[r] * (1.f + 1e-5f)) << r << "," << c;
  }
  const int64_t rows = 9;
  auto x = random_vec(static_cast<size_t>(rows * k), rng);
  std::vector<float> exact(static_cast<size_t>(rows * n)), lossy(exact.size());
  ref->matmul(x.data(), rows, w.view, nullptr, exact.data());
  cpu->matmul(x.data(), rows, draft, nullptr, lossy.data());
  const double err = max_rel(lossy, exact);
  EXPECT_LT(err, 2e-2);
  EXPECT_GT(err, 0.0);  // it really is the quantised matrix
  for (int64_t r : {0, 5, 8}) {
    std::vector<float> alone(static_cast<size_t>(n));
    cpu->matmul(x.data() + r * k, 1, draft, nullptr, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), lossy.data() + r * n, n * sizeof(float))) << "row " << r;
  }
}

// A drafter's matrix whose rows are whole 32-column blocks (every real drafter's) runs on int8
// activations (cpu/isa/matmul_int8.h: VNNI or AMX integer dot products, a quarter of the f32
// FMAs' instructions): within the two quantisations' error of the exact product, and every row's
// bits independent of the batch.
TEST_P(Kernels, DraftWeightsOfWholeBlocksRunOnInt8Activations) {
  const int64_t n = 131, k = 256;
  auto w = random_weight(GetParam(), n, k, rng);
  const Weight draft = cpu->upload_draft_weight(w.view);
  ASSERT_EQ(draft.layout, WeightLayout::Panel64Dot);
  const int64_t rows = 9;
  auto x = random_vec(static_cast<size_t>(rows * k), rng);
  std::vector<float> exact(static_cast<size_t>(rows * n)), lossy(exact.size());
  ref->matmul(x.data(), rows, w.view, nullptr, exact.data());
  cpu->matmul(x.data(), rows, draft, nullptr, lossy.data());
  EXPECT_LT(max_rel(lossy, exact), 3e-2);
  for (int64_t r : {0, 5, 8}) {
    std::vector<float> alone(static_cast<size_t>(n));
    cpu->matmul(x.data() + r * k, 1, draft, nullptr, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), lossy.data() + r * n, n * sizeof(float))) << "row " << r;
  }
}

// Backend::top_two on the CPU (cpu/top_two_row.h): the definition's ids, its probabilities within
// 1e-5 (a float sum instead of a double one), the same bits on every ISA path.
TEST(KernelsIsa, TopTwoMatchesTheDefinitionOnEveryIsa) {
  std::mt19937 rng(11);
  auto cpu = make_backend("cpu");
  for (int64_t n : {1, 2, 17, 4096, 8191}) {
    auto x = random_vec(static_cast<size_t>(3 * n), rng, 3.f);
    if (n > 2) x[static_cast<size_t>(n + 5)] = x[static_cast<size_t>(n + 1)] = 40.f;  // a tie: the first index wins
    std::vector<TopTwo> got(3);
    cpu->top_two(x.data(), 3, n, got.data());
    for (int64_t r = 0; r < 3; ++r) {
      const TopTwo want = top_two_of_row(x.data() + r * n, n);
      EXPECT_EQ(got[r].best, want.best) << n << " row " << r;
      EXPECT_EQ(got[r].second, want.second) << n << " row " << r;
      EXPECT_NEAR(got[r].p_best, want.p_best, 1e-5f * want.p_best) << n << " row " << r;
      EXPECT_NEAR(got[r].p_second, want.p_second, 1e-5f * std::max(want.p_second, 1e-30f)) << n << " row " << r;
      const TopTwo portable = cpu::top_two_row_portable(x.data() + r * n, n);
#if defined(__x86_64__)
      if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        const TopTwo avx2 = cpu::top_two_row_avx2(x.data() + r * n, n);
        EXPECT_EQ(0, std::memcmp(&avx2, &portable, sizeof(TopTwo))) << n << " row " << r;
      }
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
        const TopTwo avx512 = cpu::top_two_row_avx512(x.data() + r * n, n);
        EXPECT_EQ(0, std::memcmp(&avx512, &portable, sizeof(TopTwo))) << n << " row " << r;
      }
#endif
    }
  }
}

// A row of the embedding table gives the same bits from Panel64 as from the checkpoint's rows.
TEST_P(Kernels, EmbeddingFromPackedTableMatchesReference) {
  auto w = random_weight(GetParam(), 131, 45, rng);
  const Weight packed = cpu->upload_weight(w.view);
  const std::vector<int32_t> ids = {0, 63, 64, 130, 7};
  std::vector<float> a(ids.size() * 45), b(a.size());
  cpu->embedding(packed, ids.data(), static_cast<int64_t>(ids.size()), 0.5f, a.data());
  ref->embedding(w.view, ids.data(), static_cast<int64_t>(ids.size()), 0.5f, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(KernelsDraftWeights, AMatrixWithANonFiniteWeightStaysAsStored) {
  auto cpu = make_backend("cpu");
  std::vector<float> w(8 * 16, 0.3f);  // not a bf16 value: the F32 matrix is not narrowed either
  w[37] = INFINITY;
  const Weight draft = cpu->upload_draft_weight(Weight{w.data(), DType::F32, 8, 16});
  EXPECT_EQ(draft.dtype, DType::F32);
  EXPECT_EQ(draft.scales, nullptr);
  w[37] = NAN;
  EXPECT_EQ(cpu->upload_draft_weight(Weight{w.data(), DType::F32, 8, 16}).dtype, DType::F32);
}

TEST(KernelsDraftWeights, OtherBackendsKeepDraftWeightsExact) {
  auto ref = make_backend("reference");
  std::mt19937 rng(3);
  auto w = random_weight(DType::BF16, 8, 16, rng);
  const Weight draft = ref->upload_draft_weight(w.view);
  EXPECT_EQ(draft.dtype, DType::BF16);
  EXPECT_EQ(draft.scales, nullptr);
}

// An F32 matrix holding only bf16 values (an F32 file converted up from bf16) is stored as bf16:
// half the bytes, and every output bit for bit what the bf16 matrix gives. One value off a bf16
// keeps the matrix F32.
TEST(KernelsF32Weights, ABf16ExactMatrixIsStoredAsBf16WithTheSameOutputs) {
  auto cpu = make_backend("cpu");
  std::mt19937 rng(11);
  const int64_t rows = 5, n = 70, k = 131;
  auto w = random_weight(DType::BF16, n, k, rng);
  std::vector<float> widened(w.half.size());
  for (size_t i = 0; i < widened.size(); ++i) widened[i] = bf16_to_f32(w.half[i]);
  const Weight from_f32 = cpu->upload_weight(Weight{widened.data(), DType::F32, n, k});
  EXPECT_EQ(from_f32.dtype, DType::BF16);
  EXPECT_EQ(cpu->f32_weights_stored_as_bf16().tensors, 1);
  EXPECT_EQ(cpu->f32_weights_stored_as_bf16().bytes_saved, n * k * 2);
  const Weight from_bf16 = cpu->upload_weight(w.view);
  auto x = random_vec(static_cast<size_t>(rows * k), rng);
  std::vector<float> a(static_cast<size_t>(rows * n)), b(a.size());
  cpu->matmul(x.data(), rows, from_f32, nullptr, a.data());
  cpu->matmul(x.data(), rows, from_bf16, nullptr, b.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));

  widened[100] = std::nextafter(widened[100], 1.f);
  EXPECT_EQ(cpu->upload_weight(Weight{widened.data(), DType::F32, n, k}).dtype, DType::F32);
  EXPECT_EQ(cpu->f32_weights_stored_as_bf16().tensors, 1);
}

// Every ISA path (AVX-512 tiles of up to 6 rows, AVX2 tiles of 3 and 1, portable) computes
// the same fma chain per output: bit-identical results for any row count and panel tail.
TEST(KernelsIsa, EveryIsaMatmulIsBitIdentical) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 on this CPU";
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  std::mt19937 rng(7);
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I8}) {
    auto w = random_weight(d == DType::I8 ? DType::F32 : d, 129, 45, rng);
    std::vector<int8_t> q(129 * 45);
    std::vector<float> scales(129);
    if (d == DType::I8) {  // a drafter's weight (CpuBackend::upload_draft_weight)
      ASSERT_TRUE(cpu::quantize_rows_i8(w.view, q.data(), scales.data()));
      w.view = Weight{q.data(), DType::I8, 129, 45};
      w.view.scales = scales.data();
    }
    std::vector<uint8_t> packed_bytes(static_cast<size_t>(cpu::panel64_padded_rows(129) * 45) * dtype_size(d));
    cpu::pack_panel64(w.view, packed_bytes.data());
    Weight packed = w.view;
    packed.data = packed_bytes.data();
    packed.layout = WeightLayout::Panel64;
    for (int64_t rows : {1, 2, 4, 5, 6, 7, 8, 9, 12, 13}) {
      auto x = random_vec(static_cast<size_t>(rows * 45), rng);
      const size_t n = static_cast<size_t>(rows * 129);
      std::vector<float> a(n), b(n), c(n), e(n);
      cpu::matmul_range_avx2(x.data(), rows, packed, 0, 129, a.data(), 129);
      cpu::matmul_range_portable(x.data(), rows, packed, 0, 129, b.data(), 129);
      cpu::matmul_range_portable(x.data(), rows, w.view, 0, 129, c.data(), 129);  // row-major source
      EXPECT_EQ(0, std::memcmp(b.data(), c.data(), n * sizeof(float))) << dtype_name(d) << " rows " << rows;
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << dtype_name(d) << " rows " << rows;
      if (avx512) {
        cpu::matmul_range_avx512(x.data(), rows, packed, 0, 129, e.data(), 129);
        EXPECT_EQ(0, std::memcmp(e.data(), b.data(), n * sizeof(float))) << "avx512 " << dtype_name(d) << " rows " << rows;
      }
    }
  }
#else
  GTEST_SKIP() << "not x86-64";
#endif
}

TEST(KernelsIsa, AttentionIsBitIdenticalAcrossIsas) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  const int64_t kv_heads = 2, group = 3, d = 20, bs = 4, blocks = 10;
  std::vector<float> kc = random_vec(blocks * bs * kv_heads * d, rng), vc = random_vec(kc.size(), rng);
  PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  std::vector<int32_t> table = {4, 9, 0, 2, 7, 1, 3, 8, 5, 6};
  auto q = random_vec(static_cast<size_t>(group * d), rng);
  std::vector<float> sinks = {0.3f, -2.f, 1.f};
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<float> a(static_cast<size_t>(group * d)), b(a.size());
    cpu::AttentionItem it{q.data(), &kv, table.data(), 1, group, variant == 1 ? 20 : 0, 37,
                          0.25f, variant == 2 ? 4.f : 0.f, variant == 0 ? sinks.data() : nullptr, a.data()};
    cpu::attend_items_avx2(&it, 1);
    it.out = b.data();
    cpu::attend_items_portable(&it, 1);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "variant " << variant;
  }
#else
  GTEST_SKIP() << "not x86-64";
#endif
}

// The softmax exponential every ISA shares: within 2 ulp-ish of libm over the softmax range.
TEST(KernelsIsa, CanonicalExpIsAccurate) {
  for (float x = -90.f; x <= 0.f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x)), got = cpu::exp_canonical(x);
    if (x < -87.f) EXPECT_EQ(got, 0.0);
    else EXPECT_NEAR(got, want, 3e-7 * want) << x;
  }
  EXPECT_EQ(cpu::exp_canonical(0.f), 1.f);
  EXPECT_EQ(cpu::exp_canonical(-std::numeric_limits<float>::infinity()), 0.f);
}

TEST_P(Kernels, RowwiseOpsMatchReference) {
  const int64_t rows = 5, dim = 40;
  auto w = random_weight(GetParam(), 1, dim, rng);
  auto x = random_vec(static_cast<size_t>(rows * dim), rng);
  std::vector<float> a(x.size()), b(x.size());
  cpu->rms_norm(x.data(), cpu->upload_weight(w.view), rows, dim, 1e-6f, 1.f, a.data());
  ref->rms_norm(x.data(), w.view, rows, dim, 1e-6f, 1.f, b.data());
  EXPECT_EQ(a, b);
  std::vector<int32_t> ids = {3, 0, 7};
  auto table = random_weight(GetParam(), 8, dim, rng);
  std::vector<float> ea(3 * dim), eb(3 * dim);
  cpu->embedding(cpu->upload_weight(table.view), ids.data(), 3, 2.f, ea.data());  // gathers from Panel64
  ref->embedding(table.view, ids.data(), 3, 2.f, eb.data());
  EXPECT_EQ(ea, eb);
  std::vector<float> ga(rows * dim / 2), gb(ga.size());
  for (auto act : {Activation::SiLU, Activation::GeluTanh}) {
    cpu->gated_activation(x.data(), rows, dim / 2, act, ga.data());
    ref->gated_activation(x.data(), rows, dim / 2, act, gb.data());
    EXPECT_EQ(ga, gb);
  }
}

// CpuBackend::rms_norm interleaves four rows' sums of squares: every row count (groups of four
// plus a tail) and the in-place form (q/k norms) give the reference bits.
TEST_P(Kernels, RmsNormIsBitIdenticalForAnyRowCountAndInPlace) {
  const int64_t dim = 64;
  auto w = random_weight(GetParam(), 1, dim, rng);
  const Weight packed = cpu->upload_weight(w.view);
  for (int64_t rows = 1; rows <= 9; ++rows) {
    auto x = random_vec(static_cast<size_t>(rows * dim), rng);
    std::vector<float> a(x.size()), b(x.size()), in_place = x;
    cpu->rms_norm(x.data(), packed, rows, dim, 1e-6f, 0.f, a.data());
    ref->rms_norm(x.data(), w.view, rows, dim, 1e-6f, 0.f, b.data());
    cpu->rms_norm(in_place.data(), packed, rows, dim, 1e-6f, 0.f, in_place.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "rows " << rows;
    EXPECT_EQ(0, std::memcmp(in_place.data(), b.data(), b.size() * sizeof(float))) << "in place, rows " << rows;
  }
}

// The steps between the matmuls (residual add, add + norm, gated activation, column splits, the attention prologue
// and the cache write) split over the pool by rows: a prefill-sized batch (several chunks per
// thread, a tail) gives the reference backend's bits: with and without q/k norms, full, partial and
// interleaved rotations, an F32 and a BF16 cache.
TEST_P(Kernels, RowStepsSplitOverThreadsMatchReference) {
  const int64_t rows = 83, dim = 48, heads = 4, kv_heads = 2, d = 16, bs = 4;
  auto w = random_weight(GetParam(), 1, dim, rng);
  const Weight packed = cpu->upload_weight(w.view);
  const auto x0 = random_vec(static_cast<size_t>(rows * dim), rng), y = random_vec(x0.size(), rng);
  auto xa = x0, xb = x0;
  cpu->add(xa.data(), y.data(), rows * dim);
  ref->add(xb.data(), y.data(), rows * dim);
  EXPECT_EQ(xa, xb);
  std::vector<float> na(x0.size()), nb(x0.size());
  cpu->add_rms_norm(xa.data(), y.data(), packed, rows, dim, 1e-6f, 1.f, na.data());
  ref->add_rms_norm(xb.data(), y.data(), w.view, rows, dim, 1e-6f, 1.f, nb.data());
  EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(na.data(), nb.data(), na.size() * sizeof(float)));
  std::vector<float> ca(static_cast<size_t>(rows * 20), -1.f), cb = ca;
  cpu->copy_strided(x0.data() + 7, dim, rows, 13, ca.data() + 2, 20);
  ref->copy_strided(x0.data() + 7, dim, rows, 13, cb.data() + 2, 20);
  EXPECT_EQ(ca, cb);
  const int64_t inter = 300;  // a 256-element span and a tail
  const auto gu = random_vec(static_cast<size_t>(rows * 2 * inter), rng, 4.f);
  std::vector<float> ga(static_cast<size_t>(rows * inter)), gb(ga.size());
  for (auto act : {Activation::SiLU, Activation::GeluTanh}) {
    cpu->gated_activation(gu.data(), rows, inter, act, ga.data());
    ref->gated_activation(gu.data(), rows, inter, act, gb.data());
    EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)));
  }

  const int64_t qkv_dim = (heads + 2 * kv_heads) * d, blocks = (rows + bs - 1) / bs + 2;
  const auto qkv = random_vec(static_cast<size_t>(rows * qkv_dim), rng);
  auto qn = random_weight(GetParam(), 1, d, rng), kn = random_weight(GetParam(), 1, d, rng);
  const Weight qn_cpu = cpu->upload_weight(qn.view), kn_cpu = cpu->upload_weight(kn.view);
  std::vector<int32_t> positions(static_cast<size_t>(rows)), row_seq(static_cast<size_t>(rows), 0), offsets = {0, 0};
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5 + 3) % blocks);
  offsets[1] = static_cast<int32_t>(blocks);
  for (int64_t r = 0; r < rows; ++r) positions[static_cast<size_t>(r)] = static_cast<int32_t>(r + 3);
  const AttentionMeta meta{positions.data(), row_seq.data(), table.data(), offsets.data()};
  // F32 cache, q/k norms, full rotation; BF16 cache, no norms, a partial rotation; interleaved pairs.
  for (int variant = 0; variant < 3; ++variant) {
    const KvFormat format = variant == 1 ? KvFormat::BF16 : KvFormat::F32;
    RopeTable rope;
    rope.rotary_dim = variant == 1 ? d / 2 : d;
    rope.interleaved = variant == 2;
    rope.attention_scaling = variant == 1 ? 1.25f : 1.f;
    for (int64_t i = 0; i < rope.rotary_dim / 2; ++i)
      rope.inv_freq.push_back(std::pow(10000.f, -2.f * static_cast<float>(i) / static_cast<float>(rope.rotary_dim)));
    const bool norms = variant != 1;
    const size_t cache_bytes = static_cast<size_t>(blocks * bs * kv_heads * d) * sizeof(float);
    std::vector<uint8_t> ka(cache_bytes, 0), va(cache_bytes, 0), kb(cache_bytes, 0), vb(cache_bytes, 0);
    const PagedKv kv_a{ka.data(), va.data(), static_cast<int32_t>(bs), kv_heads, d, format};
    const PagedKv kv_b{kb.data(), vb.data(), static_cast<int32_t>(bs), kv_heads, d, format};
    std::vector<float> qa(static_cast<size_t>(rows * heads * d)), qb(qa.size());
    std::vector<float> sa(static_cast<size_t>(rows * kv_heads * d)), sb(sa.size()), ta(sa.size()), tb(sa.size());
    QkvPrologue pa{heads, norms ? &qn_cpu : nullptr, norms ? &kn_cpu : nullptr, 1e-6f, 0.f, &rope, positions.data()};
    QkvPrologue pb{heads, norms ? &qn.view : nullptr, norms ? &kn.view : nullptr, 1e-6f, 0.f, &rope, positions.data()};
    cpu->qkv_norm_rope_write_kv(qkv.data(), rows, pa, kv_a, meta, qa.data(), sa.data(), ta.data());
    ref->qkv_norm_rope_write_kv(qkv.data(), rows, pb, kv_b, meta, qb.data(), sb.data(), tb.data());
    EXPECT_EQ(0, std::memcmp(qa.data(), qb.data(), qa.size() * sizeof(float))) << "q, variant " << variant;
    EXPECT_EQ(0, std::memcmp(ka.data(), kb.data(), ka.size())) << "k cache, variant " << variant;
    EXPECT_EQ(0, std::memcmp(va.data(), vb.data(), va.size())) << "v cache, variant " << variant;
    std::fill(ka.begin(), ka.end(), 0);
    std::fill(kb.begin(), kb.end(), 0);
    cpu->write_kv(sb.data(), tb.data(), rows, kv_a, meta);
    ref->write_kv(sb.data(), tb.data(), rows, kv_b, meta);
    EXPECT_EQ(0, std::memcmp(ka.data(), kb.data(), ka.size())) << "write_kv, variant " << variant;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Kernels, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Paged attention over a scattered block table, with GQA, sliding window, softcap and sinks.
TEST(Attention, PagedMatchesReference) {
  std::mt19937 rng(3);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  const int64_t heads = 4, kv_heads = 2, d = 24, bs = 4, blocks = 12;
  std::vector<float> kc = random_vec(blocks * bs * kv_heads * d, rng), vc = random_vec(kc.size(), rng);
  PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  // Two sequences: 0 uses blocks {5, 2, 9}, 1 uses {1, 7, 0, 11}.
  std::vector<int32_t> tables = {5, 2, 9, 1, 7, 0, 11}, offsets = {0, 3, 7};
  std::vector<int32_t> positions = {10, 11, 3, 14, 15}, row_seq = {0, 0, 1, 1, 1};
  AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
  auto q = random_vec(positions.size() * heads * d, rng);
  std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f};
  for (int variant = 0; variant < 4; ++variant) {
    AttentionParams p;
    p.num_heads = heads;
    p.scale = 0.2f;
    if (variant == 1) p.sliding_window = 5;
    if (variant == 2) p.softcap = 3.f;
    if (variant == 3) p.sinks = sinks.data();
    std::vector<float> a(q.size()), b(q.size());
    cpu->attention(q.data(), 5, kv, meta, p, a.data());
    ref->attention(q.data(), 5, kv, meta, p, b.data());
    EXPECT_LT(max_rel(a, b), 1e-5) << "variant " << variant;
  }
}

}  // namespace
}  // namespace tachyon::kernels
