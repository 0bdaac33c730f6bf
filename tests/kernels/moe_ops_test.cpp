// The MoE, per-head matmul, gating and linear-attention ops of the CPU backend against the
// scalar reference, hand-checked routing semantics, and the batch-invariance / chunking
// properties of DESIGN.md "Exactness".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

// Host weights of one dtype, and the same weights uploaded to the CPU and reference backends.
struct Weights {
  std::vector<std::vector<uint16_t>> half;
  std::vector<std::vector<float>> full;
  std::vector<Weight> cpu, ref;
  void add(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng, Backend& c, Backend& r, float sd = 0.3f) {
    full.push_back(random_vec(static_cast<size_t>(rows * cols), rng, sd));
    Weight host{full.back().data(), DType::F32, rows, cols};
    if (dtype != DType::F32) {
      half.emplace_back();
      for (float x : full.back()) half.back().push_back(dtype == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x));
      host = {half.back().data(), dtype, rows, cols};
    }
    cpu.push_back(c.upload_weight(host));
    ref.push_back(r.upload_weight(host));
  }
};

class MoeOps : public ::testing::TestWithParam<DType> {
 protected:
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  std::mt19937 rng{11};
};

TEST(MoeRoute, SoftmaxTopKRenormalises) {
  auto be = make_backend("cpu");
  std::vector<float> logits = {0.1f, 2.0f, -1.f, 1.5f};
  MoeRoutingParams p{MoeRouting::SoftmaxTopK, 4, 2, true};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  be->moe_route(logits.data(), 1, p, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(w[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.5)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  p.norm_topk_prob = false;  // plain softmax probabilities
  be->moe_route(logits.data(), 1, p, ids.data(), w.data());
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  EXPECT_NEAR(w[1], std::exp(1.5) / z, 1e-6);
}

TEST(MoeRoute, TopKSoftmaxIsASoftmaxOverThePicked) {
  auto be = make_backend("reference");
  std::vector<float> logits = {3.f, -2.f, 0.5f, 2.f, 1.f};
  MoeRoutingParams p{MoeRouting::TopKSoftmax, 5, 3};
  std::vector<int32_t> ids(3);
  std::vector<float> w(3);
  be->moe_route(logits.data(), 1, p, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 3, 4}));
  const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / z, 1e-6);
}

TEST(MoeRoute, GroupLimitedRoutingDropsExpertsOfLosingGroups) {
  // 8 experts in 4 groups of 2; keep 2 groups, pick 2 experts. Expert 6 has the single best
  // score, but its group (3) loses on the sum of its top-2; the bias steers the choice but
  // the weights are the unbiased sigmoid scores.
  auto be = make_backend("cpu");
  auto logit = [](double s) { return static_cast<float>(std::log(s / (1 - s))); };  // sigmoid⁻¹
  std::vector<float> s = {0.60f, 0.55f, 0.50f, 0.52f, 0.40f, 0.30f, 0.90f, 0.05f};
  std::vector<float> logits;
  for (float x : s) logits.push_back(logit(x));
  std::vector<float> bias = {0.f, 0.f, 0.f, 0.2f, 0.f, 0.f, 0.f, 0.f};
  MoeRoutingParams p{MoeRouting::SigmoidGroupTopK, 8, 2, true, 4, 2, 2.5f, bias.data()};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  be->moe_route(logits.data(), 1, p, ids.data(), w.data());
  // group sums (biased): g0 1.15, g1 1.22, g2 0.70, g3 0.95 -> keep g1, g0; best: 3 (0.72), 0 (0.60)
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 0}));
  EXPECT_NEAR(w[0], 2.5 * 0.52 / (0.52 + 0.60), 1e-5);
  EXPECT_NEAR(w[1], 2.5 * 0.60 / (0.52 + 0.60), 1e-5);
}

// router_logits reads the stored values in f32 on the CPU backend, also in the int8-activation
// mode (which would otherwise int8-pack the weight and quantize x); "cpu-bf16" computes it as the
// CUDA backend does, as one more bf16 matmul.
TEST(MoeRoute, RouterLogitsStayF32OnTheCpuAndFollowCudaOnCpuBf16) {
  std::mt19937 rng(9);
  auto ref = make_backend("reference");
  const int64_t rows = 9, E = 24, H = 256;
  const auto w = random_vec(static_cast<size_t>(E * H), rng, 0.05f);
  const auto bias = random_vec(static_cast<size_t>(E), rng, 0.1f);
  const auto x = random_vec(static_cast<size_t>(rows * H), rng);
  const Weight host_w{w.data(), DType::F32, E, H}, host_b{bias.data(), DType::F32, 1, E};
  std::vector<float> expect(static_cast<size_t>(rows * E));
  ref->router_logits(x.data(), rows, ref->upload_router_weight(host_w), &host_b, expect.data());

  auto cpu = make_backend("cpu");
  cpu->set_int8_activations(true);
  const Weight rw = cpu->upload_router_weight(host_w), b = cpu->upload_weight(host_b);
  EXPECT_NE(rw.layout, WeightLayout::Panel64Dot);
  std::vector<float> out(expect.size(), NAN);
  cpu->router_logits(x.data(), rows, rw, &b, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expect[i], 1e-5 * (1 + std::abs(expect[i])));

  auto bf16 = make_backend("cpu-bf16");
  const Weight bw = bf16->upload_router_weight(host_w), bb = bf16->upload_weight(host_b);
  std::vector<float> routed(expect.size()), matmul(expect.size());
  bf16->router_logits(x.data(), rows, bw, &bb, routed.data());
  bf16->matmul(x.data(), rows, bf16->upload_weight(host_w), &bb, matmul.data());
  EXPECT_EQ(routed, matmul);
  EXPECT_NE(routed, out);
}

TEST(MoeRoute, CpuMatchesReferenceForEveryKind) {
  std::mt19937 rng(5);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  const int64_t rows = 37, E = 16;
  auto logits = random_vec(rows * E, rng);
  auto bias = random_vec(E, rng, 0.05f);
  for (auto kind : {MoeRouting::SoftmaxTopK, MoeRouting::TopKSoftmax, MoeRouting::SigmoidGroupTopK}) {
    MoeRoutingParams p{kind, E, 4, true, 4, 2, 2.5f, bias.data()};
    std::vector<int32_t> ia(rows * 4), ib(ia.size());
    std::vector<float> wa(ia.size()), wb(ia.size());
    cpu->moe_route(logits.data(), rows, p, ia.data(), wa.data());
    ref->moe_route(logits.data(), rows, p, ib.data(), wb.data());
    EXPECT_EQ(ia, ib);
    EXPECT_EQ(wa, wb);
  }
}

TEST_P(MoeOps, GroupedExpertsMatchReference) {
  const int64_t E = 6, H = 40, I = 24;
  for (bool gpt_oss : {false, true}) {
    Weights gate_up, down, gate_up_bias, down_bias;
    for (int64_t e = 0; e < E; ++e) {
      gate_up.add(GetParam(), 2 * I, H, rng, *cpu, *ref, gpt_oss ? 2.f : 0.3f);  // large: the clamp bites
      down.add(GetParam(), H, I, rng, *cpu, *ref);
      gate_up_bias.add(GetParam(), 1, 2 * I, rng, *cpu, *ref);
      down_bias.add(GetParam(), 1, H, rng, *cpu, *ref);
    }
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 2}, {5, 3}, {13, 2}}) {
      auto x = random_vec(rows * H, rng);
      std::vector<int32_t> ids(rows * k);
      std::vector<float> w = random_vec(rows * k, rng);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j) ids[r * k + j] = static_cast<int32_t>((r * 5 + j * 2 + 1) % E);
      MoeExperts ce{gate_up.cpu.data(), down.cpu.data(), nullptr, nullptr, E, I, H, gpt_oss, 7.f, 1.702f};
      MoeExperts re{gate_up.ref.data(), down.ref.data(), nullptr, nullptr, E, I, H, gpt_oss, 7.f, 1.702f};
      if (gpt_oss) {
        ce.gate_up_bias = gate_up_bias.cpu.data(), ce.down_bias = down_bias.cpu.data();
        re.gate_up_bias = gate_up_bias.ref.data(), re.down_bias = down_bias.ref.data();
      }
      std::vector<float> a(rows * H), b(rows * H);
      cpu->moe_experts(x.data(), rows, ids.data(), w.data(), k, ce, a.data());
      ref->moe_experts(x.data(), rows, ids.data(), w.data(), k, re, b.data());
      EXPECT_LT(max_rel(a, b), 1e-5) << "rows " << rows << " gpt_oss " << gpt_oss;
      // Batch invariance: each row alone gives the same bits as in the batch.
      for (int64_t r = 0; r < rows; r += 4) {
        std::vector<float> alone(H);
        cpu->moe_experts(x.data() + r * H, 1, ids.data() + r * k, w.data() + r * k, k, ce, alone.data());
        EXPECT_EQ(0, std::memcmp(alone.data(), a.data() + r * H, H * sizeof(float))) << "row " << r;
      }
    }
  }
}

TEST_P(MoeOps, HeadMatmulMatchesReference) {
  const int64_t rows = 6, heads = 3, n = 10, k = 12;
  Weights w;
  w.add(GetParam(), heads * n, k, rng, *cpu, *ref);
  // x: [rows, heads, 16] of which the first k columns are read; out: [rows, heads, 14].
  auto x = random_vec(rows * heads * 16, rng);
  std::vector<float> a(rows * heads * 14, -7.f), b(a.size(), -7.f);
  cpu->head_matmul(x.data(), rows, heads, heads * 16, 16, w.cpu[0], a.data(), heads * 14, 14);
  ref->head_matmul(x.data(), rows, heads, heads * 16, 16, w.ref[0], b.data(), heads * 14, 14);
  EXPECT_LT(max_rel(a, b), 1e-5);
  EXPECT_EQ(a[10], -7.f);  // columns past n untouched
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MoeOps, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GateOps, GateMultiplyAndCopyStridedMatchReference) {
  std::mt19937 rng(9);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  auto x = random_vec(6 * 20, rng), gate = random_vec(6 * 8, rng);
  for (auto fn : {GateFn::Sigmoid, GateFn::SiLU}) {
    auto a = x, b = x;
    cpu->gate_multiply(a.data(), 6, 20, gate.data(), 8, 5, fn);  // 4 gates per row, 5 elements each
    ref->gate_multiply(b.data(), 6, 20, gate.data(), 8, 5, fn);
    EXPECT_EQ(a, b);
    const float g = gate[8 + 2];
    const float f = fn == GateFn::Sigmoid ? 1.f / (1.f + std::exp(-g)) : g / (1.f + std::exp(-g));
    EXPECT_NEAR(a[20 + 12], x[20 + 12] * f, 1e-6);
  }
  std::vector<float> a(6 * 9, 0.f), b(a.size(), 0.f);
  cpu->copy_strided(x.data() + 3, 20, 6, 7, a.data() + 1, 9);
  ref->copy_strided(x.data() + 3, 20, 6, 7, b.data() + 1, 9);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[9 + 1], x[20 + 3]);
}

// Two sequences (rows 0-6 and 7-9) through conv1d + delta rule, with snapshot slots.
struct LinearAttentionCase {
  static constexpr int64_t Hk = 2, Hv = 4, dk = 8, dv = 6, K = 4;
  static constexpr int64_t C = 2 * Hk * dk + Hv * dv, slots = 6;
  static constexpr int64_t conv_floats = (K - 1) * C, state_floats = Hv * dk * dv;
  std::vector<float> x, ba, A_log, dt_bias, conv_w;
  std::vector<int32_t> row_begin = {0, 7, 10}, seq_slot = {4, 5}, snapshot = {-1, -1, -1, 0, -1, -1, 1, -1, 2, -1};
  explicit LinearAttentionCase(std::mt19937& rng)
      : x(random_vec(10 * C, rng)), ba(random_vec(10 * 2 * Hv, rng)), A_log(random_vec(Hv, rng, 0.5f)),
        dt_bias(random_vec(Hv, rng, 0.5f)), conv_w(random_vec(C * K, rng, 0.5f)) {}
  RecurrentMeta meta(int64_t first_seq, int64_t num_seqs) const {
    return {num_seqs, row_begin.data() + first_seq, seq_slot.data() + first_seq, snapshot.data()};
  }
  DeltaRuleParams params() const { return {Hk, Hv, dk, dv, A_log.data(), dt_bias.data()}; }
};

void run_linear_attention(Backend& be, const LinearAttentionCase& c, const Weight& w, std::vector<float>& conv_state,
                          std::vector<float>& rec_state, std::vector<float>& conv_out, std::vector<float>& out) {
  using L = LinearAttentionCase;
  conv_out.assign(10 * L::C, 0.f);
  out.assign(10 * L::Hv * L::dv, 0.f);
  be.causal_conv1d_silu(c.x.data(), 10, L::C, w, c.meta(0, 2), conv_state.data(), L::conv_floats, conv_out.data());
  be.gated_delta_rule(conv_out.data(), L::C, c.ba.data(), 10, c.params(), c.meta(0, 2), rec_state.data(),
                      L::state_floats, out.data());
}

TEST(LinearAttention, ConvAndDeltaRuleMatchReferenceIncludingSnapshots) {
  using L = LinearAttentionCase;
  std::mt19937 rng(21);
  auto cpu = make_backend("cpu"), ref = make_backend("reference");
  LinearAttentionCase c(rng);
  const Weight host{c.conv_w.data(), DType::F32, L::C, L::K};
  auto conv0 = random_vec(L::slots * L::conv_floats, rng), rec0 = random_vec(L::slots * L::state_floats, rng, 0.1f);
  auto conv_a = conv0, conv_b = conv0, rec_a = rec0, rec_b = rec0;
  std::vector<float> ca, cb, oa, ob;
  run_linear_attention(*cpu, c, cpu->upload_weight(host), conv_a, rec_a, ca, oa);
  run_linear_attention(*ref, c, ref->upload_weight(host), conv_b, rec_b, cb, ob);
  EXPECT_LT(max_rel(ca, cb), 1e-5);
  EXPECT_LT(max_rel(oa, ob), 1e-5);
  EXPECT_LT(max_rel(conv_a, conv_b), 1e-6);  // working states and snapshots (slots 0-2)
  EXPECT_LT(max_rel(rec_a, rec_b), 1e-5);
  // Slot 0 holds sequence 0's state after row 3; slot 3 (no snapshot) is untouched.
  EXPECT_NE(rec_a[0], rec0[0]);
  EXPECT_EQ(0, std::memcmp(rec_a.data() + 3 * L::state_floats, rec0.data() + 3 * L::state_floats,
                           L::state_floats * sizeof(float)));
}

TEST(LinearAttention, SplittingASequenceAcrossCallsIsBitExact) {
  using L = LinearAttentionCase;
  std::mt19937 rng(22);
  auto cpu = make_backend("cpu");
  LinearAttentionCase c(rng);
  const Weight w = cpu->upload_weight({c.conv_w.data(), DType::F32, L::C, L::K});
  std::vector<float> conv_a(L::slots * L::conv_floats, 0.f), rec_a(L::slots * L::state_floats, 0.f);
  std::vector<float> conv_b = conv_a, rec_b = rec_a, ca, oa;
  run_linear_attention(*cpu, c, w, conv_a, rec_a, ca, oa);
  // Sequence 0 alone, as rows [0, 3) then [3, 7).
  std::vector<float> cb(7 * L::C), ob(7 * L::Hv * L::dv);
  for (auto [b, e] : {std::pair<int32_t, int32_t>{0, 3}, {3, 7}}) {
    std::vector<int32_t> begin = {0, e - b}, slot = {4}, snap(c.snapshot.begin() + b, c.snapshot.begin() + e);
    RecurrentMeta m{1, begin.data(), slot.data(), snap.data()};
    cpu->causal_conv1d_silu(c.x.data() + b * L::C, e - b, L::C, w, m, conv_b.data(), L::conv_floats, cb.data() + b * L::C);
    cpu->gated_delta_rule(cb.data() + b * L::C, L::C, c.ba.data() + b * 2 * L::Hv, e - b, c.params(), m, rec_b.data(),
                          L::state_floats, ob.data() + b * L::Hv * L::dv);
  }
  EXPECT_EQ(0, std::memcmp(ob.data(), oa.data(), ob.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(rec_b.data() + 4 * L::state_floats, rec_a.data() + 4 * L::state_floats,
                           L::state_floats * sizeof(float)));
}

TEST(UnsupportedOps, DefaultImplementationNamesOpAndBackend) {
  class Minimal : public Backend {
   public:
    std::string name() const override { return "minimal"; }
    void* allocate(size_t) override { return nullptr; }
    void deallocate(void*) override {}
    Weight upload_weight(const Weight& w) override { return w; }
    void copy_to_host(void*, const void*, size_t) override {}
    void copy_to_device(void*, const void*, size_t) override {}
    void embedding(const Weight&, const int32_t*, int64_t, float, float*) override {}
    void rms_norm(const float*, const Weight&, int64_t, int64_t, float, float, float*) override {}
    void matmul(const float*, int64_t, const Weight&, const Weight*, float*) override {}
    void rope(float*, int64_t, int64_t, int64_t, const RopeTable&, const int32_t*) override {}
    void gated_activation(const float*, int64_t, int64_t, Activation, float*) override {}
    void gather_rows(const float*, const int32_t*, int64_t, int64_t, float*) override {}
    void add(float*, const float*, int64_t) override {}
    void write_kv(const float*, const float*, int64_t, const PagedKv&, const AttentionMeta&) override {}
    void attention(const float*, int64_t, const PagedKv&, const AttentionMeta&, const AttentionParams&, float*) override {}
  } minimal;
  try {
    minimal.moe_route(nullptr, 0, {}, nullptr, nullptr);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "op moe_route is not supported by backend minimal");
  }
}

}  // namespace
}  // namespace tachyon::kernels
