// Decode copies (`--quantize-decode`, kernels/weight.h Weight::decode) on the CPU, cpu-bf16 and
// reference backends: with rows marked (Backend::set_decode_rows), matmul, the gated MLP,
// embedding and moe_experts compute each prefill row with the weight and each decode row with its
// copy, the bits of each row computed alone with the weight of its kind; unmarked, every row
// reads the weight.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/quantize.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

// A bf16 matrix uploaded as is and with its int4 (group 64) form as the decode copy.
struct Pair {
  std::vector<float> host;
  Weight plain, with_copy, copy;
  Pair(Backend& be, int64_t rows, int64_t cols, std::mt19937& rng) : host(random_vec(static_cast<size_t>(rows * cols), rng, 0.3f)) {
    const Weight w{host.data(), DType::F32, rows, cols};
    plain = be.upload_weight(w);
    const QuantizedWeight q = quantize_int4(w, 64);
    copy = be.upload_weight(q.weight);
    with_copy = be.with_decode_copy(plain, copy);
  }
};

bool same_bits(const std::vector<float>& a, const float* b) { return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0; }

class DecodeCopies : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Backend> be = make_backend(GetParam());
  std::mt19937 rng{7};
  // Rows 0-1 decode, 2-4 prefill, 5 decode: three runs.
  const std::vector<uint8_t> kinds = {1, 1, 0, 0, 0, 1};
  const int64_t rows = 6;
};

TEST_P(DecodeCopies, MatmulAndGatedMlpReadTheWeightOfEachRowsKind) {
  const int64_t k = 128, n = 96, inter = 64;
  Pair w(*be, n, k, rng), gate_up(*be, 2 * inter, k, rng), down(*be, k, inter, rng);
  const std::vector<float> x = random_vec(static_cast<size_t>(rows * k), rng, 1.f);
  std::vector<float> got(static_cast<size_t>(rows * n)), row(static_cast<size_t>(n));
  {
    const kernels::DecodeRows scope(*be, kinds);
    be->matmul(x.data(), rows, w.with_copy, nullptr, got.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    be->matmul(x.data() + r * k, 1, kinds[r] ? w.copy : w.plain, nullptr, row.data());
    EXPECT_TRUE(same_bits(row, got.data() + r * n)) << "row " << r;
  }
  // Unmarked: every row reads the weight itself.
  std::vector<float> plain(got.size()), unmarked(got.size());
  be->matmul(x.data(), rows, w.plain, nullptr, plain.data());
  be->matmul(x.data(), rows, w.with_copy, nullptr, unmarked.data());
  EXPECT_TRUE(same_bits(plain, unmarked.data()));
  EXPECT_FALSE(same_bits(plain, got.data()));

  std::vector<float> gu(static_cast<size_t>(rows * 2 * inter)), act(static_cast<size_t>(rows * inter)),
      mlp(static_cast<size_t>(rows * k)), one(static_cast<size_t>(k)), gu1(static_cast<size_t>(2 * inter)),
      act1(static_cast<size_t>(inter));
  {
    const kernels::DecodeRows scope(*be, kinds);
    be->gated_mlp(x.data(), rows, gate_up.with_copy, down.with_copy, Activation::SiLU, gu.data(), act.data(), mlp.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    be->gated_mlp(x.data() + r * k, 1, kinds[r] ? gate_up.copy : gate_up.plain, kinds[r] ? down.copy : down.plain,
                  Activation::SiLU, gu1.data(), act1.data(), one.data());
    EXPECT_TRUE(same_bits(one, mlp.data() + r * k)) << "row " << r;
  }
  // A marked op over another number of rows is refused.
  const kernels::DecodeRows scope(*be, kinds);
  EXPECT_THROW(be->matmul(x.data(), rows - 1, w.with_copy, nullptr, got.data()), Error);
}

TEST_P(DecodeCopies, EmbeddingAndExpertsReadTheWeightOfEachRowsKind) {
  const int64_t vocab = 64, hidden = 128, inter = 64, experts = 4, top_k = 2;
  Pair table(*be, vocab, hidden, rng);
  const std::vector<int32_t> ids = {3, 60, 3, 17, 60, 0};
  std::vector<float> got(static_cast<size_t>(rows * hidden)), one(static_cast<size_t>(hidden));
  {
    const kernels::DecodeRows scope(*be, kinds);
    be->embedding(table.with_copy, ids.data(), rows, 1.5f, got.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    be->embedding(kinds[r] ? table.copy : table.plain, ids.data() + r, 1, 1.5f, one.data());
    EXPECT_TRUE(same_bits(one, got.data() + r * hidden)) << "row " << r;
  }
  EXPECT_FALSE(same_bits(std::vector<float>(got.begin(), got.begin() + hidden), got.data() + 2 * hidden))
      << "token 3 as a decode row (int4 copy) and as a prefill row (bf16)";

  std::vector<Pair> gate_up, down;
  gate_up.reserve(experts);
  down.reserve(experts);
  for (int64_t e = 0; e < experts; ++e) {
    gate_up.emplace_back(*be, 2 * inter, hidden, rng);
    down.emplace_back(*be, hidden, inter, rng);
  }
  auto experts_of = [&](int kind) {  // 0: plain, 1: decode copies only, 2: weights carrying copies
    static std::vector<Weight> gu, dn;
    gu.clear(), dn.clear();
    for (int64_t e = 0; e < experts; ++e) {
      gu.push_back(kind == 0 ? gate_up[e].plain : kind == 1 ? gate_up[e].copy : gate_up[e].with_copy);
      dn.push_back(kind == 0 ? down[e].plain : kind == 1 ? down[e].copy : down[e].with_copy);
    }
    return MoeExperts{gu.data(), dn.data(), nullptr, nullptr, experts, inter, hidden};
  };
  const std::vector<float> x = random_vec(static_cast<size_t>(rows * hidden), rng, 1.f);
  const std::vector<int32_t> routed = {0, 1, 1, 2, 3, 0, 2, 3, 0, 3, 1, 2};
  const std::vector<float> weights = random_vec(static_cast<size_t>(rows * top_k), rng, 0.5f);
  {
    const kernels::DecodeRows scope(*be, kinds);
    be->moe_experts(x.data(), rows, routed.data(), weights.data(), top_k, experts_of(2), got.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    be->moe_experts(x.data() + r * hidden, 1, routed.data() + r * top_k, weights.data() + r * top_k, top_k,
                    experts_of(kinds[r] ? 1 : 0), one.data());
    EXPECT_TRUE(same_bits(one, got.data() + r * hidden)) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DecodeCopies, ::testing::Values("cpu", "cpu-bf16", "reference"),
                         [](const auto& info) { return info.param == "cpu-bf16" ? std::string("cpu_bf16") : info.param; });

}  // namespace
}  // namespace tachyon::kernels
