// The AVX-512 attention (cpu/isa/attention_avx512.cpp) against attend_item compiled portably:
// bit for bit, over key counts that leave every partial 8- and 16-key block, head dims with
// and without a tail past the last 8-lane step, odd and even groups, sinks, softcap, a sliding
// window's lower bound, tree rows, and the rows of one sequence attended together.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/kv_quant.h"
#include "test_data.h"

namespace tachyon::kernels {
namespace {

bool has_avx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

struct Case {
  int64_t d, group;
  bool sinks;
  float softcap;
};

TEST(AttentionAvx512, BitIdenticalToPortable) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
#if defined(__x86_64__)
  std::mt19937 rng(5);
  const int64_t kv_heads = 2, bs = 4, blocks = 12;
  std::vector<int32_t> table = {4, 9, 0, 2, 11, 7, 1, 3, 8, 10, 5, 6};
  for (const Case c : {Case{64, 3, false, 0.f}, Case{64, 1, false, 0.f}, Case{64, 4, true, 0.f},
                       Case{20, 3, true, 0.f}, Case{8, 2, false, 3.f}, Case{128, 5, false, 0.f},
                       Case{5, 2, true, 0.f}, Case{72, 7, false, 0.f}, Case{96, 6, true, 2.5f}}) {
    const int64_t d = c.d, g = c.group;
    auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng), vc = random_vec(kc.size(), rng);
    const PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
    const auto sinks = random_vec(static_cast<size_t>(g), rng);
    for (int32_t pos = 0; pos < blocks * bs; pos += pos < 20 ? 1 : 7)
      for (int32_t lo : {0, pos / 3}) {
        const auto q = random_vec(static_cast<size_t>(g * d), rng, 0.5f);
        std::vector<float> a(static_cast<size_t>(g * d)), b(a.size());
        cpu::AttentionItem it{q.data(), &kv, table.data(), pos % 2, g, lo, pos, 0.3f, c.softcap,
                              c.sinks ? sinks.data() : nullptr, a.data()};
        cpu::attend_items_avx512(&it, 1);
        it.out = b.data();
        cpu::attend_items_portable(&it, 1);
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << "d " << d << " group " << g << " keys [" << lo << ", " << pos << "]";
      }
  }
#endif
}

// A draft tree's rows read positions >= tree_base through their own paths; several items
// (the rows of one sequence) in one call.
TEST(AttentionAvx512, TreeRowsInOneCallAreBitIdentical) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
#if defined(__x86_64__)
  std::mt19937 rng(9);
  const int64_t kv_heads = 1, d = 64, g = 3, bs = 16, blocks = 3;
  auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng), vc = random_vec(kc.size(), rng);
  const PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  std::vector<int32_t> table = {2, 0, 1};
  const int32_t base = 30;
  std::vector<int32_t> paths = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0};
  const size_t rows = 3;
  const auto q = random_vec(rows * g * d, rng);
  std::vector<float> a(q.size()), b(q.size());
  std::vector<cpu::AttentionItem> items;
  for (size_t r = 0; r < rows; ++r) {
    cpu::AttentionItem it{q.data() + r * g * d, &kv, table.data(), 0, g, 0, base + static_cast<int32_t>(r) % 3,
                          0.125f, 0.f, nullptr, a.data() + r * g * d};
    it.tree_base = base;
    it.tree_path = paths.data() + 8 * r;
    items.push_back(it);
  }
  cpu::attend_items_avx512(items.data(), items.size());
  for (auto& it : items) it.out = b.data() + (it.out - a.data());
  cpu::attend_items_portable(items.data(), items.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
#endif
}

// A prompt's rows of one KV head handed over together are attended in shared passes (each key
// read once for up to 6 rows): bit for bit the portable kernel's one row at a time, for rows whose
// key counts differ (the common keys, then each row's own), head dims with and without a tail,
// odd and even groups, sinks and softcap; rows with another first key (a sliding window) or in
// another order still match. The shared path must have run.
TEST(AttentionAvx512, PromptRowsInSharedPassesAreBitIdentical) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
#if defined(__x86_64__)
  std::mt19937 rng(11);
  const int64_t kv_heads = 2, bs = 4, blocks = 24;
  std::vector<int32_t> table = {4, 9, 0, 2, 11, 7, 1, 3, 8, 10, 5, 6, 23, 12, 20, 14, 19, 13, 22, 15, 18, 17, 21, 16};
  const int64_t shared_before = cpu::attention_shared_rows_run();
  for (const Case c : {Case{128, 2, false, 0.f}, Case{64, 3, true, 0.f}, Case{20, 4, false, 2.5f},
                       Case{8, 1, true, 0.f}, Case{72, 7, false, 0.f}}) {
    const int64_t d = c.d, g = c.group;
    auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng), vc = random_vec(kc.size(), rng);
    const PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
    const auto sinks = random_vec(static_cast<size_t>(g), rng);
    // Rows at these positions, in this order (the last one: a sliding window's other first key);
    // the third group's common keys span three value tiles.
    const std::vector<int32_t> positions = {0, 1, 2, 3, 17, 18, 19, 30, 41, 46, 47, 70, 71, 72, 80, 93, 95, 25};
    const size_t rows = positions.size();
    const auto q = random_vec(rows * static_cast<size_t>(g * d), rng, 0.5f);
    std::vector<float> a(q.size()), b(q.size());
    std::vector<cpu::AttentionItem> items;
    for (size_t r = 0; r < rows; ++r)
      items.push_back(cpu::AttentionItem{q.data() + r * g * d, &kv, table.data(), 1, g, r + 1 < rows ? 0 : 5,
                                         positions[r], 0.3f, c.softcap, c.sinks ? sinks.data() : nullptr,
                                         a.data() + r * g * d});
    cpu::attend_items_avx512(items.data(), items.size());
    for (auto& it : items) it.out = b.data() + (it.out - a.data());
    for (const auto& it : items) cpu::attend_items_portable(&it, 1);
    for (size_t r = 0; r < rows; ++r)
      ASSERT_EQ(0, std::memcmp(a.data() + r * g * d, b.data() + r * g * d, static_cast<size_t>(g * d) * sizeof(float)))
          << "d " << d << " group " << g << " row at " << positions[r];
  }
  EXPECT_GT(cpu::attention_shared_rows_run(), shared_before);
#endif
}

// The rows of a verify step over a bf16 (the CPU's default), fp8 or int8 cache share their passes
// too (every key and value decoded once for all of them), and so do a draft tree's rows: bit for
// bit the portable kernel's one row at a time, which decodes them per row.
TEST(AttentionAvx512, VerifyRowsOverQuantizedCachesShareTheirPasses) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
#if defined(__x86_64__)
  std::mt19937 rng(13);
  const int64_t kv_heads = 2, bs = 16, blocks = 8, d = 64, g = 3;
  std::vector<int32_t> table = {3, 0, 6, 1, 7, 2, 5, 4};
  for (const KvFormat format : {KvFormat::F32, KvFormat::BF16, KvFormat::FP8, KvFormat::Int8}) {
    PagedKv kv{nullptr, nullptr, static_cast<int32_t>(bs), kv_heads, d, format};
    const KvTensorLayout kl = kv.k_layout(), vl = kv.v_layout();
    std::vector<uint8_t> kc(static_cast<size_t>(blocks * kl.block_bytes)), vc(static_cast<size_t>(blocks * vl.block_bytes));
    for (int64_t slot = 0; slot < blocks * bs; ++slot)
      for (int64_t h = 0; h < kv_heads; ++h) {
        const auto kx = random_vec(static_cast<size_t>(d), rng), vx = random_vec(static_cast<size_t>(d), rng);
        kv_quantize(kl.codec, kx.data(), d, kc.data() + kl.code_offset(slot, h), kc.data() + kl.param_offset(slot, h));
        kv_quantize(vl.codec, vx.data(), d, vc.data() + vl.code_offset(slot, h), vc.data() + vl.param_offset(slot, h));
      }
    kv.k = kc.data();
    kv.v = vc.data();
    // A verify step of 7 rows after 100 committed tokens, then a prompt's rows from the start.
    for (const int32_t first : {100, 0}) {
      const size_t rows = 7;
      const auto q = random_vec(rows * static_cast<size_t>(g * d), rng, 0.5f);
      std::vector<float> a(q.size()), b(q.size());
      std::vector<cpu::AttentionItem> items;
      for (size_t r = 0; r < rows; ++r)
        items.push_back(cpu::AttentionItem{q.data() + r * g * d, &kv, table.data(), 1, g, 0,
                                           first + static_cast<int32_t>(r), 0.125f, 0.f, nullptr, a.data() + r * g * d});
      const int64_t shared_before = cpu::attention_shared_rows_run();
      cpu::attend_items_avx512(items.data(), items.size());
      EXPECT_GT(cpu::attention_shared_rows_run(), shared_before) << "format " << static_cast<int>(format);
      for (auto& it : items) it.out = b.data() + (it.out - a.data());
      for (const auto& it : items) cpu::attend_items_portable(&it, 1);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "format " << static_cast<int>(format) << " rows from " << first;
    }
    // A draft tree's 7 rows (kernels/ops.h kMaxTreeDepth): they share the keys before the tree's
    // base and read their own paths past it; bases on and off an 8-key block, and at the first key.
    const std::vector<std::vector<int32_t>> paths = {{0}, {0, 1}, {0, 2}, {0, 1, 3}, {0, 1, 4}, {0, 1, 3, 5}, {0, 2, 6}};
    std::vector<int32_t> path_table(paths.size() * kMaxTreeDepth, 0);
    for (size_t r = 0; r < paths.size(); ++r) std::copy(paths[r].begin(), paths[r].end(), path_table.begin() + r * kMaxTreeDepth);
    for (const int32_t base : {101, 96, 0}) {
      const size_t rows = paths.size();
      const auto q = random_vec(rows * static_cast<size_t>(g * d), rng, 0.5f);
      std::vector<float> a(q.size()), b(q.size());
      std::vector<cpu::AttentionItem> items;
      for (size_t r = 0; r < rows; ++r) {
        cpu::AttentionItem it{q.data() + r * g * d, &kv, table.data(), 0, g, 0,
                              base + static_cast<int32_t>(paths[r].size()) - 1, 0.125f, 0.f, nullptr,
                              a.data() + r * g * d};
        it.tree_base = base;
        it.tree_path = path_table.data() + r * kMaxTreeDepth;
        items.push_back(it);
      }
      const int64_t shared_before = cpu::attention_shared_rows_run();
      cpu::attend_items_avx512(items.data(), items.size());
      EXPECT_GT(cpu::attention_shared_rows_run(), shared_before) << "format " << static_cast<int>(format);
      for (auto& it : items) it.out = b.data() + (it.out - a.data());
      for (const auto& it : items) cpu::attend_items_portable(&it, 1);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "format " << static_cast<int>(format) << " tree at " << base;
    }
  }
#endif
}


// Through the CPU backend on two threads: a verify step's rows (5 of one sequence; then 3 and 4
// of two sequences) are handed to the kernel a whole run per KV head, so every row goes through
// a shared pass, and each row's output is the bits of attending it alone. (Split item by item
// over the threads, a 5-row step's rows went one at a time: 0.77x the forward time once shared.)
TEST(AttentionAvx512, TheBackendHandsAVerifyStepsRowsOverTogether) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
#if defined(__x86_64__)
  ThreadPool two(2);
  ThreadPool::Use use(two);
  CpuBackend backend;
  std::mt19937 rng(5);
  const int64_t kv_heads = 2, group = 3, d = 64, bs = 16, blocks = 16, heads = kv_heads * group;
  auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng), vc = random_vec(kc.size(), rng);
  const PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  const std::vector<int32_t> tables = {3, 0, 7, 1, 5, 2, 9, 4, 8, 6, 12, 10, 15, 11, 14, 13};
  for (const std::vector<int32_t>& rows_per_seq : {std::vector<int32_t>{5}, std::vector<int32_t>{3, 4}}) {
    std::vector<int32_t> positions, row_seq, offsets = {0};
    for (size_t s = 0; s < rows_per_seq.size(); ++s) {
      for (int32_t i = 0; i < rows_per_seq[s]; ++i) {
        positions.push_back(90 + 17 * static_cast<int32_t>(s) + i);
        row_seq.push_back(static_cast<int32_t>(s));
      }
      offsets.push_back(static_cast<int32_t>(8 * (s + 1)));  // sequence s: blocks tables[8s, 8s + 8)
    }
    const auto rows = static_cast<int64_t>(positions.size());
    const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng, 0.5f);
    std::vector<float> out(q.size()), alone(q.size());
    AttentionMeta meta;
    meta.positions = positions.data();
    meta.row_seq = row_seq.data();
    meta.block_tables = tables.data();
    meta.block_table_offsets = offsets.data();
    AttentionParams p;
    p.num_heads = heads;
    p.scale = 0.125f;
    const int64_t shared_before = cpu::attention_shared_rows_run();
    backend.attention(q.data(), rows, kv, meta, p, out.data());
    EXPECT_EQ(cpu::attention_shared_rows_run() - shared_before, rows * kv_heads)
        << rows_per_seq.size() << " sequences: every (row, KV head) in a shared pass";
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < kv_heads; ++h) {
        const cpu::AttentionItem it{q.data() + (r * heads + h * group) * d, &kv,
                                    tables.data() + offsets[static_cast<size_t>(row_seq[r])], h, group, 0,
                                    positions[static_cast<size_t>(r)], p.scale, 0.f, nullptr,
                                    alone.data() + (r * heads + h * group) * d};
        cpu::attend_items_portable(&it, 1);
      }
    EXPECT_EQ(0, std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)));
  }
#endif
}

}  // namespace
}  // namespace tachyon::kernels
