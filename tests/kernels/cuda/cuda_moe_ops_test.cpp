// The MoE, per-head matmul, gating and linear-attention ops of the CUDA backend against the
// scalar reference, and the exactness property of DESIGN.md: a row's bits from moe_experts and
// head_matmul do not depend on the other rows of the call (the grouped matmul follows the
// canonical reduction order). Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "cuda_test_fixture.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/moe.cuh"

namespace tachyon::kernels {
namespace {

class CudaNewOps : public CudaKernels {
 protected:
  template <typename T>
  std::vector<T> download_as(const T* p, size_t n) {
    std::vector<T> v(n);
    gpu->copy_to_host(v.data(), p, n * sizeof(T));
    return v;
  }
};

TEST_F(CudaNewOps, MoeRouteMatchesReferenceForEveryKind) {
  for (auto [E, k, groups, kept] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{16, 4, 4, 2}, {128, 8, 8, 4}}) {
    const int64_t rows = 37;
    const auto logits = random_vec(static_cast<size_t>(rows * E), rng);
    const auto bias = random_vec(static_cast<size_t>(E), rng, 0.05f);
    const float* d_logits = upload(logits);
    const float* d_bias = upload(bias);
    for (auto kind : {MoeRouting::SoftmaxTopK, MoeRouting::TopKSoftmax, MoeRouting::SigmoidGroupTopK}) {
      for (bool norm : {false, true}) {
        MoeRoutingParams p{kind, E, k, norm, groups, kept, 2.5f, bias.data()};
        std::vector<int32_t> expect_ids(static_cast<size_t>(rows * k));
        std::vector<float> expect_w(expect_ids.size());
        ref->moe_route(logits.data(), rows, p, expect_ids.data(), expect_w.data());
        p.correction_bias = d_bias;
        auto* ids = upload(std::vector<int32_t>(expect_ids.size(), -1));
        float* w = poisoned(expect_w.size());
        gpu->moe_route(d_logits, rows, p, ids, w);
        EXPECT_EQ(download_as(ids, expect_ids.size()), expect_ids) << E << " experts, kind " << int(kind);
        EXPECT_LT(rel_l2(download(w, expect_w.size()), expect_w), 1e-6) << E << " experts, kind " << int(kind);
      }
    }
  }
}

// Expert weights in bf16 (exact on the device), uploaded to both backends.
struct Experts {
  std::vector<std::vector<uint16_t>> host;
  std::vector<std::vector<float>> biases;
  std::vector<Weight> gpu_gu, gpu_down, gpu_gub, gpu_db, ref_gu, ref_down, ref_gub, ref_db;
  void add(Backend& g, Backend& r, std::mt19937& rng, int64_t H, int64_t I, float sd_gate_up) {
    auto matrix = [&](int64_t rows, int64_t cols, float sd, std::vector<Weight>& gw, std::vector<Weight>& rw) {
      host.push_back(to_bf16(random_vec(static_cast<size_t>(rows * cols), rng, sd)));
      const Weight w{host.back().data(), DType::BF16, rows, cols};
      gw.push_back(g.upload_weight(w));
      rw.push_back(r.upload_weight(w));
    };
    auto vec = [&](int64_t n, std::vector<Weight>& gw, std::vector<Weight>& rw) {
      biases.push_back(random_vec(static_cast<size_t>(n), rng, 0.3f));
      const Weight w{biases.back().data(), DType::F32, 1, n};
      gw.push_back(g.upload_weight(w));
      rw.push_back(r.upload_weight(w));
    };
    matrix(2 * I, H, sd_gate_up, gpu_gu, ref_gu);
    matrix(H, I, 0.3f, gpu_down, ref_down);
    vec(2 * I, gpu_gub, ref_gub);
    vec(H, gpu_db, ref_db);
  }
};

TEST_F(CudaNewOps, MoeExpertsMatchReferenceAndRowsAreBitIdenticalWhateverTheBatch) {
  // (hidden, intermediate): partial 64-column tiles, and k over two 512-k segments both ways.
  for (auto [H, I] : {std::pair<int64_t, int64_t>{72, 40}, {600, 520}}) {
    for (bool gpt_oss : {false, true}) {
      const int64_t E = 8;
      Experts ex;
      ex.host.reserve(2 * E), ex.biases.reserve(2 * E);
      for (int64_t e = 0; e < E; ++e) ex.add(*gpu, *ref, rng, H, I, gpt_oss ? 2.f : 0.3f);  // large: the clamp bites
      MoeExperts ge{ex.gpu_gu.data(), ex.gpu_down.data(), nullptr, nullptr, E, I, H, gpt_oss, 7.f, 1.702f};
      MoeExperts re{ex.ref_gu.data(), ex.ref_down.data(), nullptr, nullptr, E, I, H, gpt_oss, 7.f, 1.702f};
      if (gpt_oss) {
        ge.gate_up_bias = ex.gpu_gub.data(), ge.down_bias = ex.gpu_db.data();
        re.gate_up_bias = ex.ref_gub.data(), re.down_bias = ex.ref_db.data();
      }
      // 40: > 16 rows per expert; 200 x 2: more tiles than the split-K kernel takes, so its rows
      // (grouped kernel) are compared with the same rows alone (split-K).
      for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 2}, {5, 3}, {40, 2}, {200, 2}}) {
        const auto x = random_vec(static_cast<size_t>(rows * H), rng);
        std::vector<int32_t> ids(static_cast<size_t>(rows * k));
        const auto w = random_vec(ids.size(), rng);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < k; ++j) ids[r * k + j] = static_cast<int32_t>((r * 5 + j * 3 + 1) % E);
        std::vector<float> expect(static_cast<size_t>(rows * H));
        ref->moe_experts(x.data(), rows, ids.data(), w.data(), k, re, expect.data());
        const float* dx = upload(x);
        const int32_t* dids = upload(ids);
        const float* dw = upload(w);
        float* out = poisoned(expect.size());
        gpu->moe_experts(dx, rows, dids, dw, k, ge, out);
        const auto got = download(out, expect.size());
        EXPECT_LT(rel_l2(got, expect), 1e-2) << H << "x" << I << " rows " << rows << " gpt_oss " << gpt_oss;
        for (int64_t r = 0; r < rows; r += 3) {  // each row alone: the same bits as in the batch
          float* alone = poisoned(static_cast<size_t>(H));
          const uint64_t streamed = cuda::moe_streamed_calls();
          gpu->moe_experts(dx + r * H, 1, dids + r * k, dw + r * k, k, ge, alone);
          // A row alone streams its experts (bias-free, Hopper); batches of more than 8 slots take
          // the grouped kernels, so the comparison below holds the two paths to the same bits.
          if (!gpt_oss && cuda::device_arch().hopper) {
            EXPECT_EQ(cuda::moe_streamed_calls(), streamed + 1) << "row " << r << " of " << rows;
          }
          EXPECT_EQ(0, std::memcmp(download(alone, H).data(), got.data() + r * H, H * sizeof(float)))
              << "row " << r << " of " << rows;
        }
      }
    }
  }
}

TEST_F(CudaNewOps, HeadMatmulMatchesReferenceAndRowsAreBitIdenticalWhateverTheBatch) {
  for (auto [heads, n, k] : {std::tuple<int64_t, int64_t, int64_t>{3, 16, 40}, {4, 32, 600}}) {
    const int64_t xhs = k + 3, ohs = n + 5;  // odd strides; columns past n stay untouched
    const auto wb = to_bf16(random_vec(static_cast<size_t>(heads * n * k), rng, 0.1f));
    const Weight host{wb.data(), DType::BF16, heads * n, k};
    const Weight w = gpu->upload_weight(host);
    for (int64_t rows : {1, 7, 37}) {
      const auto x = random_vec(static_cast<size_t>(rows * heads * xhs), rng);
      std::vector<float> expect(static_cast<size_t>(rows * heads * ohs), -7.f);
      ref->head_matmul(x.data(), rows, heads, heads * xhs, xhs, host, expect.data(), heads * ohs, ohs);
      const float* dx = upload(x);
      float* out = upload(std::vector<float>(expect.size(), -7.f));
      gpu->head_matmul(dx, rows, heads, heads * xhs, xhs, w, out, heads * ohs, ohs);
      const auto got = download(out, expect.size());
      EXPECT_LT(rel_l2(got, expect), 4e-3) << heads << "x" << n << "x" << k << " rows " << rows;
      EXPECT_EQ(got[n], -7.f);
      for (int64_t r = 0; r < rows; r += 5) {
        float* alone = upload(std::vector<float>(static_cast<size_t>(heads * ohs), -7.f));
        gpu->head_matmul(dx + r * heads * xhs, 1, heads, heads * xhs, xhs, w, alone, heads * ohs, ohs);
        EXPECT_EQ(0, std::memcmp(download(alone, heads * ohs).data(), got.data() + r * heads * ohs,
                                 heads * ohs * sizeof(float)))
            << "row " << r << " of " << rows;
      }
    }
  }
}

TEST_F(CudaNewOps, GateMultiplyAndCopyStridedMatchReference) {
  const auto x = random_vec(6 * 20, rng), gate = random_vec(6 * 8, rng);
  for (auto fn : {GateFn::Sigmoid, GateFn::SiLU}) {
    auto expect = x;
    ref->gate_multiply(expect.data(), 6, 20, gate.data(), 8, 5, fn);  // 4 gates per row, 5 elements each
    float* dx = upload(x);
    gpu->gate_multiply(dx, 6, 20, upload(gate), 8, 5, fn);
    EXPECT_LT(rel_l2(download(dx, x.size()), expect), 1e-6);
  }
  std::vector<float> expect(6 * 9, 0.f);
  ref->copy_strided(x.data() + 3, 20, 6, 7, expect.data() + 1, 9);
  float* dst = upload(std::vector<float>(expect.size(), 0.f));
  gpu->copy_strided(upload(x) + 3, 20, 6, 7, dst + 1, 9);
  EXPECT_EQ(download(dst, expect.size()), expect);
}

// Two sequences (rows 0-6 and 7-9) through conv1d + delta rule, with snapshot slots; the
// shapes of the CPU test (kernels/moe_ops_test.cpp), Qwen3-Next's real head size, and one whose
// k_dim ends inside a warp's rows and v_dim inside a CTA's columns (48 x 40: two warps, two CTAs).
TEST_F(CudaNewOps, ConvAndDeltaRuleMatchReferenceIncludingSnapshots) {
  for (auto [Hk, Hv, dk, dv] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 4, 8, 6}, {1, 2, 128, 128}, {2, 6, 48, 40}}) {
    const int64_t K = 4, C = 2 * Hk * dk + Hv * dv, slots = 6, rows = 10;
    const int64_t conv_floats = (K - 1) * C, state_floats = Hv * dk * dv;
    const auto x = random_vec(static_cast<size_t>(rows * C), rng), ba = random_vec(static_cast<size_t>(rows * 2 * Hv), rng);
    const auto A_log = random_vec(static_cast<size_t>(Hv), rng, 0.5f), dt_bias = random_vec(static_cast<size_t>(Hv), rng, 0.5f);
    const auto conv_w = to_bf16(random_vec(static_cast<size_t>(C * K), rng, 0.5f));  // exact on the device
    const std::vector<int32_t> row_begin = {0, 7, 10}, seq_slot = {4, 5}, snapshot = {-1, -1, -1, 0, -1, -1, 1, -1, 2, -1};
    const RecurrentMeta meta{2, row_begin.data(), seq_slot.data(), snapshot.data()};
    const auto conv0 = random_vec(static_cast<size_t>(slots * conv_floats), rng);
    const auto rec0 = random_vec(static_cast<size_t>(slots * state_floats), rng, 0.1f);
    const Weight host_w{conv_w.data(), DType::BF16, C, K};

    auto conv_state = conv0, rec_state = rec0;
    std::vector<float> conv_out(static_cast<size_t>(rows * C)), out(static_cast<size_t>(rows * Hv * dv));
    ref->causal_conv1d_silu(x.data(), rows, C, host_w, meta, conv_state.data(), conv_floats, conv_out.data());
    ref->gated_delta_rule(conv_out.data(), C, ba.data(), rows, {Hk, Hv, dk, dv, A_log.data(), dt_bias.data()}, meta,
                          rec_state.data(), state_floats, out.data());

    float* d_conv_state = upload(conv0);
    float* d_rec_state = upload(rec0);
    float* d_conv_out = poisoned(conv_out.size());
    float* d_out = poisoned(out.size());
    const DeltaRuleParams dp{Hk, Hv, dk, dv, upload(A_log), upload(dt_bias)};
    gpu->causal_conv1d_silu(upload(x), rows, C, gpu->upload_weight(host_w), meta, d_conv_state, conv_floats, d_conv_out);
    gpu->gated_delta_rule(d_conv_out, C, upload(ba), rows, dp, meta, d_rec_state, state_floats, d_out);
    const std::string shape = std::to_string(dk) + "x" + std::to_string(dv);
    EXPECT_LT(rel_l2(download(d_conv_out, conv_out.size()), conv_out), 1e-6) << shape;
    EXPECT_LT(rel_l2(download(d_conv_state, conv_state.size()), conv_state), 1e-7) << shape;
    EXPECT_LT(rel_l2(download(d_out, out.size()), out), 1e-5) << shape;
    EXPECT_LT(rel_l2(download(d_rec_state, rec_state.size()), rec_state), 1e-5) << shape;

    // Sequence 0 again, split across calls of 1, 2 and 4 rows (decode, then verify-sized): the same bits.
    float* d_conv_b = upload(conv0);
    float* d_rec_b = upload(rec0);
    float* cb = poisoned(static_cast<size_t>(7 * C));
    float* ob = poisoned(static_cast<size_t>(7 * Hv * dv));
    const Weight w = gpu->upload_weight(host_w);
    const float* dx = upload(x);
    const float* dba = upload(ba);
    for (auto [b, e] : {std::pair<int32_t, int32_t>{0, 1}, {1, 3}, {3, 7}}) {
      std::vector<int32_t> begin = {0, e - b}, slot = {4}, snap(snapshot.begin() + b, snapshot.begin() + e);
      const RecurrentMeta m{1, begin.data(), slot.data(), snap.data()};
      gpu->causal_conv1d_silu(dx + b * C, e - b, C, w, m, d_conv_b, conv_floats, cb + b * C);
      gpu->gated_delta_rule(cb + b * C, C, dba + b * 2 * Hv, e - b, dp, m, d_rec_b, state_floats, ob + b * Hv * dv);
    }
    const auto whole = download(d_out, static_cast<size_t>(7 * Hv * dv));
    EXPECT_EQ(0, std::memcmp(download(ob, whole.size()).data(), whole.data(), whole.size() * sizeof(float))) << shape;
    const auto rec_whole = download(d_rec_state + 4 * state_floats, static_cast<size_t>(state_floats));
    EXPECT_EQ(0, std::memcmp(download(d_rec_b + 4 * state_floats, rec_whole.size()).data(), rec_whole.data(),
                             rec_whole.size() * sizeof(float)))
        << shape;
  }
}

}  // namespace
}  // namespace tachyon::kernels
