// KV storage formats on the GPU (issue #46 item 6), Qwen3-8B shape (36 layers, hidden 4096, 32
// query heads and 8 KV heads of 128, MLP 12288, vocabulary 151936), one run:
//  - decode tok/s per format at batch 1 / 32k context and batch 32 / 8k context, with the ratio
//    to bf16 KV measured in the same run. A decode step is composed from measured kernels: per
//    layer the attention with its prologue and KV write in the format (Backend::attention_from_qkv
//    over a cache of the context's length, as the model calls it) plus the layer's matmuls at the
//    batch's rows (bf16 weights, random), times 36, plus the LM head. Norms, residual adds and
//    sampling (the same in every format, ~2% of a step) are left out: stated in the table.
//  - the attention's KV read rate (the cache's bytes per call over its time) next to the device copy
//    bandwidth measured in the same run: how far each format's reads are from the roofline.
//  - capacity per format from the pool sizing (kv::KvLayout::bytes_per_block, the one source of
//    truth for KV bytes): the GPU's memory x utilization less the weights, in blocks; the longest
//    context at batch 1 and the largest batch at 8k that fit.
// Usage: cuda_kv_bench [--utilization 0.90] [--iters N] [--formats bf16,int8,...]
// TACHYON_TIMELINE_CSV=PREFIX (a -DTACHYON_TIMELINE=1 build): one more call per scenario and format
// recorded on the step timeline, to PREFIX-<format>-b<batch>.csv (bench/cuda/attention_timeline.py).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/step_timeline.h"
#include "kernels/kv_format.h"
#include "kv/kv_cache.h"
#include "backend_timing.h"
#include "check_cuda.h"
#include "copy_bandwidth.h"
#include "timeline_csv.h"

using namespace tachyon;

namespace {

constexpr int64_t kLayers = 36, kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kMlp = 12288,
                  kVocab = 151936, kMaxContext = 40960;
constexpr int32_t kBlock = 16;
constexpr kernels::KvFormat kFormats[] = {kernels::KvFormat::BF16, kernels::KvFormat::F32,  kernels::KvFormat::F16,
                                          kernels::KvFormat::FP8,  kernels::KvFormat::Int8, kernels::KvFormat::Int4,
                                          kernels::KvFormat::Turbo};

struct Scenario {
  const char* name;
  int64_t batch, context;
};

struct AttentionTime {
  double seconds;   // per call
  double kv_bytes;  // of the cache's blocks, per call
};

// One layer's attention (prologue, KV write in `format`, attention) for `batch` decode rows at
// position context - 1, each over its own blocks. timeline_csv: one more call recorded there.
AttentionTime attention_seconds(kernels::Backend& be, kernels::KvFormat format, const Scenario& sc, const float* qkv,
                                const kernels::Weight& q_norm, const kernels::Weight& k_norm,
                                const kernels::RopeTable& rope, float* q, float* k, float* v, float* out, int iters,
                                const std::string& timeline_csv) {
  const int64_t blocks_per_seq = (sc.context + kBlock - 1) / kBlock, blocks = sc.batch * blocks_per_seq;
  kv::KvLayout layout;
  layout.num_layers = 1, layout.num_kv_heads = kKvHeads, layout.head_dim = kHeadDim, layout.block_size = kBlock;
  layout.num_blocks = static_cast<int32_t>(blocks), layout.format = format;
  const size_t k_bytes = static_cast<size_t>(blocks * layout.k_layout().block_bytes),
               v_bytes = static_cast<size_t>(blocks * layout.v_layout().block_bytes);
  void* kc = be.allocate(k_bytes);
  void* vc = be.allocate(v_bytes);
  CHECK_CUDA(cudaMemset(kc, 0, k_bytes));  // zero codes and params: valid records in every format
  CHECK_CUDA(cudaMemset(vc, 0, v_bytes));
  std::vector<int32_t> positions(static_cast<size_t>(sc.batch), static_cast<int32_t>(sc.context - 1)), row_seq,
      tables, offsets = {0};
  for (int64_t s = 0; s < sc.batch; ++s) {
    row_seq.push_back(static_cast<int32_t>(s));
    for (int64_t b = 0; b < blocks_per_seq; ++b) tables.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    offsets.push_back(static_cast<int32_t>(tables.size()));
  }
  const kernels::PagedKv kv{kc, vc, kBlock, kKvHeads, kHeadDim, format};
  const kernels::AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
  const kernels::QkvPrologue p{kHeads, &q_norm, &k_norm, 1e-6f, 0.f, &rope, positions.data()};
  kernels::AttentionParams params;
  params.num_heads = kHeads;
  params.scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
  const auto call = [&] { be.attention_from_qkv(qkv, sc.batch, p, kv, meta, params, q, k, v, out); };
  const double t = time_calls(be, call, iters);
  if (!timeline_csv.empty()) {
    kernels::cuda::timeline_start(1u << 22);
    call();
    write_timeline(kernels::cuda::timeline_stop(),
                   timeline_csv + "-" + std::string(kernels::kv_format_name(format)) + "-b" + std::to_string(sc.batch) +
                       ".csv");
  }
  be.deallocate(kc);
  be.deallocate(vc);
  return {t, static_cast<double>(k_bytes + v_bytes)};
}

}  // namespace

int main(int argc, char** argv) {
  double utilization = 0.90;
  int iters = 20;
  std::vector<kernels::KvFormat> formats(std::begin(kFormats), std::end(kFormats));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--utilization" && i + 1 < argc) utilization = std::atof(argv[++i]);
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--formats" && i + 1 < argc) {
      formats.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, comma - at);
        const auto f = std::find_if(std::begin(kFormats), std::end(kFormats),
                                    [&](kernels::KvFormat k) { return kernels::kv_format_name(k) == name; });
        if (f == std::end(kFormats)) {
          std::fprintf(stderr, "cuda_kv_bench: unknown KV format '%s'\n", name.c_str());
          return 2;
        }
        formats.push_back(*f);
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: cuda_kv_bench [--utilization 0.90] [--iters N] [--formats bf16,int8,...]\n");
      return 2;
    }
  }
  const char* timeline_env = std::getenv("TACHYON_TIMELINE_CSV");
  const std::string timeline_csv = timeline_env ? timeline_env : "";
  if (!timeline_csv.empty() && !kernels::cuda::timeline_built()) {
    std::fprintf(stderr, "TACHYON_TIMELINE_CSV needs a build with -DTACHYON_TIMELINE=1\n");
    return 2;
  }
  if (kernels::cuda_device_count() == 0) {
    std::fprintf(stderr, "cuda_kv_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  auto backend = kernels::make_backend("cuda");
  kernels::Backend& be = *backend;

  // Weights of one layer (every layer's matmuls take the same time) and the LM head.
  const int64_t qkv_rows = (kHeads + 2 * kKvHeads) * kHeadDim;
  const kernels::Weight w_qkv = random_weight(be, qkv_rows, kHidden, 1), w_o = random_weight(be, kHidden, kHeads * kHeadDim, 2),
                        w_gate_up = random_weight(be, 2 * kMlp, kHidden, 3), w_down = random_weight(be, kHidden, kMlp, 4),
                        w_head = random_weight(be, kVocab, kHidden, 5);
  std::vector<float> ones(kHeadDim, 1.f);
  const kernels::Weight q_norm = be.upload_weight(kernels::Weight{ones.data(), DType::F32, 1, kHeadDim});
  const kernels::Weight k_norm = be.upload_weight(kernels::Weight{ones.data(), DType::F32, 1, kHeadDim});
  kernels::RopeTable rope;
  for (int64_t i = 0; i < kHeadDim / 2; ++i)
    rope.inv_freq.push_back(std::pow(1000000.f, -2.f * static_cast<float>(i) / kHeadDim));
  rope.rotary_dim = kHeadDim;

  const int64_t max_batch = 32;
  float* x = random_device_floats(be, static_cast<size_t>(max_batch * kMlp), 11);
  float* qkv = random_device_floats(be, static_cast<size_t>(max_batch * qkv_rows), 12);
  float* y = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * 2 * kMlp) * sizeof(float)));
  float* logits = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * kVocab) * sizeof(float)));
  float* q = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * kHeads * kHeadDim) * sizeof(float)));
  float* k = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * kKvHeads * kHeadDim) * sizeof(float)));
  float* v = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * kKvHeads * kHeadDim) * sizeof(float)));
  float* out = static_cast<float*>(be.allocate(static_cast<size_t>(max_batch * kHeads * kHeadDim) * sizeof(float)));

  const double copy_gbps = measure_copy_gbps();
  std::printf("# KV formats, Qwen3-8B shape, %s (%.1f GiB)\n\ndevice copy %.0f GB/s (read+write): the KV read rate's "
              "roofline\n\n",
              prop.name, prop.totalGlobalMem / 1073741824.0, copy_gbps);
  const Scenario scenarios[] = {{"batch 1, 32k context", 1, 32768}, {"batch 32, 8k context", 32, 8192}};
  for (const Scenario& sc : scenarios) {
    // The format-independent part of a step: the layer's matmuls x 36 and the LM head.
    const double t_layer_mm = time_calls(be, [&] {
      be.matmul(x, sc.batch, w_qkv, nullptr, y);
      be.matmul(x, sc.batch, w_o, nullptr, y);
      be.matmul(x, sc.batch, w_gate_up, nullptr, y);
      be.matmul(x, sc.batch, w_down, nullptr, y);
    }, iters);
    const double t_head = time_calls(be, [&] { be.matmul(x, sc.batch, w_head, nullptr, logits); }, iters);
    const double t_fixed = kLayers * t_layer_mm + t_head;
    std::printf("## %s\n\nmatmuls per layer %.1f us, LM head %.1f us (every format)\n\n", sc.name, t_layer_mm * 1e6,
                t_head * 1e6);
    std::printf("| KV format | attention + KV write per layer (us) | KV read GB/s | of copy | step (ms) | tok/s | vs %s KV |\n"
                "|---|---|---|---|---|---|---|\n",
                std::string(kernels::kv_format_name(formats.front())).c_str());
    double first_tps = 0;
    for (const kernels::KvFormat f : formats) {
      const AttentionTime a = attention_seconds(be, f, sc, qkv, q_norm, k_norm, rope, q, k, v, out, iters, timeline_csv);
      const double step = t_fixed + kLayers * a.seconds, tps = static_cast<double>(sc.batch) / step;
      if (first_tps == 0) first_tps = tps;
      const double gbps = a.kv_bytes / a.seconds / 1e9;
      std::printf("| %s | %.1f | %.0f | %.1f%% | %.3f | %.1f | %.3fx |\n", std::string(kernels::kv_format_name(f)).c_str(),
                  a.seconds * 1e6, gbps, 100 * gbps / copy_gbps, step * 1e3, tps, tps / first_tps);
      std::fflush(stdout);
    }
    std::printf("\n");
  }

  // Capacity from the pool sizing: utilization x the GPU's memory, less the weights (bf16).
  const double weight_bytes =
      2.0 * (kLayers * (static_cast<double>(qkv_rows) * kHidden + kHidden * kHeads * kHeadDim + 3.0 * kMlp * kHidden) +
             2.0 * kVocab * kHidden);
  const double pool = utilization * static_cast<double>(prop.totalGlobalMem) - weight_bytes;
  std::printf("## capacity: %.2f x %.1f GiB - %.1f GiB of bf16 weights = %.1f GiB of KV pool (activations not subtracted)\n\n",
              utilization, prop.totalGlobalMem / 1073741824.0, weight_bytes / 1073741824.0, pool / 1073741824.0);
  std::printf("| KV format | bytes / token (36 layers) | vs bf16 | longest context, batch 1 | largest batch at 8k |\n|---|---|---|---|---|\n");
  const auto bytes_per_block = [](kernels::KvFormat f) {
    kv::KvLayout layout;
    layout.num_layers = kLayers, layout.num_kv_heads = kKvHeads, layout.head_dim = kHeadDim, layout.block_size = kBlock;
    layout.format = f;
    return static_cast<double>(layout.bytes_per_block());
  };
  const double bf16_bytes = bytes_per_block(kernels::KvFormat::BF16) / kBlock;
  for (const kernels::KvFormat f : formats) {
    const double per_block = bytes_per_block(f), per_token = per_block / kBlock;
    const int64_t blocks = static_cast<int64_t>(pool / per_block);
    const int64_t longest = blocks * kBlock, batch_8k = blocks / ((8192 + kBlock - 1) / kBlock);
    std::printf("| %s | %.0f | %.3fx | %lld tokens%s | %lld |\n", std::string(kernels::kv_format_name(f)).c_str(),
                per_token, per_token / bf16_bytes, static_cast<long long>(longest),
                longest >= kMaxContext ? " (model max 40960)" : "", static_cast<long long>(batch_8k));
  }
  for (float* p : {x, qkv, y, logits, q, k, v, out}) be.deallocate(p);
  return 0;
}
