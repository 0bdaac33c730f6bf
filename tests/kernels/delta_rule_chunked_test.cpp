// The CPU gated delta rule's chunked prefill form (cpu/isa/delta_rule.h) against the scalar
// reference (row by row, in double), and the exactness properties of RecurrentMeta: batch
// invariance, forwards split at chunk boundaries, snapshots inside chunks, runs starting
// mid-chunk.
//
// Tolerance: outputs, states and snapshots within 1e-5 of the largest magnitude of the tensor
// compared (float32 chunk algebra vs a double recurrence; the row-by-row float path is within
// 1e-5 too; the chunked form, observed <= 4e-6, re-associates sums over up to 64 rows and exponentiates
// differences of cumulative log-decays).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/backend.h"
#include "test_data.h"
#include "kernels/cpu/isa/delta_rule.h"

namespace tachyon::kernels {
namespace {

constexpr double kTolerance = 1e-5;

// A ragged batch of sequences for the delta rule alone: q, k, v as if after the conv.
struct Case {
  int64_t Hk, Hv, dk, dv, qs;
  std::vector<int32_t> lengths, first_position;
  std::vector<float> qkv, ba, A_log, dt_bias, state0;
  std::vector<int32_t> row_begin, seq_slot, snapshot;  // snapshot slots: after the sequences' working slots
  int64_t rows = 0, num_snapshots = 0;

  Case(int64_t hk, int64_t hv, int64_t k, int64_t v, std::vector<int32_t> lens, std::vector<int32_t> first,
       std::mt19937& rng)
      : Hk(hk), Hv(hv), dk(k), dv(v), qs(2 * hk * k + hv * v), lengths(std::move(lens)), first_position(std::move(first)) {
    row_begin.push_back(0);
    for (int32_t n : lengths) row_begin.push_back(row_begin.back() + n);
    rows = row_begin.back();
    for (size_t s = 0; s < lengths.size(); ++s) seq_slot.push_back(static_cast<int32_t>(s));
    qkv = random_vec(static_cast<size_t>(rows * qs), rng);
    ba = random_vec(static_cast<size_t>(rows * 2 * Hv), rng, 1.5f);
    A_log = random_vec(static_cast<size_t>(Hv), rng, 0.7f);
    dt_bias = random_vec(static_cast<size_t>(Hv), rng, 0.5f);
    // Snapshots after every 7th row and after the last two rows of each sequence (a rollback
    // ring's pattern), wherever they fall in a chunk.
    snapshot.assign(static_cast<size_t>(rows), -1);
    for (size_t s = 0; s < lengths.size(); ++s)
      for (int32_t r = row_begin[s]; r < row_begin[s + 1]; ++r)
        if ((r - row_begin[s]) % 7 == 6 || r + 2 >= row_begin[s + 1])
          snapshot[r] = static_cast<int32_t>(lengths.size() + num_snapshots++);
    state0 = random_vec(static_cast<size_t>(num_slots() * state_floats()), rng, 0.3f);  // nonzero initial states
  }
  int64_t state_floats() const { return Hv * dk * dv; }
  int64_t num_slots() const { return static_cast<int64_t>(lengths.size()) + num_snapshots; }
  DeltaRuleParams params() const { return {Hk, Hv, dk, dv, A_log.data(), dt_bias.data()}; }
  RecurrentMeta meta(int32_t align) const {
    RecurrentMeta m{static_cast<int64_t>(lengths.size()), row_begin.data(), seq_slot.data(), snapshot.data()};
    m.seq_first_position = first_position.data();
    m.resume_align = align;
    return m;
  }
  // Runs the op; returns outputs [rows, Hv, dv] and leaves the states in `state`.
  std::vector<float> run(Backend& be, int32_t align, std::vector<float>& state) const {
    state = state0;
    std::vector<float> out(static_cast<size_t>(rows * Hv * dv));
    be.gated_delta_rule(qkv.data(), qs, ba.data(), rows, params(), meta(align), state.data(), state_floats(), out.data());
    return out;
  }
};

struct Shape {
  int64_t Hk, Hv, dk, dv;
};

class DeltaRuleChunked : public ::testing::TestWithParam<Shape> {
 protected:
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
};

// Sequences shorter and longer than a chunk, one starting mid-chunk, one at a chunk boundary.
TEST_P(DeltaRuleChunked, MatchesTheRecurrentReferenceOnARaggedBatch) {
  const Shape sh = GetParam();
  std::mt19937 rng(31);
  const Case c(sh.Hk, sh.Hv, sh.dk, sh.dv, {5, 150, 100, 64, 1, 37}, {0, 0, 40, 128, 9, 17}, rng);
  std::vector<float> ref_state, cpu_state;
  const auto expected = c.run(*ref, 0, ref_state);
  for (int32_t align : {64, 16, 8, 24}) {  // chunks of 16, 16, 8 and 8 (the largest power of two <= 16 dividing it)
    const auto got = c.run(*cpu, align, cpu_state);
    EXPECT_LT(max_rel(got.data(), expected.data(), got.size()), kTolerance) << "align " << align;
    for (int64_t slot = 0; slot < c.num_slots(); ++slot)  // working states and every snapshot
      EXPECT_LT(max_rel(cpu_state.data() + slot * c.state_floats(), ref_state.data() + slot * c.state_floats(),
                        static_cast<size_t>(c.state_floats())),
                kTolerance)
          << "align " << align << " slot " << slot;
  }
}

// A sequence's bits do not depend on its batch-mates: alone or in the ragged batch.
TEST_P(DeltaRuleChunked, BatchInvariantBitExactly) {
  const Shape sh = GetParam();
  std::mt19937 rng(32);
  const Case c(sh.Hk, sh.Hv, sh.dk, sh.dv, {5, 150, 100, 37}, {0, 0, 40, 17}, rng);
  std::vector<float> state;
  const auto batched = c.run(*cpu, 64, state);
  for (size_t s = 0; s < c.lengths.size(); ++s) {
    RecurrentMeta m = c.meta(64);
    const int32_t begin[2] = {0, c.lengths[s]};
    m.num_seqs = 1, m.seq_row_begin = begin, m.seq_state_slot = c.seq_slot.data() + s;
    m.row_snapshot_slot = c.snapshot.data() + c.row_begin[s], m.seq_first_position = c.first_position.data() + s;
    std::vector<float> alone_state = c.state0, alone(static_cast<size_t>(c.lengths[s] * c.Hv * c.dv));
    const int64_t r0 = c.row_begin[s];
    cpu->gated_delta_rule(c.qkv.data() + r0 * c.qs, c.qs, c.ba.data() + r0 * 2 * c.Hv, c.lengths[s], c.params(), m,
                          alone_state.data(), c.state_floats(), alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + r0 * c.Hv * c.dv, alone.size() * sizeof(float))) << s;
    EXPECT_EQ(0, std::memcmp(alone_state.data() + s * c.state_floats(), state.data() + s * c.state_floats(),
                             static_cast<size_t>(c.state_floats()) * sizeof(float)))
        << s;
  }
}

// Forwards of one sequence split at chunk boundaries give the unsplit run's bits; a split
// elsewhere (a forward that starts mid-chunk) stays within tolerance.
TEST_P(DeltaRuleChunked, SplitsAtChunkBoundariesAreBitExact) {
  const Shape sh = GetParam();
  std::mt19937 rng(33);
  const Case c(sh.Hk, sh.Hv, sh.dk, sh.dv, {200}, {0}, rng);
  std::vector<float> state;
  const auto whole = c.run(*cpu, 64, state);
  for (const std::vector<int32_t>& cuts : {std::vector<int32_t>{0, 64, 192, 200}, {0, 128, 200}, {0, 50, 101, 200}}) {
    std::vector<float> split_state = c.state0, split(whole.size());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const int32_t b = cuts[i], e = cuts[i + 1], begin[2] = {0, e - b}, slot = 0;
      RecurrentMeta m{1, begin, &slot, c.snapshot.data() + b};
      m.seq_first_position = &b, m.resume_align = 64;
      cpu->gated_delta_rule(c.qkv.data() + b * c.qs, c.qs, c.ba.data() + b * 2 * c.Hv, e - b, c.params(), m,
                            split_state.data(), c.state_floats(), split.data() + b * c.Hv * c.dv);
    }
    const bool aligned = cuts[1] % 64 == 0;
    if (aligned) {
      EXPECT_EQ(0, std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float))) << cuts[1];
      EXPECT_EQ(0, std::memcmp(split_state.data(), state.data(), static_cast<size_t>(c.state_floats()) * sizeof(float)));
    } else {
      EXPECT_LT(max_rel(split.data(), whole.data(), whole.size()), kTolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaRuleChunked,
                         ::testing::Values(Shape{2, 4, 32, 48}, Shape{1, 3, 20, 24}, Shape{2, 2, 128, 128}),
                         [](const auto& info) {
                           const Shape s = info.param;
                           return "Hk" + std::to_string(s.Hk) + "Hv" + std::to_string(s.Hv) + "dk" +
                                  std::to_string(s.dk) + "dv" + std::to_string(s.dv);
                         });

// The AVX2 build computes the portable build's bits (one fma chain per element in both).
TEST(DeltaRuleIsa, Avx2MatchesPortableBitExactly) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2/FMA";
  std::mt19937 rng(34);
  const Case c(2, 4, 40, 56, {61}, {3}, rng);
  const DeltaRuleParams p = c.params();
  using Fns = std::pair<cpu::DeltaPieceFn, cpu::DeltaPieceFn>;
  for (auto [portable, avx2] : {Fns{cpu::delta_recurrent_portable, cpu::delta_recurrent_avx2},
                                Fns{cpu::delta_chunked_portable, cpu::delta_chunked_avx2}}) {
    std::vector<float> sa = c.state0, sb = c.state0, oa(static_cast<size_t>(61 * c.Hv * c.dv)), ob(oa.size());
    for (int64_t h = 0; h < c.Hv; ++h) {
      portable({&p, c.qkv.data(), c.qs, c.ba.data(), 61, h, sa.data() + h * c.dk * c.dv, oa.data() + h * c.dv,
                c.snapshot.data(), sa.data(), c.state_floats()});
      avx2({&p, c.qkv.data(), c.qs, c.ba.data(), 61, h, sb.data() + h * c.dk * c.dv, ob.data() + h * c.dv,
            c.snapshot.data(), sb.data(), c.state_floats()});
    }
    EXPECT_EQ(oa, ob);
    EXPECT_EQ(sa, sb);
  }
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

}  // namespace
}  // namespace tachyon::kernels
