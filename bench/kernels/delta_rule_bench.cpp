// Gated delta rule on the CPU backend, recurrent vs chunked, at the qwen3-next-1b layer shape
// (16 value heads, 8 key heads, dk = dv = 128):
//  1. per-row cost of one (sequence, head) piece of n rows in each form: where the chunked
//     form starts to pay (linear_attention_ops.cpp, kMinChunkRows);
//  2. one layer's op over a 512-token prefill of one sequence: row by row vs whole chunks
//     (resume_align 16), wall and process CPU time. TACHYON_ISA=portable gives the portable
//     build (the row-by-row loop as it was before the AVX2 build of it).
// Protocol: one warm-up discarded, min of --runs (the machine is shared and noisy).
// Threads: TACHYON_THREADS. Usage: delta_rule_bench [--runs 7] [--rows 512]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa/delta_rule.h"

using namespace tachyon;

namespace {

double wall() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double cpu() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

struct Times {
  double wall = 1e30, cpu = 1e30;
};
template <class Fn>
Times time_min(int runs, Fn&& fn) {
  fn();  // warm-up
  Times t;
  for (int i = 0; i < runs; ++i) {
    const double w0 = wall(), c0 = cpu();
    fn();
    t.wall = std::min(t.wall, wall() - w0), t.cpu = std::min(t.cpu, cpu() - c0);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 7;
  int64_t rows = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--rows") == 0) rows = std::atoll(argv[i + 1]);
  }
  kernels::DeltaRuleParams p;
  p.num_k_heads = 8, p.num_v_heads = 16, p.k_dim = 128, p.v_dim = 128;
  const int64_t Hv = p.num_v_heads, qs = 2 * p.num_k_heads * p.k_dim + Hv * p.v_dim;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> qkv(static_cast<size_t>(rows * qs)), ba(static_cast<size_t>(rows * 2 * Hv)), A_log(Hv), dt_bias(Hv);
  for (float& x : qkv) x = nd(rng);
  for (float& x : ba) x = nd(rng);
  for (int64_t h = 0; h < Hv; ++h) A_log[h] = std::log(1.f + h % 8), dt_bias[h] = 0.5f * nd(rng);
  p.A_log = A_log.data(), p.dt_bias = dt_bias.data();
  const int64_t stride = p.state_floats();
  std::vector<float> state(static_cast<size_t>(stride), 0.f), out(static_cast<size_t>(rows * Hv * p.v_dim));
  std::vector<int32_t> no_snapshots(static_cast<size_t>(rows), -1);
  const size_t threads = ThreadPool::global().num_threads();

  std::printf("# gated delta rule, Hk 8, Hv 16, dk = dv = 128, %zu thread(s), min of %d\n\n", threads, runs);
  std::printf("## one (sequence, head) piece of n rows: us per row\n\n| n | recurrent | chunked | ratio |\n|---|---|---|---|\n");
  const auto& isa = kernels::cpu::delta_rule_kernels();
  for (int64_t n : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64}) {
    kernels::cpu::DeltaPiece piece{&p, qkv.data(), qs, ba.data(), n, 3, state.data() + 3 * 128 * 128, out.data() + 3 * 128,
                                   no_snapshots.data(), state.data(), stride};
    const int reps = static_cast<int>(std::max<int64_t>(1, 256 / n));
    const Times r = time_min(runs, [&] { for (int i = 0; i < reps; ++i) isa.recurrent(piece); });
    const Times c = time_min(runs, [&] { for (int i = 0; i < reps; ++i) isa.chunked(piece); });
    std::printf("| %lld | %.2f | %.2f | %.2fx |\n", static_cast<long long>(n), 1e6 * r.cpu / (reps * n),
                1e6 * c.cpu / (reps * n), r.cpu / c.cpu);
  }

  auto backend = kernels::make_backend("cpu");
  const int32_t row_begin[2] = {0, static_cast<int32_t>(rows)}, slot = 0, first_position = 0;
  std::printf("\n## one layer, one sequence of %lld rows: ms (wall / process CPU)\n\n| form | wall | cpu |\n|---|---|---|\n",
              static_cast<long long>(rows));
  for (int32_t align : {0, 16}) {
    kernels::RecurrentMeta meta;
    meta.num_seqs = 1, meta.seq_row_begin = row_begin, meta.seq_state_slot = &slot;
    meta.row_snapshot_slot = no_snapshots.data(), meta.seq_first_position = &first_position, meta.resume_align = align;
    const Times t = time_min(runs, [&] {
      backend->gated_delta_rule(qkv.data(), qs, ba.data(), rows, p, meta, state.data(), stride, out.data());
    });
    const std::string form = align == 0 ? "recurrent" : "chunked, C = " + std::to_string(std::min<int64_t>(align, kernels::cpu::kDeltaChunkMax));
    std::printf("| %s | %.2f | %.2f |\n", form.c_str(), 1e3 * t.wall, 1e3 * t.cpu);
  }
  return 0;
}
