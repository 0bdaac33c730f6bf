// KV storage formats (kernels/kv_format.h, kv_quant.h): the byte layout, each codec's accuracy,
// and the attention kernels reading them in place. For every format the CPU kernels (each ISA)
// and the reference give exactly the bits of attention over an f32 cache holding the
// scalar-dequantized values (turbo: with the queries rotated), for prefill rows, decode rows,
// tree rows, sliding windows, sinks and softcap; rows keep their bits in any batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/kv_quant.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

constexpr KvFormat kAllFormats[] = {KvFormat::F32,  KvFormat::BF16, KvFormat::F16,  KvFormat::FP8,
                                    KvFormat::Int8, KvFormat::Int4, KvFormat::Turbo};

std::string format_name(const ::testing::TestParamInfo<KvFormat>& info) {
  return std::string(kv_format_name(info.param));
}

// Key/value-like data: per-dimension offsets (affine codecs must not assume zero-centred
// groups) and one outlier dimension.
std::vector<float> kv_like(size_t vectors, int64_t d, std::mt19937& rng) {
  std::vector<float> x = random_vec(vectors * static_cast<size_t>(d), rng);
  for (size_t v = 0; v < vectors; ++v)
    for (int64_t i = 0; i < d; ++i) x[v * d + i] = x[v * d + i] * (0.5f + 0.01f * static_cast<float>(i % 50)) + 0.3f * std::sin(static_cast<float>(i));
  for (size_t v = 0; v < vectors; ++v) x[v * d + 3 % d] *= 6.f;
  return x;
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), s += double(b[i]) * b[i];
  return std::sqrt(e / s);
}

TEST(KvFormat, NamesRoundTrip) {
  for (KvFormat f : kAllFormats) EXPECT_EQ(kv_format_from_name(kv_format_name(f)), f);
  EXPECT_FALSE(kv_format_from_name("auto").has_value());
  EXPECT_FALSE(kv_format_from_name("q4").has_value());
}

// The byte counts the pool is sized by (0.6B shape: 8 heads of 128, blocks of 16).
TEST(KvFormat, BytesPerTokenAndHead) {
  auto per_token_head = [](KvCodec c) {
    const KvTensorLayout l = kv_tensor_layout(c, 16, 8, 128);
    return static_cast<double>(l.block_bytes) / (16 * 8);
  };
  EXPECT_EQ(per_token_head(KvCodec::F32), 512);
  EXPECT_EQ(per_token_head(KvCodec::BF16), 256);
  EXPECT_EQ(per_token_head(KvCodec::F16), 256);
  EXPECT_EQ(per_token_head(KvCodec::FP8), 132);       // codes + f32 scale
  EXPECT_EQ(per_token_head(KvCodec::U8Affine), 144);  // codes + 2 groups × (f32 scale, f32 min)
  EXPECT_EQ(per_token_head(KvCodec::U4Affine), 80);   // 64 code bytes + 4 groups × (f16, f16)
  EXPECT_EQ(per_token_head(KvCodec::TurboK8), 132);   // codes + f32 norm factor
  EXPECT_EQ(per_token_head(KvCodec::LloydMaxV4), 80); // 64 code bytes + 4 groups × (f16 mean, f16 std)
  // Records never overlap and stay inside the block; param records follow the code region.
  for (KvCodec c : {KvCodec::FP8, KvCodec::U8Affine, KvCodec::U4Affine, KvCodec::TurboK8, KvCodec::LloydMaxV4})
    for (int64_t d : {64, 72, 128, 576}) {
      const KvTensorLayout l = kv_tensor_layout(c, 16, 3, d);
      EXPECT_GE(l.params_offset, 16 * 3 * l.code_bytes);
      EXPECT_EQ(l.params_offset % 16, 0);
      EXPECT_LE(l.param_offset(15, 2) + l.param_bytes, l.block_bytes);
      EXPECT_EQ(l.code_offset(16, 0), l.block_bytes);
      EXPECT_EQ(l.block_bytes % 16, 0);
    }
}

TEST(KvFormat, UnsupportedHeadDimensionsAreNamed) {
  EXPECT_EQ(kv_format_unsupported(KvFormat::Turbo, 128), nullptr);
  EXPECT_NE(kv_format_unsupported(KvFormat::Turbo, 96), nullptr);
  EXPECT_NE(kv_format_unsupported(KvFormat::Int4, 7), nullptr);
  EXPECT_EQ(kv_format_unsupported(KvFormat::Int8, 72), nullptr);
  EXPECT_EQ(kv_storage_format(KvFormat::Int4, true), KvFormat::BF16);  // MLA latents
  EXPECT_EQ(kv_storage_format(KvFormat::F32, true), KvFormat::F32);
}

// The rotation is orthonormal: dot products (what the scores are) are kept.
TEST(KvFormat, TurboRotationKeepsDotProducts) {
  std::mt19937 rng(1);
  for (int64_t d : {64, 128, 256}) {
    auto a = random_vec(static_cast<size_t>(d), rng), b = random_vec(static_cast<size_t>(d), rng);
    std::vector<float> ra(a.size()), rb(b.size());
    turbo_rotate(a.data(), d, ra.data());
    turbo_rotate(b.data(), d, rb.data());
    double dot = 0, rdot = 0, na = 0;
    for (int64_t i = 0; i < d; ++i) dot += double(a[i]) * b[i], rdot += double(ra[i]) * rb[i], na += double(a[i]) * a[i];
    EXPECT_NEAR(rdot, dot, 1e-5 * d) << d;
    // The signs make it more than a plain Hadamard transform: e_0 is not mapped to the flat vector.
    int negative = 0;
    for (int64_t i = 0; i < d; ++i) negative += turbo_sign_negative(i);
    EXPECT_GT(negative, d / 4);
    EXPECT_LT(negative, 3 * d / 4);
  }
}

struct CodecCase {
  KvCodec codec;
  double max_rms;  // relative RMS error on kv_like data (measured: bf16 0.0017, f16 0.0002, fp8 0.025,
                   // int8 0.006, int4 0.085, turbo K 0.0066, Lloyd–Max V 0.133: the outlier dimension
                   // widens its group's std)
};

// On Gaussian groups the 4-bit Lloyd–Max code is the optimal scalar quantizer: its relative
// RMS error is √0.009497 ≈ 0.0975 of the group's std.
TEST(KvFormat, LloydMaxIsNearOptimalOnGaussianData) {
  std::mt19937 rng(4);
  const int64_t d = 128;
  const auto x = random_vec(static_cast<size_t>(256 * d), rng);
  std::vector<uint8_t> codes(static_cast<size_t>(kv_code_bytes(KvCodec::LloydMaxV4, d)));
  std::vector<uint8_t> params(static_cast<size_t>(kv_param_bytes(KvCodec::LloydMaxV4, d)));
  std::vector<float> got(x.size());
  for (size_t v = 0; v < 256; ++v) {
    kv_quantize(KvCodec::LloydMaxV4, x.data() + v * d, d, codes.data(), params.data());
    kv_dequantize(KvCodec::LloydMaxV4, codes.data(), params.data(), d, got.data() + v * d);
  }
  EXPECT_NEAR(rms_error(got, x), 0.0975, 0.006);
}

TEST(KvFormat, CodecsReconstructWithinTheirResolution) {
  std::mt19937 rng(2);
  const int64_t d = 128;
  const size_t n = 64;
  const auto x = kv_like(n, d, rng);
  for (const CodecCase c : {CodecCase{KvCodec::F32, 0.0}, CodecCase{KvCodec::BF16, 3e-3}, CodecCase{KvCodec::F16, 4e-4},
                            CodecCase{KvCodec::FP8, 0.04}, CodecCase{KvCodec::U8Affine, 0.01},
                            CodecCase{KvCodec::U4Affine, 0.12}, CodecCase{KvCodec::TurboK8, 0.01},
                            CodecCase{KvCodec::LloydMaxV4, 0.15}}) {
    std::vector<uint8_t> codes(static_cast<size_t>(kv_code_bytes(c.codec, d))), params(static_cast<size_t>(kv_param_bytes(c.codec, d)) + 1);
    std::vector<float> got(x.size()), want(x.size());
    for (size_t v = 0; v < n; ++v) {
      const float* xv = x.data() + v * d;
      kv_quantize(c.codec, xv, d, codes.data(), params.data());
      kv_dequantize(c.codec, codes.data(), params.data(), d, got.data() + v * d);
      if (c.codec == KvCodec::TurboK8) {
        turbo_rotate(xv, d, want.data() + v * d);  // keys are read back in the rotated space
        double norm_x = 0, norm_got = 0;
        for (int64_t i = 0; i < d; ++i) norm_x += double(xv[i]) * xv[i], norm_got += double(got[v * d + i]) * got[v * d + i];
        EXPECT_NEAR(std::sqrt(norm_got), std::sqrt(norm_x), 1e-5 * std::sqrt(norm_x)) << "the L2 norm is kept";
      } else {
        std::copy(xv, xv + d, want.data() + v * d);
      }
    }
    const double err = rms_error(got, want);
    EXPECT_LE(err, c.max_rms) << "codec " << static_cast<int>(c.codec);
    if (c.codec != KvCodec::F32) {
      EXPECT_GT(err, 0.0) << "a lossy codec that loses nothing is not quantizing";
    }
  }
}

TEST(KvFormat, ZeroAndConstantVectorsAreExact) {
  const int64_t d = 64;
  for (KvCodec c : {KvCodec::FP8, KvCodec::U8Affine, KvCodec::U4Affine, KvCodec::TurboK8, KvCodec::LloydMaxV4}) {
    std::vector<uint8_t> codes(static_cast<size_t>(kv_code_bytes(c, d))), params(static_cast<size_t>(kv_param_bytes(c, d)));
    std::vector<float> zero(d, 0.f), out(d, 1.f);
    kv_quantize(c, zero.data(), d, codes.data(), params.data());
    kv_dequantize(c, codes.data(), params.data(), d, out.data());
    for (float v : out) EXPECT_EQ(v, 0.f) << static_cast<int>(c);
    if (c == KvCodec::TurboK8 || c == KvCodec::FP8) continue;
    std::vector<float> flat(d, 0.375f);
    kv_quantize(c, flat.data(), d, codes.data(), params.data());
    kv_dequantize(c, codes.data(), params.data(), d, out.data());
    for (float v : out) EXPECT_EQ(v, 0.375f) << static_cast<int>(c);
  }
}

// ---- Attention over stored formats -------------------------------------------------------

struct Cache {
  std::vector<uint8_t> k, v;        // the stored format
  std::vector<float> kf, vf;        // the same cache dequantized by the scalar definition (f32)
  PagedKv stored, dequantized;
};

// A cache of `blocks` blocks whose every slot was written by `backend`'s write_kv.
Cache make_cache(Backend& backend, KvFormat f, int64_t kv_heads, int64_t d, int32_t bs, int32_t blocks, std::mt19937& rng) {
  Cache c;
  c.stored = PagedKv{nullptr, nullptr, bs, kv_heads, d, f};
  const KvTensorLayout kl = c.stored.k_layout(), vl = c.stored.v_layout();
  c.k.assign(static_cast<size_t>(blocks * kl.block_bytes), 0xAB);  // padding and unused bytes: garbage
  c.v.assign(static_cast<size_t>(blocks * vl.block_bytes), 0xCD);
  c.stored.k = c.k.data();
  c.stored.v = c.v.data();
  const int32_t slots = bs * blocks;
  const auto k = kv_like(static_cast<size_t>(slots * kv_heads), d, rng), v = kv_like(static_cast<size_t>(slots * kv_heads), d, rng);
  std::vector<int32_t> positions(static_cast<size_t>(slots)), row_seq(positions.size(), 0), table(static_cast<size_t>(blocks));
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> offsets = {0, blocks};
  const AttentionMeta meta{positions.data(), row_seq.data(), table.data(), offsets.data()};
  backend.write_kv(k.data(), v.data(), slots, c.stored, meta);
  c.kf.resize(static_cast<size_t>(slots * kv_heads * d));
  c.vf.resize(c.kf.size());
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t h = 0; h < kv_heads; ++h) {
      kv_dequantize(kl.codec, c.k.data() + kl.code_offset(s, h), c.k.data() + kl.param_offset(s, h), d,
                    c.kf.data() + (s * kv_heads + h) * d);
      kv_dequantize(vl.codec, c.v.data() + vl.code_offset(s, h), c.v.data() + vl.param_offset(s, h), d,
                    c.vf.data() + (s * kv_heads + h) * d);
    }
  c.dequantized = PagedKv{c.kf.data(), c.vf.data(), bs, kv_heads, d, KvFormat::F32};
  return c;
}

// q as the dequantized keys see it: rotated per head for turbo.
std::vector<float> queries_for_dequantized(const std::vector<float>& q, int64_t d, KvFormat f) {
  if (!kv_format_rotates_keys(f)) return q;
  std::vector<float> r(q.size());
  for (size_t h = 0; h < q.size() / static_cast<size_t>(d); ++h) turbo_rotate(q.data() + h * d, d, r.data() + h * d);
  return r;
}

class KvAttention : public ::testing::TestWithParam<KvFormat> {};

// The backends' attention over a stored format is attention over the dequantized cache.
TEST_P(KvAttention, BackendsReadStoredFormatsExactly) {
  const KvFormat f = GetParam();
  std::mt19937 rng(7);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  for (int64_t d : {64, 72, 128}) {
    if (kv_format_unsupported(f, d)) continue;
    const int64_t kv_heads = 2, heads = 6;
    const int32_t bs = 4, blocks = 12;
    Cache c = make_cache(*cpu, f, kv_heads, d, bs, blocks, rng);
    // Two sequences over a scattered table; prefill-like runs and single decode rows.
    std::vector<int32_t> tables = {5, 2, 9, 1, 7, 0, 11, 3}, offsets = {0, 3, 8};
    std::vector<int32_t> positions = {0, 1, 2, 10, 11, 3, 14, 19}, row_seq = {0, 0, 0, 0, 0, 1, 1, 1};
    const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
    const auto q = random_vec(positions.size() * heads * d, rng, 0.5f);
    const auto qd = queries_for_dequantized(q, d, f);
    std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f, 1.f, -0.5f};
    for (int variant = 0; variant < 4; ++variant) {
      AttentionParams p;
      p.num_heads = heads;
      p.scale = 1.f / std::sqrt(static_cast<float>(d));
      if (variant == 1) p.sliding_window = 5;
      if (variant == 2) p.softcap = 3.f;
      if (variant == 3) p.sinks = sinks.data();
      for (Backend* be : {cpu.get(), ref.get()}) {
        std::vector<float> a(q.size()), b(q.size());
        be->attention(q.data(), static_cast<int64_t>(positions.size()), c.stored, meta, p, a.data());
        be->attention(qd.data(), static_cast<int64_t>(positions.size()), c.dequantized, meta, p, b.data());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << be->name() << " d " << d << " variant " << variant;
      }
      std::vector<float> a(q.size()), b(q.size());
      cpu->attention(q.data(), static_cast<int64_t>(positions.size()), c.stored, meta, p, a.data());
      ref->attention(q.data(), static_cast<int64_t>(positions.size()), c.stored, meta, p, b.data());
      EXPECT_LT(max_rel(a, b), 2e-5) << "cpu vs reference, d " << d << " variant " << variant;
    }
  }
}

// Every ISA's attend_items on the stored format gives the portable kernel's bits on the
// dequantized cache, for decode, window and tree rows, odd and even groups.
TEST_P(KvAttention, EveryIsaIsBitIdentical) {
#if defined(__x86_64__)
  const KvFormat f = GetParam();
  std::mt19937 rng(8);
  auto cpu = make_backend("cpu");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  for (int64_t d : {64, 72, 128}) {
    if (kv_format_unsupported(f, d)) continue;
    const int64_t kv_heads = 2;
    const int32_t bs = 4, blocks = 12;
    Cache c = make_cache(*cpu, f, kv_heads, d, bs, blocks, rng);
    std::vector<int32_t> table = {4, 9, 0, 2, 11, 7, 1, 3, 8, 10, 5, 6};
    std::vector<int32_t> path = {0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t g : {1, 2, 3}) {
      const auto q = random_vec(static_cast<size_t>(g * d), rng, 0.5f);
      const auto qd = queries_for_dequantized(q, d, f);
      const auto sinks = random_vec(static_cast<size_t>(g), rng);
      for (int32_t pos : {0, 5, 17, 40, 47})
        for (int variant = 0; variant < 4; ++variant) {
          std::vector<float> want(static_cast<size_t>(g * d)), got(want.size());
          cpu::AttentionItem it{qd.data(), &c.dequantized, table.data(), 1, g, variant == 1 ? pos / 2 : 0, pos,
                                0.2f, variant == 2 ? 4.f : 0.f, variant == 3 ? sinks.data() : nullptr, want.data()};
          if (variant == 0 && pos >= 40) {  // a tree row: positions >= 38 read through its path
            it.tree_base = 38;
            it.tree_path = path.data();
          }
          cpu::attend_items_portable(&it, 1);
          it.q = q.data();
          it.kv = &c.stored;
          it.out = got.data();
          const char* names[] = {"portable", "avx2", "avx512"};
          for (int isa = 0; isa < 3; ++isa) {
            if ((isa == 1 && !avx2) || (isa == 2 && !avx512)) continue;
            std::fill(got.begin(), got.end(), -1.f);
            if (isa == 0) cpu::attend_items_portable(&it, 1);
            else if (isa == 1) cpu::attend_items_avx2(&it, 1);
            else cpu::attend_items_avx512(&it, 1);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                << names[isa] << " d " << d << " group " << g << " pos " << pos << " variant " << variant;
          }
        }
    }
  }
#else
  GTEST_SKIP() << "not x86-64";
#endif
}

// A row's output does not depend on the rows batched with it.
TEST_P(KvAttention, RowsKeepTheirBitsInAnyBatch) {
  const KvFormat f = GetParam();
  std::mt19937 rng(9);
  auto cpu = make_backend("cpu");
  const int64_t d = 128, kv_heads = 2, heads = 4;
  Cache c = make_cache(*cpu, f, kv_heads, d, 4, 12, rng);
  std::vector<int32_t> tables = {5, 2, 9, 1, 7, 0, 11, 3}, offsets = {0, 3, 8};
  std::vector<int32_t> positions = {4, 11, 3, 19, 18}, row_seq = {0, 0, 1, 1, 1};
  const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
  const auto q = random_vec(positions.size() * heads * d, rng);
  AttentionParams p;
  p.num_heads = heads;
  p.scale = 0.1f;
  std::vector<float> all(q.size());
  cpu->attention(q.data(), static_cast<int64_t>(positions.size()), c.stored, meta, p, all.data());
  for (size_t r = 0; r < positions.size(); ++r) {
    const AttentionMeta one{positions.data() + r, row_seq.data() + r, tables.data(), offsets.data()};
    std::vector<float> alone(static_cast<size_t>(heads * d));
    cpu->attention(q.data() + r * heads * d, 1, c.stored, one, p, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + r * heads * d, alone.size() * sizeof(float))) << "row " << r;
  }
}

// write_kv of the CPU backend stores the scalar definition's bytes, and the reference
// backend's write_kv the same.
TEST_P(KvAttention, WriteKvStoresTheScalarEncoding) {
  const KvFormat f = GetParam();
  std::mt19937 rng(10), rng2(10);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  Cache a = make_cache(*cpu, f, 2, 64, 4, 3, rng), b = make_cache(*ref, f, 2, 64, 4, 3, rng2);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.v, b.v);
  const KvTensorLayout kl = a.stored.k_layout();
  std::mt19937 rng3(10);
  const auto k = kv_like(static_cast<size_t>(12 * 2), 64, rng3);
  std::vector<uint8_t> codes(static_cast<size_t>(kl.code_bytes)), params(static_cast<size_t>(kl.param_bytes) + 1);
  kv_quantize(kl.codec, k.data() + 5 * 64, 64, codes.data(), params.data());  // slot 2, head 1
  EXPECT_EQ(0, std::memcmp(codes.data(), a.k.data() + kl.code_offset(2, 1), codes.size()));
  if (kl.param_bytes) {
    EXPECT_EQ(0, std::memcmp(params.data(), a.k.data() + kl.param_offset(2, 1), static_cast<size_t>(kl.param_bytes)));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvAttention, ::testing::ValuesIn(kAllFormats), format_name);

}  // namespace
}  // namespace tachyon::kernels
