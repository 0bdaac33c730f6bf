// The gated delta rule on the GPU (issue #51 item 4), Qwen3-Next-80B-A3B's linear-attention layer
// (16 key heads, 32 value heads, k_dim = v_dim = 128, hidden 2048), one run:
//  - decode, one row per sequence at batch 1-64: the call's time against its roofline, the
//    recurrent state read and written once per sequence (2 x 32 x 128 x 128 x 4 B) at the device
//    copy bandwidth measured in the same run;
//  - prefill of one sequence (512-8192 rows, no snapshots): time per row against the same
//    layer's projections at those rows (in_proj_qkvz, in_proj_ba and out_proj; bf16 weights), the
//    share of the layer the delta rule adds (the MoE MLP after it is left out).
// Usage: cuda_delta_rule_bench [--iters N]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "backend_timing.h"
#include "check_cuda.h"
#include "copy_bandwidth.h"

using namespace tachyon;

namespace {

constexpr int64_t kHidden = 2048, kKeyHeads = 16, kValueHeads = 32, kDim = 128;
constexpr int64_t kQkvWidth = 2 * kKeyHeads * kDim + kValueHeads * kDim;  // q, k, v after the conv
constexpr int64_t kStateFloats = kValueHeads * kDim * kDim;

// One call over `seqs` sequences of `rows_each` rows, each in its own state slot, no snapshots.
struct Call {
  std::vector<int32_t> row_begin, slot, snapshot, first_position;
  kernels::RecurrentMeta meta;
  Call(int64_t seqs, int64_t rows_each) {
    for (int64_t s = 0; s <= seqs; ++s) row_begin.push_back(static_cast<int32_t>(s * rows_each));
    for (int64_t s = 0; s < seqs; ++s) slot.push_back(static_cast<int32_t>(s)), first_position.push_back(0);
    snapshot.assign(static_cast<size_t>(seqs * rows_each), -1);
    meta = {seqs, row_begin.data(), slot.data(), snapshot.data(), first_position.data(), 0};
  }
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: cuda_delta_rule_bench [--iters N]\n");
      return 2;
    }
  }
  if (kernels::cuda_device_count() == 0) {
    std::fprintf(stderr, "cuda_delta_rule_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  auto backend = kernels::make_backend("cuda");
  kernels::Backend& be = *backend;

  const int64_t max_rows = 8192, max_seqs = 64;
  float* qkv = random_device_floats(be, static_cast<size_t>(max_rows * kQkvWidth), 1);
  float* ba = random_device_floats(be, static_cast<size_t>(max_rows * 2 * kValueHeads), 2);
  float* A_log = random_device_floats(be, kValueHeads, 3, 0.5f);
  float* dt_bias = random_device_floats(be, kValueHeads, 4, 0.5f);
  float* state = random_device_floats(be, static_cast<size_t>(max_seqs * kStateFloats), 5, 0.05f);
  float* out = static_cast<float*>(be.allocate(static_cast<size_t>(max_rows * kValueHeads * kDim) * sizeof(float)));
  const kernels::DeltaRuleParams p{kKeyHeads, kValueHeads, kDim, kDim, A_log, dt_bias};

  const double copy_gbps = measure_copy_gbps();
  std::printf("# Gated delta rule, Qwen3-Next-80B-A3B layer shape, %s\n\ndevice copy %.0f GB/s (read+write)\n\n",
              prop.name, copy_gbps);
  std::printf("## Decode: one row per sequence\n\n| sequences | us per call | state GB/s | of copy |\n|---:|---:|---:|---:|\n");
  for (int64_t seqs : {1, 8, 32, 64}) {
    Call c(seqs, 1);
    const double t = time_calls(be, [&] {
      be.gated_delta_rule(qkv, kQkvWidth, ba, seqs, p, c.meta, state, kStateFloats, out);
    }, iters);
    const double gbps = 2.0 * static_cast<double>(seqs * kStateFloats) * sizeof(float) / t / 1e9;
    std::printf("| %lld | %.1f | %.0f | %.3f |\n", static_cast<long long>(seqs), t * 1e6, gbps, gbps / copy_gbps);
  }

  const kernels::Weight w_qkvz = random_weight(be, 2 * kKeyHeads * kDim + 2 * kValueHeads * kDim, kHidden, 11),
                        w_ba = random_weight(be, 2 * kValueHeads, kHidden, 12),
                        w_out = random_weight(be, kHidden, kValueHeads * kDim, 13);
  float* x = random_device_floats(be, static_cast<size_t>(max_rows * kValueHeads * kDim), 14);
  float* y = static_cast<float*>(
      be.allocate(static_cast<size_t>(max_rows * (2 * kKeyHeads * kDim + 2 * kValueHeads * kDim)) * sizeof(float)));
  std::printf("\n## Prefill: one sequence\n\n| rows | delta rule (ms) | us per row | projections (ms) | delta rule / "
              "projections |\n|---:|---:|---:|---:|---:|\n");
  for (int64_t rows : {512, 2048, 8192}) {
    Call c(1, rows);
    const int n = std::max(2, iters / 4);
    const double t = time_calls(be, [&] {
      be.gated_delta_rule(qkv, kQkvWidth, ba, rows, p, c.meta, state, kStateFloats, out);
    }, n);
    const double t_mm = time_calls(be, [&] {
      be.matmul(x, rows, w_qkvz, nullptr, y);
      be.matmul(x, rows, w_ba, nullptr, y);
      be.matmul(x, rows, w_out, nullptr, y);
    }, n);
    std::printf("| %lld | %.3f | %.3f | %.3f | %.2f |\n", static_cast<long long>(rows), t * 1e3, t * 1e6 / rows,
                t_mm * 1e3, t / t_mm);
  }
  return 0;
}
