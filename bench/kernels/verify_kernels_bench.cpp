// The CPU kernels of a verify step, one thread, at the demo model's shapes (hidden 384,
// intermediate 1024, head_dim 64, 6 heads / 2 KV heads, vocabulary 8192, bf16 weights):
//  1. matmul_range of the ISA in use per row count: µs per call and per row, so the marginal
//     cost of a verify row is visible kernel by kernel (bench/spec/verify_cost is the whole
//     forward);
//  2. attention over the (row, KV head) items of R rows of one sequence at --context keys,
//     as CpuBackend::attention hands them to the ISA.
// Protocol: one warm-up discarded, min of --runs (the machine is shared and noisy).
// Usage: verify_kernels_bench [--runs 200] [--context 256] [--max-rows 9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernel_timing.h"

using namespace tachyon;
using namespace tachyon::kernels;
using tachyon::bench::time_min;
using tachyon::bench::wall_seconds;

namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200, max_rows = 9;
  int32_t context = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--context")) context = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-rows")) max_rows = std::atoi(argv[i + 1]);
  }
  const auto& isa = cpu::isa_kernels();
  std::mt19937 rng(1);
  std::printf("isa %s, one thread\n\n", isa.name);

  // The matrices of one layer plus the head, as the CPU backend packs them.
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"qkv", 640, 384}, {"o", 384, 384}, {"gate_up", 2048, 384}, {"down", 384, 1024},
                          {"lm_head", 8192, 384}};
  std::printf("| matmul | rows | µs | µs per row |\n|---|---:|---:|---:|\n");
  for (const Shape& s : shapes) {
    std::vector<uint16_t> host(static_cast<size_t>(s.n * s.k));
    for (auto& h : host) h = f32_to_bf16(std::normal_distribution<float>(0.f, 0.05f)(rng));
    const Weight row_major{host.data(), DType::BF16, s.n, s.k};
    std::vector<uint16_t> packed(static_cast<size_t>(cpu::panel64_padded_rows(s.n) * s.k));
    cpu::pack_panel64(row_major, packed.data());
    Weight w = row_major;
    w.data = packed.data();
    w.layout = WeightLayout::Panel64;
    const auto x = random_vec(static_cast<size_t>(max_rows * s.k), rng);
    std::vector<float> out(static_cast<size_t>(max_rows * s.n));
    for (int rows = 1; rows <= max_rows; ++rows) {
      const double t = time_min(runs, [&] { isa.matmul_range(x.data(), rows, w, 0, s.n, out.data(), s.n); });
      std::printf("| %s | %d | %.1f | %.1f |\n", s.name, rows, t * 1e6, t * 1e6 / rows);
    }
  }

  // All matrices of the model in forward order (25 MB of bf16: they stream from L3, as in a
  // forward, where the single-matrix timings above run from L2).
  {
    std::vector<std::vector<uint16_t>> store;
    std::vector<Weight> ws;
    for (int layer = 0; layer <= 6; ++layer)
      for (const Shape& s : shapes) {
        if ((layer < 6) == (std::strcmp(s.name, "lm_head") == 0)) continue;
        store.emplace_back(static_cast<size_t>(cpu::panel64_padded_rows(s.n) * s.k));
        for (auto& h : store.back()) h = f32_to_bf16(std::normal_distribution<float>(0.f, 0.05f)(rng));
        ws.push_back(Weight{store.back().data(), DType::BF16, s.n, s.k, WeightLayout::Panel64});
      }
    const auto x = random_vec(static_cast<size_t>(max_rows * 1024), rng);
    std::vector<float> out(static_cast<size_t>(max_rows * 8192));
    std::printf("\n| all matmuls of a forward | rows | µs | µs per row |\n|---|---:|---:|---:|\n");
    for (int rows = 1; rows <= max_rows; ++rows) {
      const double t = time_min(runs / 4 + 1, [&] {
        for (const Weight& w : ws) isa.matmul_range(x.data(), rows, w, 0, w.rows, out.data(), w.rows);
      });
      std::printf("| model | %d | %.1f | %.1f |\n", rows, t * 1e6, t * 1e6 / rows);
    }
  }

  // Attention: rows at positions context .. context + R − 1 of one sequence (a chain verify).
  const int64_t kv_heads = 2, group = 3, d = 64, bs = 16;
  const int64_t blocks = (context + max_rows + bs - 1) / bs;
  auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng), vc = random_vec(kc.size(), rng);
  PagedKv kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>((b * 7) % blocks);
  const auto q = random_vec(static_cast<size_t>(max_rows * kv_heads * group * d), rng);
  std::vector<float> out(q.size());
  // Items row-major (each row alone: attend_item), then KV-head-major as the CPU backend hands
  // them over (a head's rows in one shared pass: attend_rows).
  std::printf("\n| attention | rows | µs, rows apart | µs, a head's rows together | µs per row, together |\n"
              "|---|---:|---:|---:|---:|\n");
  for (int rows = 1; rows <= max_rows; ++rows) {
    std::vector<cpu::AttentionItem> apart, together;
    const auto item = [&](int r, int64_t h) {
      return cpu::AttentionItem{q.data() + (r * kv_heads + h) * group * d, &kv, table.data(), h, group, 0, context + r,
                                0.125f, 0.f, nullptr, out.data() + (r * kv_heads + h) * group * d};
    };
    for (int r = 0; r < rows; ++r)
      for (int64_t h = 0; h < kv_heads; ++h) apart.push_back(item(r, h));
    for (int64_t h = 0; h < kv_heads; ++h)
      for (int r = 0; r < rows; ++r) together.push_back(item(r, h));
    const double t_apart = time_min(runs, [&] { isa.attend(apart.data(), apart.size()); });
    const double t_together = time_min(runs, [&] { isa.attend(together.data(), together.size()); });
    std::printf("| layer | %d | %.1f | %.1f | %.1f |\n", rows, t_apart * 1e6, t_together * 1e6, t_together * 1e6 / rows);
  }
}
