// The CPU attention of one prefill on the Qwen3-0.6B shape (16 query heads, 8 KV heads, head_dim
// 128, f32 cache, causal), one thread: the items of --kv-heads KV heads handed to the kernel as
// CpuBackend::attention hands them (KV-head-major, a batch at a time), with the best ISA here.
// Prints thread CPU ms (CLOCK_THREAD_CPUTIME_ID, min of --runs: a busy machine slows it less
// than wall time), scaled to all 8 KV heads and 28 layers, and the arithmetic rate of the
// score and value products (2·d flops per (row, head, key) each).
// Usage: prefill_attention_bench [--rows 512] [--runs 5] [--kv-heads 2]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa/matmul.h"

using namespace tachyon;
using namespace tachyon::kernels;

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 512, kv_run = 2;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) rows = std::atoll(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--kv-heads" && i + 1 < argc) kv_run = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: prefill_attention_bench [--rows N] [--runs N] [--kv-heads N]\n");
      return 2;
    }
  }
  constexpr int64_t kHeads = 16, kKvHeads = 8, kDim = 128, kLayers = 28, kBlock = 16;
  const int64_t group = kHeads / kKvHeads, blocks = (rows + kBlock - 1) / kBlock;
  kv_run = std::clamp<int64_t>(kv_run, 1, kKvHeads);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> k(static_cast<size_t>(blocks * kBlock * kKvHeads * kDim)), v(k.size());
  std::vector<float> q(static_cast<size_t>(rows * kHeads * kDim)), out(q.size());
  for (auto* vec : {&k, &v, &q})
    for (auto& x : *vec) x = 0.3f * dist(rng);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  const PagedKv kv{k.data(), v.data(), static_cast<int32_t>(kBlock), kKvHeads, kDim};
  std::vector<cpu::AttentionItem> items;
  for (int64_t h = 0; h < kv_run; ++h)
    for (int64_t r = 0; r < rows; ++r)
      items.push_back(cpu::AttentionItem{q.data() + (r * kHeads + h * group) * kDim, &kv, table.data(), h, group, 0,
                                         static_cast<int32_t>(r), 0.088f, 0.f, nullptr,
                                         out.data() + (r * kHeads + h * group) * kDim});
  const auto& isa = cpu::isa_kernels();
  constexpr size_t kBatch = 16;  // as CpuBackend::attention
  auto run = [&] {
    for (size_t i = 0; i < items.size(); i += kBatch) isa.attend(items.data() + i, std::min(kBatch, items.size() - i));
  };
  run();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const double t0 = thread_seconds();
    run();
    best = std::min(best, thread_seconds() - t0);
  }
  const double scale = static_cast<double>(kKvHeads) / static_cast<double>(kv_run) * kLayers;
  const double pairs = static_cast<double>(rows) * static_cast<double>(rows + 1) / 2 * kHeads;  // (row, head, key)
  const double flops = 4.0 * kDim * pairs * kLayers;
  std::printf("cpu/%s attention, %lld rows, one thread: %.2f ms for %lld KV heads; a prefill (8 KV heads x 28 layers) "
              "%.3f CPU-s, %.1f GFLOP/s\n",
              isa.name, static_cast<long long>(rows), best * 1e3, static_cast<long long>(kv_run), best * scale,
              flops / (best * scale) * 1e-9);
  return 0;
}
