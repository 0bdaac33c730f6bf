// The "cpu-bf16" backend (kernels/cpu/cpu_bf16_backend.h) against the scalar reference run on
// operands rounded to bf16 by hand: each op that multiplies by a weight matrix rounds its input
// activations (and f32 matrices) to bf16, round to nearest even, and nothing else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_bf16_backend.h"
#include "kernels/cpu/tf32_chunk_attention.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }
std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(f32_to_bf16(x));
  return out;
}

class CpuBf16 : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> bf16 = make_backend("cpu-bf16"), cpu = make_backend("cpu"), ref = make_backend("reference");
  std::mt19937 rng{7};
};

TEST_F(CpuBf16, IsNamedAndRoundsToNearestEven) {
  EXPECT_EQ(bf16->name(), "cpu-bf16");
  // 1 + 2^-8 is halfway between the bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  const std::vector<float> x = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, 1.f + 0x1p-8f + 0x1p-20f};
  const std::vector<uint16_t> one = {f32_to_bf16(1.f), f32_to_bf16(1.f)};  // w = [1, 0]: out = x[:, 0]
  const Weight w = bf16->upload_weight(Weight{one.data(), DType::BF16, 2, 1});
  std::vector<float> out(6);
  bf16->matmul(x.data(), 3, w, nullptr, out.data());
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[2], 1.f + 0x1p-6f);
  EXPECT_EQ(out[4], 1.f + 0x1p-7f);  // above the tie: up
}

// matmul = the reference matmul of bf16-rounded x (and bf16-rounded w for f32 weights); with a
// bf16 checkpoint it is bit-identical to "cpu" on pre-rounded inputs, and it differs from
// "cpu" on raw inputs (the rounding happens).
TEST_F(CpuBf16, MatmulIsTheReferenceMatmulOfRoundedOperands) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    for (auto [rows, n, k] : {std::tuple{1, 37, 19}, {7, 101, 130}, {65, 33, 72}}) {
      const auto wf = random_vec(static_cast<size_t>(n * k), rng, 0.5f);
      const auto wb = to_bf16(wf);
      const Weight host = dtype == DType::BF16 ? Weight{wb.data(), DType::BF16, n, k} : Weight{wf.data(), DType::F32, n, k};
      const auto bias = random_vec(static_cast<size_t>(n), rng);  // f32: never rounded
      const Weight bias_w{bias.data(), DType::F32, 1, n};
      const auto x = random_vec(static_cast<size_t>(rows * k), rng);
      const auto xr = round_bf16(x);
      std::vector<float> got(static_cast<size_t>(rows * n)), want(got.size()), raw(got.size());
      const Weight wb16 = bf16->upload_weight(host), bias16 = bf16->upload_weight(bias_w);
      bf16->matmul(x.data(), rows, wb16, &bias16, got.data());
      ref->matmul(xr.data(), rows, Weight{wb.data(), DType::BF16, n, k}, &bias_w, want.data());
      EXPECT_LT(max_rel(got, want), 1e-5) << dtype_name(dtype) << " " << rows << "x" << n << "x" << k;
      const Weight wc = cpu->upload_weight(Weight{wb.data(), DType::BF16, n, k}), biasc = cpu->upload_weight(bias_w);
      std::vector<float> exact(got.size());
      cpu->matmul(xr.data(), rows, wc, &biasc, exact.data());
      EXPECT_EQ(0, std::memcmp(got.data(), exact.data(), got.size() * sizeof(float)));
      cpu->matmul(x.data(), rows, wc, &biasc, raw.data());
      EXPECT_GT(max_rel(raw, got), 1e-4) << "the input was not rounded";
    }
  }
}

// A [1, k] f32 vector used as a matmul weight (Qwen3-Next's shared_expert_gate) is rounded too,
// as CUDA packs it to bf16 on first use.
TEST_F(CpuBf16, OneRowF32MatmulWeightIsRounded) {
  const int64_t rows = 3, k = 40;
  const auto w = random_vec(k, rng), x = random_vec(rows * k, rng);
  const auto wr = round_bf16(w), xr = round_bf16(x);
  const Weight wb = bf16->upload_weight(Weight{w.data(), DType::F32, 1, k});
  std::vector<float> got(rows), want(rows);
  bf16->matmul(x.data(), rows, wb, nullptr, got.data());
  ref->matmul(xr.data(), rows, Weight{wr.data(), DType::F32, 1, k}, nullptr, want.data());
  EXPECT_LT(max_rel(got, want), 1e-6);
}

TEST_F(CpuBf16, HeadMatmulIsTheReferenceOfRoundedInputs) {
  const int64_t rows = 5, heads = 3, n = 10, k = 12;
  const auto wb = to_bf16(random_vec(heads * n * k, rng, 0.5f));
  const Weight host{wb.data(), DType::BF16, heads * n, k};
  // x [rows, heads, 16] of which k columns are read; out [rows, heads, 14].
  const auto x = random_vec(rows * heads * 16, rng);
  std::vector<float> got(rows * heads * 14, -7.f), want(got.size(), -7.f);
  bf16->head_matmul(x.data(), rows, heads, heads * 16, 16, bf16->upload_weight(host), got.data(), heads * 14, 14);
  ref->head_matmul(round_bf16(x).data(), rows, heads, heads * 16, 16, host, want.data(), heads * 14, 14);
  EXPECT_LT(max_rel(got, want), 1e-5);
  EXPECT_EQ(got[10], -7.f);  // columns past n untouched
}

// Both expert matmuls take rounded inputs: x for gate_up, the activation for down (CUDA's
// grouped kernel rounds the f32 activation it reads back). Built here from reference ops.
TEST_F(CpuBf16, MoeExpertsRoundBothExpertMatmulInputs) {
  const int64_t E = 4, H = 24, I = 16, rows = 5, top_k = 2;
  std::vector<std::vector<uint16_t>> host_gu, host_down;
  std::vector<Weight> gu, down, gu_ref, down_ref;
  for (int64_t e = 0; e < E; ++e) {
    host_gu.push_back(to_bf16(random_vec(2 * I * H, rng, 0.3f)));
    host_down.push_back(to_bf16(random_vec(H * I, rng, 0.3f)));
    gu_ref.push_back({host_gu.back().data(), DType::BF16, 2 * I, H});
    down_ref.push_back({host_down.back().data(), DType::BF16, H, I});
    gu.push_back(bf16->upload_weight(gu_ref.back()));
    down.push_back(bf16->upload_weight(down_ref.back()));
  }
  const auto x = random_vec(rows * H, rng);
  const auto route_w = random_vec(rows * top_k, rng);
  std::vector<int32_t> ids(rows * top_k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < top_k; ++j) ids[r * top_k + j] = static_cast<int32_t>((r + 3 * j + 1) % E);
  const MoeExperts experts{gu.data(), down.data(), nullptr, nullptr, E, I, H};
  std::vector<float> got(rows * H);
  bf16->moe_experts(x.data(), rows, ids.data(), route_w.data(), top_k, experts, got.data());

  std::vector<float> want(rows * H, 0.f), gate_up(2 * I), act(I), y(H);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> xr = round_bf16(std::vector<float>(x.begin() + r * H, x.begin() + (r + 1) * H));
    std::vector<int64_t> slots = {0, 1};  // summed in ascending expert id
    if (ids[r * top_k + 1] < ids[r * top_k]) std::swap(slots[0], slots[1]);
    for (int64_t s : slots) {
      const int32_t e = ids[r * top_k + s];
      ref->matmul(xr.data(), 1, gu_ref[e], nullptr, gate_up.data());
      ref->gated_activation(gate_up.data(), 1, I, Activation::SiLU, act.data());
      act = round_bf16(act);
      ref->matmul(act.data(), 1, down_ref[e], nullptr, y.data());
      for (int64_t i = 0; i < H; ++i) want[r * H + i] += y[i] * route_w[r * top_k + s];
    }
  }
  EXPECT_LT(max_rel(got, want), 1e-5);
}

// The default "cpu" backend does not round: its matmul of raw inputs is the reference's.
TEST_F(CpuBf16, CpuBackendKeepsF32Inputs) {
  const int64_t rows = 4, n = 20, k = 33;
  const auto wb = to_bf16(random_vec(n * k, rng, 0.5f));
  const Weight host{wb.data(), DType::BF16, n, k};
  const auto x = random_vec(rows * k, rng);
  std::vector<float> got(rows * n), want(got.size());
  cpu->matmul(x.data(), rows, cpu->upload_weight(host), nullptr, got.data());
  ref->matmul(x.data(), rows, host, nullptr, want.data());
  EXPECT_LT(max_rel(got, want), 1e-5);
}

// tf32 keeps 10 mantissa bits; cvt.rna rounds ties away from zero.
TEST_F(CpuBf16, Tf32RoundsToNearestTiesAway) {
  EXPECT_EQ(cpu::round_to_tf32(1.f + 0x1p-11f), 1.f + 0x1p-10f);
  EXPECT_EQ(cpu::round_to_tf32(-(1.f + 0x1p-11f)), -(1.f + 0x1p-10f));
  EXPECT_EQ(cpu::round_to_tf32(1.f + 0x1p-12f), 1.f);
  EXPECT_EQ(cpu::round_to_tf32(1.f + 3 * 0x1p-12f), 1.f + 0x1p-10f);
  EXPECT_EQ(cpu::round_to_tf32(INFINITY), INFINITY);
}

// Attention is the CUDA kernels' chunked reduction with tf32 operands (or bf16 ones, the
// TACHYON_ATTENTION_BF16 build's): a row that sees one key returns that key's v rounded to the
// operand format (p = 1); longer rows, across 64-key chunks, with GQA, a sliding window, softcap
// and sinks, stay within that format's error of the f32 reference; the two formats differ.
class CpuBf16Attention : public CpuBf16, public ::testing::WithParamInterface<cpu::AttentionOperands> {};

TEST_P(CpuBf16Attention, IsTheChunkedReductionInItsOperandFormat) {
  const cpu::AttentionOperands format = GetParam(), other = format == cpu::AttentionOperands::kTf32
                                                                 ? cpu::AttentionOperands::kBf16
                                                                 : cpu::AttentionOperands::kTf32;
  CpuBf16Backend oracle(format), other_oracle(other);
  // Measured 3.6e-4 (tf32) and 2.8e-3 (bf16): 2^-11 vs 2^-8 per operand.
  const double bound = format == cpu::AttentionOperands::kTf32 ? 5e-3 : 1e-2;
  const int64_t heads = 4, kv_heads = 2, d = 24, bs = 16, blocks = 12, width = kv_heads * d;
  auto kc = random_vec(static_cast<size_t>(blocks * bs * width), rng);
  auto vc = random_vec(kc.size(), rng);
  for (float& v : vc) v += 0x1p-13f;  // off the tf32 grid
  std::vector<int32_t> table(blocks);
  for (int32_t b = 0; b < blocks; ++b) table[b] = (b * 5 + 3) % blocks;
  const std::vector<int32_t> offsets = {0, static_cast<int32_t>(blocks)};
  std::vector<int32_t> positions = {0, 63, 64, 150, 191}, row_seq(positions.size(), 0);
  const int64_t rows = static_cast<int64_t>(positions.size());
  const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng);
  const PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  const AttentionMeta meta{positions.data(), row_seq.data(), table.data(), offsets.data()};
  const std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f};
  for (int variant = 0; variant < 4; ++variant) {
    AttentionParams p;
    p.num_heads = heads;
    p.scale = 1.f / std::sqrt(float(d));
    if (variant == 1) p.sliding_window = 70;
    if (variant == 2) p.softcap = 3.f;
    if (variant == 3) p.sinks = sinks.data();
    std::vector<float> got(q.size()), want(q.size()), f32(q.size());
    std::vector<float> in_other(q.size());
    oracle.attention(q.data(), rows, kv, meta, p, got.data());
    other_oracle.attention(q.data(), rows, kv, meta, p, in_other.data());
    ref->attention(q.data(), rows, kv, meta, p, want.data());
    cpu->attention(q.data(), rows, kv, meta, p, f32.data());
    EXPECT_LT(max_rel(got, want), bound) << "variant " << variant;
    EXPECT_GT(max_rel(got, f32), 1e-6) << "variant " << variant << ": no rounding happened";
    EXPECT_GT(max_rel(got, in_other), 1e-6) << "variant " << variant << ": the formats round alike";
    if (variant == 3) continue;  // a sink takes part of the weight of the only key
    const float* v0 = vc.data() + static_cast<int64_t>(table[0]) * bs * width;  // position 0's slot
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d; ++i)
        EXPECT_EQ(got[h * d + i], cpu::round_attention_operand(v0[(h / 2) * d + i], format))
            << "head " << h << " dim " << i;
  }
}
INSTANTIATE_TEST_SUITE_P(Formats, CpuBf16Attention,
                         ::testing::Values(cpu::AttentionOperands::kTf32, cpu::AttentionOperands::kBf16));

// bf16 operands round to nearest, ties to even, like every other bf16 rounding of the backend.
TEST_F(CpuBf16, Bf16AttentionOperandsRoundToNearestEven) {
  EXPECT_EQ(cpu::round_attention_operand(1.f + 0x1p-8f, cpu::AttentionOperands::kBf16), 1.f);
  EXPECT_EQ(cpu::round_attention_operand(1.f + 3 * 0x1p-8f, cpu::AttentionOperands::kBf16), 1.f + 0x1p-6f);
  EXPECT_EQ(cpu::round_attention_operand(-(1.f + 0x1p-7f + 0x1p-9f), cpu::AttentionOperands::kBf16),
            -(1.f + 0x1p-7f));
  EXPECT_EQ(cpu::round_attention_operand(1.f + 0x1p-11f, cpu::AttentionOperands::kTf32), 1.f + 0x1p-10f);
}

}  // namespace
}  // namespace tachyon::kernels
