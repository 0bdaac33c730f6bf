// CUDA engine benchmark (issues 6 and 9): on one GPU, for a model directory (a random-weight
// checkpoint of bench/cuda/make_checkpoint.py: the Qwen3-8B shape, or Qwen3-30B-A3B for MoE),
// each figure next to its roofline measured in the same run:
//   ceilings:  device-to-device copy bandwidth (read + write bytes / s) and the cuBLAS bf16
//              matmul rate on random 8192^3 operands;
//   kernels:   the skinny matmul (decode) at M = 1 on the model's matrix shapes in GB/s of
//              weights, and the tiled matmul (prefill) in TFLOP/s;
//   engine:    prefill tok/s at 512 and 4096 tokens (roofline: matmul rate / FLOPs per token),
//              decode tok/s at batch 1 (roofline: copy bandwidth / bytes per token: weights +
//              KV read) and decode throughput at batch 8, 32, 64.
// MoE checkpoints (config num_experts_per_tok = k): weights and FLOPs count the active
// parameters only (attention, router, k experts per layer, LM head, one embedding row), and
// the dense matmul/attention kernel table is skipped.
// Protocol: one warm-up discarded, median of --runs. Decode steps sample greedily on the
// device (model::StepOutputs::argmax: only token ids come back); batch 1 and 64 are also measured
// with every logit row returned to the host, and batch 1, 8 and 64 sampled (temperature 0.7,
// top-p 0.9) on the device and (1, 8) on the host over returned logits, host draw timed. --profile prints the GPU time per op class of
// one prefill and of decode steps (cudaEvents around every op, docs/perf/cuda.md).
// Usage: cuda_bench [--runs 3] [--json FILE] [--lab] [--profile] [--engine-only: skip the kernel tables]
//                   [--attention-only: the attention table alone] [--decode-only: the decode matmul table, M 1-8]
//                   [--decode-quick: engine decode at batch 1, 4 and 8 only]
//                   [--sampling-only: the device token draw alone]
//                   [--gemm-only: the prefill matmuls per wgmma tile width]
//                   [--gemm-clocks: cuBLAS and ours in blocks, for bench/cuda/gemm_clocks.py] MODEL_DIR
// Env: the CUDA backend's switches (src/kernels/cuda/cuda_options.h), TACHYON_TIMELINE_CSV (below).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/dtype.h"
#include "base/json.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/step_timeline.h"
#include "kernels/token_sampling.h"
#include "model/model.h"
#include "backend_timing.h"
#include "check_cuda.h"
#include "clock_spy.h"
#include "copy_bandwidth.h"
#include "timeline_csv.h"
#ifdef TACHYON_BENCH_ENGINE
#include "engine_decode.h"
#endif

using namespace tachyon;

namespace {

// Uniform in [-a, a] with a = sigma·sqrt(3) (the same variance as N(0, sigma²)); a cheap
// generator, since the LM head alone is 622M values.
std::vector<uint16_t> random_bf16(size_t n, float sigma, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const float a = sigma * 1.7320508f;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = f32_to_bf16((static_cast<float>(s >> 40) / 16777216.f * 2.f - 1.f) * a);
  }
  return v;
}

// Median over `reps` of the time of `iters` back-to-back calls of f, timed with events.
template <typename F>
double time_events(F&& f, int iters, int reps = 5) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  f();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < iters; ++i) f();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 1e3 / iters);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

// bf16 values copied into new device memory (cudaFree it).
void* device_bf16(const std::vector<uint16_t>& host) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, host.size() * 2));
  CHECK_CUDA(cudaMemcpy(p, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  return p;
}

// out [m, n] = a [m, k] · b [n, k]^T by cuBLAS, bf16 operands, fp32 accumulation, out in
// `out_type`; column-major: out^T [n, m] = b · a^T.
void cublas_bf16_gemm(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* out,
                      cudaDataType out_type) {
  const float one = 1.f, zero = 0.f;
  if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, CUDA_R_16BF, int(k), a, CUDA_R_16BF,
                   int(k), &zero, out, out_type, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasGemmEx failed\n");
    std::exit(1);
  }
}

// cuBLAS's rate on out [m, n] = a [m, k] · b [n, k]^T with bf16 operands and fp32 accumulation,
// out in `out_type`.
double cublas_bf16_tflops(int64_t m, int64_t n, int64_t k, cudaDataType out_type) {
  void* a = device_bf16(random_bf16(size_t(m * k), 1.f, 1));
  void* b = device_bf16(random_bf16(size_t(n * k), 1.f, 3));
  void* c;
  CHECK_CUDA(cudaMalloc(&c, size_t(m * n) * (out_type == CUDA_R_32F ? 4 : 2)));
  cublasHandle_t h;
  cublasCreate(&h);
  const auto gemm = [&] { cublas_bf16_gemm(h, m, n, k, a, b, c, out_type); };
  gemm();
  gemm();
  const double s = time_events(gemm, 10);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * m * n * double(k) / s / 1e12;
}

// The prefill roofline's matmul rate: cuBLAS at 8192^3, bf16 out.
double measure_cublas_bf16_tflops() { return cublas_bf16_tflops(8192, 8192, 8192, CUDA_R_16BF); }

struct Shape {
  const char* name;
  int64_t n, k;
};

}  // namespace

// Attention of one layer of the config's shape over a paged cache of random K and V: decode rows
// at context 256, and prefills of 512 and 4096 tokens. Needs only config.json (--attention-only
// loads no weights: a profiler run of it takes seconds).
void attention_table(kernels::Backend& backend, const io::ModelConfig& c, bool lab, Json& rows) {
  const int64_t heads = c.num_attention_heads, kvh = c.num_key_value_heads, d = c.head_dim, bs = 16;
  const int64_t blocks = 4096 / bs * 2, max_rows = 4096;
  float* q = random_device_floats(backend, size_t(max_rows * heads * d), 1);
  float* kc = random_device_floats(backend, size_t(blocks * bs * kvh * d), 2);
  float* vc = random_device_floats(backend, size_t(blocks * bs * kvh * d), 3);
  float* out = static_cast<float*>(backend.allocate(size_t(max_rows * heads * d) * sizeof(float)));
  std::printf("\n| attention (one layer) | rows | context | time us | TFLOP/s | KV GB/s |\n|---|---|---|---|---|---|\n");
  for (auto [nseq, rows_per_seq, ctx] : {std::tuple{1, 1, 256}, {64, 1, 256}, {1, 512, 512}, {1, 4096, 4096}}) {
    std::vector<int32_t> positions, row_seq, tables, offsets = {0};
    for (int sq = 0; sq < nseq; ++sq) {
      for (int64_t b = 0; b < ctx / bs + 1; ++b) tables.push_back(static_cast<int32_t>((sq * 17 + b) % blocks));
      offsets.push_back(static_cast<int32_t>(tables.size()));
      for (int r = 0; r < rows_per_seq; ++r) positions.push_back(ctx - rows_per_seq + r), row_seq.push_back(sq);
    }
    const int64_t nrows = static_cast<int64_t>(positions.size());
    kernels::PagedKv pkv{kc, vc, static_cast<int32_t>(bs), kvh, d};
    kernels::AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
    kernels::AttentionParams p;
    p.num_heads = heads;
    p.scale = 0.088f;
    double flops = 0, kv_bytes = 0;
    for (int32_t pos : positions) flops += 4.0 * heads * d * (pos + 1);
    for (int sq = 0; sq < nseq; ++sq) kv_bytes += 2.0 * ctx * kvh * d * 4;
    // Query-tile variants (warps per CTA x chunk buffers) in the lab; the default last.
    std::vector<std::pair<int, int>> variants = {{8, 2}};
    if (lab && rows_per_seq > 1) variants = {{2, 1}, {2, 2}, {8, 1}, {8, 2}};
    for (auto [warps, stages] : variants) {
      kernels::cuda::set_attention_tile_variant(warps, stages);
      const double t = time_calls(backend, [&] { backend.attention(q, nrows, pkv, meta, p, out); }, 5);
      const std::string what = variants.size() > 1 ? fmt::format("prefill {}x{}", warps, stages)
                                                   : std::string(rows_per_seq == 1 ? "decode" : "prefill");
      std::printf("| %s | %ld | %ld | %.1f | %.2f | %.0f |\n", what.c_str(), long(nrows), long(ctx), t * 1e6,
                  flops / t / 1e12, kv_bytes / t / 1e9);
      rows.push_back({{"op", "attention"}, {"rows", nrows}, {"context", ctx}, {"warps", warps}, {"stages", stages},
                      {"seconds", t}, {"tflops", flops / t / 1e12}});
    }
  }
  for (float* buffer : {q, kc, vc, out}) backend.deallocate(buffer);
}

// Backend::sample_tokens alone over 151936-logit rows (Qwen's vocabulary), per call, next to the
// device argmax of the same rows: a flat row (what the random-weight benchmark model gives) and a
// peaked one (40 tokens far above the bulk, what a trained model gives).
int sampling_table(kernels::Backend& backend) {
  const int64_t n = 151936;
  std::printf("| sample_tokens, %lld logits | rows | us per call | x argmax |\n|---|---|---|---|\n",
              static_cast<long long>(n));
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const bool peaked : {false, true}) {
    for (const int64_t rows : {1, 8, 64}) {
      std::vector<float> logits(static_cast<size_t>(rows * n));
      for (auto& v : logits) v = normal(rng) * (peaked ? 2.f : 1.f);
      if (peaked)
        for (int64_t r = 0; r < rows; ++r)
          for (int j = 0; j < 40; ++j) logits[r * n + rng() % n] = 12.f + 3.f * normal(rng);
      auto* x = static_cast<float*>(backend.allocate(logits.size() * sizeof(float)));
      auto* ids = static_cast<int32_t*>(backend.allocate(rows * sizeof(int32_t)));
      backend.copy_to_device(x, logits.data(), logits.size() * sizeof(float));
      const auto per_call = [&](auto&& f) { return time_calls(backend, f, 20) * 1e6; };  // us
      const double argmax_us = per_call([&] { backend.argmax(x, rows, n, ids); });
      struct Setting {
        const char* name;
        float temperature, top_p;
        int32_t top_k;
      };
      for (const Setting& st : {Setting{"temperature 0.7, top-p 0.9", 0.7f, 0.9f, 0},
                                Setting{"temperature 1", 1.f, 1.f, 0}, Setting{"temperature 0.8, top-k 50", 0.8f, 1.f, 50}}) {
        std::vector<kernels::TokenSampling> params(static_cast<size_t>(rows));
        for (auto& p : params) p.temperature = st.temperature, p.top_p = st.top_p, p.top_k = st.top_k, p.u = 0.37;
        const double us = per_call([&] { backend.sample_tokens(x, rows, n, params.data(), ids); });
        std::printf("| %s row, %s | %lld | %.1f | %.1fx (argmax %.1f us) |\n", peaked ? "peaked" : "flat", st.name,
                    static_cast<long long>(rows), us, us / argmax_us, argmax_us);
      }
      backend.deallocate(x);
      backend.deallocate(ids);
    }
  }
  return 0;
}

// --gemm-only: the prefill matmuls of the model's shapes (config.json only) at 512 and 4096 rows, at
// each wgmma tile width and the width chosen by shape, next to cuBLAS's rate of the same run.
int prefill_gemm_table(kernels::Backend& backend, const io::ModelConfig& c, double mm_tflops) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size, q_dim = c.num_attention_heads * c.head_dim,
                kv_dim = c.num_key_value_heads * c.head_dim;
  const Shape shapes[] = {{"qkv_proj", q_dim + 2 * kv_dim, h}, {"o_proj", h, q_dim}, {"gate_up", 2 * inter, h},
                          {"down", h, inter}};
  float* x = random_device_floats(backend, size_t(4096) * inter, 5);
  auto* out = static_cast<float*>(backend.allocate(size_t(4096) * 2 * inter * sizeof(float)));
  std::printf("| prefill matmul [n x k] | M | tile columns | time us | TFLOP/s | of cuBLAS %.0f |\n|---|---|---|---|---|---|\n",
              mm_tflops);
  for (const auto& s : shapes) {
    const auto host = random_bf16(size_t(s.n * s.k), 0.02f, 2);
    const kernels::Weight w = backend.upload_weight(kernels::Weight{host.data(), DType::BF16, s.n, s.k});
    for (int64_t m : {512, 4096}) {
      // cuBLAS on the same shape (bf16 operands, fp32 out as ours; no batch-invariance constraint):
      // what the hardware gives these shapes, next to the 8192^3 denominator.
      const double cublas = cublas_bf16_tflops(m, s.n, s.k, CUDA_R_32F);
      std::printf("| %s [%ld x %ld] | %ld | cuBLAS | %.1f | %.1f | %.1f%% |\n", s.name, long(s.n), long(s.k), long(m),
                  2.0 * m * s.n * s.k / cublas / 1e6, cublas, 100 * cublas / mm_tflops);
      for (int cols : {128, 192, 128, 192, 0}) {  // each width twice, alternating: clocks drift within a run
        kernels::cuda::set_wgmma_columns(cols);
        const double t = time_calls(backend, [&] { backend.matmul(x, m, w, nullptr, out); }, m == 512 ? 20 : 5);
        const double tflops = 2.0 * m * s.n * s.k / t / 1e12;
        const std::string width = cols ? std::to_string(cols)
                                       : fmt::format("by shape: {}", kernels::cuda::wgmma_columns_for(m, s.n));
        std::printf("| %s [%ld x %ld] | %ld | %s | %.1f | %.1f | %.1f%% |\n", s.name, long(s.n), long(s.k), long(m),
                    width.c_str(), t * 1e6, tflops, 100 * tflops / mm_tflops);
      }
    }
  }
  kernels::cuda::set_wgmma_columns(0);
  backend.deallocate(x);
  backend.deallocate(out);
  return 0;
}

// Wall-clock time as nvidia-smi's timestamps print it (local time, milliseconds).
std::string wall_stamp() {
  const auto t = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&secs, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y/%m/%d %H:%M:%S", &local);
  return fmt::format("{}.{:03d}", buf, static_cast<int>(ms));
}

// --gemm-clocks: cuBLAS and our prefill GEMM on the same bf16 operands (4096 rows of the model's
// gate_up and o shapes) in alternating blocks of ~1.5 s, each block's wall-clock span printed, so
// that nvidia-smi sampling meanwhile (bench/cuda/gemm_clocks.py) gives each block's SM clock and
// board power. FLOPs per SM cycle then tell a kernel that is slower per cycle from one whose clock
// the power cap holds lower (docs/perf/cuda.md: the cap, not measured per kernel).
int gemm_clock_blocks(kernels::Backend& backend, const io::ModelConfig& c) {
  const int64_t m = 4096, h = c.hidden_size, inter = c.intermediate_size, q_dim = c.num_attention_heads * c.head_dim;
  const Shape shapes[] = {{"gate_up", 2 * inter, h}, {"o_proj", h, q_dim}};
  // cuBLAS on a stream of its own, synchronised as the backend's is: on the legacy default stream
  // the backend's synchronize (its own non-blocking stream) did not wait for it, so cuBLAS's calls
  // queued up, counted before they ran, and ran on into the next block.
  cublasHandle_t handle;
  cublasCreate(&handle);
  cudaStream_t cublas_stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&cublas_stream, cudaStreamNonBlocking));
  cublasSetStream(handle, cublas_stream);
  std::printf("| shape [n x k], M %ld | kernel | start | end | calls | TFLOP/s | SM MHz seen by a spy warp | spy late s | "
              "FLOP per SM cycle |\n|---|---|---|---|---|---|---|---|---|\n",
              long(m));
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The spy warp takes a slot on one SM, which a persistent kernel (ours, likely cuBLAS's) needs for
  // one of its CTAs: it slowed our GEMM by a third. Off unless TACHYON_CLOCK_SPY=1.
  const char* spy_env = std::getenv("TACHYON_CLOCK_SPY");
  std::optional<ClockSpy> spy;
  if (spy_env && std::string(spy_env) == "1") spy.emplace();
  for (const auto& s : shapes) {
    // x: bf16 values (ours reads them as f32 and rounds them to the same bf16), the weight's bits
    // shared: both kernels multiply the same numbers.
    const auto x_bf16 = random_bf16(size_t(m * s.k), 1.f, 1), w_bf16 = random_bf16(size_t(s.n * s.k), 0.02f, 2);
    std::vector<float> x_f32(x_bf16.size());
    for (size_t i = 0; i < x_f32.size(); ++i) x_f32[i] = bf16_to_f32(x_bf16[i]);
    auto* x = static_cast<float*>(backend.allocate(x_f32.size() * sizeof(float)));
    backend.copy_to_device(x, x_f32.data(), x_f32.size() * sizeof(float));
    auto* out = static_cast<float*>(backend.allocate(size_t(m * s.n) * sizeof(float)));
    const kernels::Weight w = backend.upload_weight(kernels::Weight{w_bf16.data(), DType::BF16, s.n, s.k});
    void* a = device_bf16(x_bf16);
    void* b = device_bf16(w_bf16);
    const auto cublas = [&] { cublas_bf16_gemm(handle, m, s.n, s.k, a, b, out, CUDA_R_32F); };  // f32 out as ours
    const auto ours = [&] { backend.matmul(x, m, w, nullptr, out); };
    const auto sync_cublas = [&] { CHECK_CUDA(cudaStreamSynchronize(cublas_stream)); };
    const auto sync_ours = [&] { backend.synchronize(); };
    const auto block = [&](const char* name, const auto& f, const auto& sync) {
      f();
      sync();
      const std::string start = wall_stamp();
      if (spy) spy->start(1.4);  // inside the block's 1.5 s
      const double t0 = now();
      int calls = 0;
      while (now() - t0 < 1.5) {
        for (int i = 0; i < 5; ++i) f();
        sync();
        calls += 5;
      }
      const double seconds = now() - t0;
      const std::string end = wall_stamp();
      const ClockSpyReading clock = spy ? spy->finish() : ClockSpyReading{};
      const double tflops = 2.0 * m * s.n * s.k * calls / seconds / 1e12;
      std::printf("| %s [%ld x %ld] | %s | %s | %s | %d | %.1f | %.0f | %.2f | %.0f |\n", s.name, long(s.n), long(s.k),
                  name, start.c_str(), end.c_str(), calls, tflops, clock.mhz, clock.late_s,
                  spy ? tflops * 1e12 / (sms * clock.mhz * 1e6) : 0.0);
      std::fflush(stdout);
    };
    for (int rep = 0; rep < 3; ++rep) {
      block("cuBLAS", cublas, sync_cublas);
      block("ours", ours, sync_ours);
    }
    cudaFree(a);
    cudaFree(b);
    backend.deallocate(x);
    backend.deallocate(out);
  }
  cublasDestroy(handle);
  CHECK_CUDA(cudaStreamDestroy(cublas_stream));
  return 0;
}

int main(int argc, char** argv) {
  int runs = 3, decode_variant = kernels::cuda::kDecodeAuto;
  bool lab = false, profile = false, engine_only = false, attention_only = false, decode_only = false,
       decode_quick = false, prefill_quick = false, sampling_only = false, gemm_only = false, gemm_clocks = false;
  std::string json_path, dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[++i]);
    else if (a == "--json") json_path = argv[++i];
    else if (a == "--decode-variant") decode_variant = std::atoi(argv[++i]);
    else if (a == "--lab") lab = true;
    else if (a == "--profile") profile = true;
    else if (a == "--engine-only") engine_only = true;
    else if (a == "--attention-only") attention_only = true;
    else if (a == "--decode-only") decode_only = true;
    else if (a == "--sampling-only") sampling_only = true;
    else if (a == "--gemm-only") gemm_only = true;  // the prefill matmul table per wgmma tile width
    else if (a == "--gemm-clocks") gemm_clocks = true;  // cuBLAS and ours in timed blocks, for nvidia-smi
    else if (a == "--prefill-quick") prefill_quick = true;  // engine prefill at 512 and 4096 only (A/B runs)
    else if (a == "--decode-quick") decode_quick = true;  // engine decode at batch 1 and 8 only (A/B runs)  // the decode matmul table (M = 1, 8), then exit
    else dir = a;
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: cuda_bench [--runs N] [--json FILE] MODEL_DIR\n");
    return 2;
  }
  auto backend = kernels::make_backend("cuda");
  if (sampling_only) return sampling_table(*backend);
  if (attention_only) {
    Json rows = Json::array();
    attention_table(*backend, io::load_model_config(dir), lab, rows);
    return 0;
  }
  if (gemm_only) return prefill_gemm_table(*backend, io::load_model_config(dir), measure_cublas_bf16_tflops());
  if (gemm_clocks) return gemm_clock_blocks(*backend, io::load_model_config(dir));
  std::fprintf(stderr, "measuring ceilings on %s...\n", backend->name().c_str());
  const double copy_gbps = measure_copy_gbps();
  const double mm_tflops = measure_cublas_bf16_tflops();
  Json report = {{"backend", backend->name()},
                 {"copy_gbps", copy_gbps},
                 {"cublas_bf16_tflops", mm_tflops},
                 {"protocol", fmt::format("1 warm-up discarded, median of {}", runs)}};
  std::printf("\n%s: device copy %.0f GB/s (read+write), cuBLAS bf16 8192^3 %.0f TFLOP/s\n\n", backend->name().c_str(),
              copy_gbps, mm_tflops);

  kernels::cuda::set_decode_matmul_variant(decode_variant);
  auto model = model::load_model(dir, *backend);
  const auto& c = model->config();
  const int64_t h = c.hidden_size, inter = c.intermediate_size, q_dim = c.num_attention_heads * c.head_dim,
                kv_dim = c.num_key_value_heads * c.head_dim;
  const int64_t top_k = c.raw.contains("num_experts_per_tok") ? io::json_int(c.raw, "num_experts_per_tok", dir) : 0;
  report["layers"] = c.num_hidden_layers;
  report["experts_per_token"] = top_k;

  // Kernels on the model's (dense) shapes, weights random, x random.
  if (top_k == 0 && !engine_only) {
    std::printf("| matmul [n x k] | M | time us | weights GB/s | TFLOP/s |\n|---|---|---|---|---|\n");
    Json rows = Json::array();
    const Shape shapes[] = {{"qkv_proj", q_dim + 2 * kv_dim, h}, {"q_proj", q_dim, h}, {"k_proj", kv_dim, h},
                            {"o_proj", h, q_dim}, {"gate_up", 2 * inter, h}, {"down", h, inter},
                            {"lm_head", c.vocab_size, h}};
    float* x = random_device_floats(*backend, size_t(4096) * 2 * inter, 5);
    float* out = static_cast<float*>(backend->allocate(size_t(4096) * c.vocab_size * sizeof(float)));
    auto time_backend = [&](auto&& f, int iters) { return time_calls(*backend, f, iters); };
    for (const auto& s : shapes) {
      const auto host = random_bf16(size_t(s.n * s.k), 0.02f, 2);
      const kernels::Weight w = backend->upload_weight(kernels::Weight{host.data(), DType::BF16, s.n, s.k});
      std::vector<int> variants = {kernels::cuda::kDecodeWide, kernels::cuda::kDecodeSplitK,
                                   kernels::cuda::kDecodeStream, kernels::cuda::kDecodeBatched,
                                   kernels::cuda::kDecodeBatchedWhole};
      if (lab)
        variants.insert(variants.end(), {kernels::cuda::kDecodeMedium, kernels::cuda::kDecodeNarrow,
                                         kernels::cuda::kDecodeStaged, kernels::cuda::kDecodeWideDeep,
                                         kernels::cuda::kDecodeMediumDeep, kernels::cuda::kDecodeSplitKShared});
      for (int variant : variants) {
        kernels::cuda::set_decode_matmul_variant(variant);
        for (int64_t m : {1, 2, 4, 8, 32, 64}) {
          if (decode_only ? m > 8 : m == 2 || m == 4) continue;
          // The batched variants serve 17-64 rows only; kDecodeWide at 17-64 rows is the skinny
          // kernel over A fragments.
          const bool batched =
              variant == kernels::cuda::kDecodeBatched || variant == kernels::cuda::kDecodeBatchedWhole;
          if ((m <= 16 && batched) || (m > 8 && variant == kernels::cuda::kDecodeStream)) continue;
          const double t = time_backend([&] { backend->matmul(x, m, w, nullptr, out); }, 50);
          std::printf("| %s [%ld x %ld] decode variant %d | %ld | %.1f | %.0f | |\n", s.name, long(s.n), long(s.k),
                      variant, long(m), t * 1e6, s.n * s.k * 2.0 / t / 1e9);
          rows.push_back({{"matrix", s.name}, {"variant", variant}, {"m", m}, {"seconds", t}});
        }
      }
      kernels::cuda::set_decode_matmul_variant(decode_variant);
      for (int64_t m : {1, 8, 32, 64, 512, 4096}) {
        if ((m > 512 && std::string(s.name) == "lm_head") || (decode_only && m > 8)) continue;
        const double t = time_backend([&] { backend->matmul(x, m, w, nullptr, out); }, m <= 64 ? 50 : 5);
        const double gbps = s.n * s.k * 2.0 / t / 1e9, tflops = 2.0 * m * s.n * s.k / t / 1e12;
        std::printf("| %s [%ld x %ld] | %ld | %.1f | %.0f | %.1f |\n", s.name, long(s.n), long(s.k), long(m), t * 1e6,
                    gbps, tflops);
        rows.push_back({{"matrix", s.name}, {"n", s.n}, {"k", s.k}, {"m", m}, {"seconds", t}, {"weight_gbps", gbps},
                        {"tflops", tflops}});
      }
    }
    if (decode_only) return 0;
    attention_table(*backend, c, lab, rows);
    report["matmul"] = rows;
    backend->deallocate(x);
    backend->deallocate(out);
  }

  // Bytes and FLOPs the model must move per token: every tensor once, except the embedding
  // table when untied (one row gathered) and, in MoE layers, the experts a token is not routed
  // to (all experts have one size, so experts 0..k-1 stand for any k).
  double weight_bytes = 0, matmul_params = 0, head_params = 0;
  const auto checkpoint = io::Checkpoint::open(dir);
  for (const auto& [name, t] : checkpoint.tensors()) {
    const bool embed = name == "model.embed_tokens.weight", head = name == "lm_head.weight";
    if (embed && !c.tie_word_embeddings) {
      weight_bytes += double(t.num_bytes) / double(t.shape[0]);
      continue;
    }
    if (const auto at = name.find(".experts."); at != std::string::npos &&
                                                std::atoll(name.c_str() + at + 9) >= top_k)
      continue;
    weight_bytes += double(t.num_bytes);
    if (t.shape.size() == 2) (embed || head ? head_params : matmul_params) += double(t.num_elements());
  }
  std::printf("active weight bytes per token: %.3f GB (%ld layers%s)\n", weight_bytes / 1e9,
              long(c.num_hidden_layers), top_k ? fmt::format(", {} experts per token", top_k).c_str() : "");
  const double kv_bytes_per_position = 2.0 * c.num_hidden_layers * kv_dim * sizeof(float);  // f32 K and V

  const int max_batch = 64, prompt_len = 128, decode_steps = 16;
  kv::KvCache kv(*backend, model->kv_layout((4096 + max_batch * (prompt_len + (runs + 1) * decode_steps + 32)) / 16 + 64));
  std::mt19937 rng(0);
  auto random_ids = [&](int n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
    return ids;
  };

  std::printf("\n| figure | measured | roofline | ratio |\n|---|---|---|---|\n");
  Json engine = Json::object();
  for (int tokens : {512, 4096}) {
    if (decode_quick) break;
    const auto prompt = random_ids(tokens);
    std::vector<double> tps;
    for (int r = 0; r <= runs + (profile ? 1 : 0); ++r) {  // the extra run is profiled
      auto seq = kv.add_sequence();
      kv.reserve(seq, tokens);
      model::Batch batch;
      batch.add(seq, prompt, 0, model::LogitRows::Last);
      const double t0 = now();
      if (r == runs + 1) kernels::cuda_profile_enable(*backend, true);
      model->forward(batch, kv);
      const double s = now() - t0;
      if (r == runs + 1) {
        kernels::cuda_profile_enable(*backend, false);
        std::printf("\nprofile, prefill %d (GPU time per op; events serialise the stream)\n%s\n", tokens,
                    kernels::cuda_profile_report(*backend).c_str());
      }
      kv.remove_sequence(seq);
      if (r > 0 && r <= runs) tps.push_back(tokens / s);
    }
    const double attn = 4.0 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * (tokens + 1) / 2.0;
    const double flops = 2.0 * matmul_params + attn + 2.0 * head_params / tokens;
    const double roof = mm_tflops * 1e12 / flops, p = median(tps);
    std::printf("| prefill %d tok/s | %.0f | %.0f | %.1f%% |\n", tokens, p, roof, 100 * p / roof);
    engine["prefill_" + std::to_string(tokens)] = {{"tok_s", p}, {"runs", tps}, {"flops_per_token", flops},
                                                   {"roofline_tok_s", roof}, {"ratio", p / roof}};
  }

  if (prefill_quick) return 0;
  double batch1 = 0;
  std::map<int, double> greedy_tps;  // by batch: what the other token choices compare with
  // How a decode step's tokens are chosen: greedy on the device (the engine's plain greedy steps),
  // greedy over logits returned to the host, sampled on the device (Batch::sampling: temperature
  // 0.7, top-p 0.9), or sampled on the host over returned logits (what the engine did before
  // the device kernel; the host draw is timed too).
  // Overlapped: greedy on the device, each step issued before the last one's tokens are read, its
  // rows reading them on the device (the engine's overlapped decoding, EngineConfig::overlap_steps).
  enum class Tokens { DeviceArgmax, HostLogits, DeviceSampled, HostSampled, Overlapped };
  struct DecodeCase {
    int batch;
    Tokens tokens;
  };
  const auto sampling_at = [](double u) {
    kernels::TokenSampling s;
    s.temperature = 0.7f, s.top_p = 0.9f, s.u = u;
    return s;
  };
  std::mt19937_64 draws(11);
  const char* timeline_csv = std::getenv("TACHYON_TIMELINE_CSV");
  if (timeline_csv && !kernels::cuda::timeline_built()) {
    std::fprintf(stderr, "TACHYON_TIMELINE_CSV needs a build with -DTACHYON_TIMELINE=1\n");
    return 2;
  }
  for (auto [b, tokens] : {DecodeCase{1, Tokens::DeviceArgmax}, DecodeCase{1, Tokens::Overlapped},
                           DecodeCase{1, Tokens::HostLogits}, DecodeCase{1, Tokens::DeviceSampled},
                           DecodeCase{1, Tokens::HostSampled}, DecodeCase{4, Tokens::DeviceArgmax},
                           DecodeCase{8, Tokens::DeviceArgmax}, DecodeCase{8, Tokens::Overlapped},
                           DecodeCase{8, Tokens::DeviceSampled}, DecodeCase{8, Tokens::HostSampled},
                           DecodeCase{32, Tokens::DeviceArgmax}, DecodeCase{64, Tokens::DeviceArgmax},
                           DecodeCase{64, Tokens::Overlapped}, DecodeCase{64, Tokens::HostLogits},
                           DecodeCase{64, Tokens::DeviceSampled}}) {
    const bool argmax = tokens == Tokens::DeviceArgmax, overlapped = tokens == Tokens::Overlapped;
    if (decode_quick ? !(argmax || overlapped) || b > 8 : b == 4) continue;  // batch 4 (a verification's rows): quick runs
    const bool host_logits = tokens == Tokens::HostLogits || tokens == Tokens::HostSampled;
    std::vector<kv::SeqId> seqs;
    std::vector<int32_t> pos(static_cast<size_t>(b), prompt_len), next(static_cast<size_t>(b));
    model::Batch batch;
    for (int i = 0; i < b; ++i) {
      seqs.push_back(kv.add_sequence());
      kv.reserve(seqs.back(), prompt_len);
      batch.add(seqs.back(), random_ids(prompt_len), 0, model::LogitRows::Last);
    }
    batch.outputs = model::StepOutputs::argmax();
    auto out = model->forward(batch, kv);
    std::vector<double> tps;
    const bool profile_case = profile && !host_logits && !overlapped;
    // Where a timed step's host time went: issuing the recorded ops (graph replay), waiting for the
    // device, and the rest (the model's host code recording the step, the batch, the host draw),
    // during which the device idles: the step's graph runs only once it is recorded.
    kernels::CudaGraphCounters graphs_before{}, graphs_after{};
    double timed_seconds = 0;
    // TACHYON_TIMELINE_CSV (a TACHYON_TIMELINE build): one more run of greedy steps at each batch up to
    // 8 with the step timeline recorded, written to <value>-b<batch>.csv (-overlapped.csv: the overlapped
    // steps; bench/cuda/decode_timeline.py).
    const int timeline_run = timeline_csv && (argmax || overlapped) && b <= 8 ? runs + (profile_case ? 2 : 1) : -1;
    for (int r = 0; r <= std::max(runs + (profile_case ? 1 : 0), timeline_run); ++r) {  // extra: profiled, timeline
      if (r == 1) graphs_before = kernels::cuda_graph_counters(*backend);
      if (r == timeline_run) kernels::cuda::timeline_start(1u << 24);
      double s = 0;  // forward time (a host argmax over returned logits is the benchmark's), plus a host draw
      const double t_run = now();
      for (int step = 0; step < decode_steps; ++step) {
        batch.clear();
        const double t_draw = now();
        if (overlapped && step > 0) {  // the rows read the last step's tokens where it left them
          static constexpr int32_t kOnDevice = 0;
          for (int i = 0; i < b; ++i) {
            kv.reserve(seqs[i], pos[i] + 1);
            batch.add(seqs[i], std::span<const int32_t>(&kOnDevice, 1), pos[i]++, model::LogitRows::Last);
          }
          batch.device_tokens = out.device_ids;
        }
        for (int i = 0; i < b && !batch.device_tokens; ++i) {
          if (out.argmax.empty()) {
            const std::span<const float> row(out.logits.data() + size_t(i) * c.vocab_size, size_t(c.vocab_size));
            next[i] = tokens == Tokens::HostSampled
                          ? kernels::sample_token(row, sampling_at(double(draws() >> 11) * 0x1p-53))
                          : static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
          } else {
            next[i] = out.argmax[i];
          }
          kv.reserve(seqs[i], pos[i] + 1);
          batch.add(seqs[i], std::span<const int32_t>(&next[i], 1), pos[i]++, model::LogitRows::Last);
        }
        if (tokens == Tokens::HostSampled) s += now() - t_draw;
        if (tokens == Tokens::DeviceSampled) {
          batch.outputs.tokens = model::StepOutputs::Tokens::Sampled;
          for (int i = 0; i < b; ++i) batch.outputs.sampling.push_back(sampling_at(double(draws() >> 11) * 0x1p-53));
        } else if (argmax || overlapped) {
          batch.outputs.tokens = model::StepOutputs::Tokens::Argmax;
        }
        const bool prof = profile_case && r == runs + 1;
        if (prof) kernels::cuda_profile_enable(*backend, true);
        batch.outputs.read_tokens_later = overlapped;
        const double t0 = now();
        {
          // A plain decode step, as the engine marks it: recorded and replayed as a CUDA graph.
          const kernels::RepeatingStepHint hint(*backend, true);
          model::StepOutput issued = model->forward(batch, kv);
          model::collect_tokens(*backend, out);  // overlapped: the step before, which ran meanwhile
          out = std::move(issued);
        }
        if (overlapped && step + 1 == decode_steps) model::collect_tokens(*backend, out);
        s += now() - t0;
        if (overlapped) s = now() - t_run;  // the host's work between the steps runs beside the device
        if (prof) {
          kernels::cuda_profile_enable(*backend, false);
          std::printf("\nprofile, decode step at batch %d (GPU time per op; events serialise the stream)\n%s\n", b,
                      kernels::cuda_profile_report(*backend).c_str());
          break;
        }
      }
      if (r == timeline_run)
        write_timeline(kernels::cuda::timeline_stop(),
                       fmt::format("{}-b{}{}.csv", timeline_csv, b, overlapped ? "-overlapped" : ""));
      if (r > 0 && r <= runs) {
        tps.push_back(double(b) * decode_steps / s);
        timed_seconds += s;
      }
      if (r == runs) graphs_after = kernels::cuda_graph_counters(*backend);
    }
    for (auto s : seqs) kv.remove_sequence(s);
    const double d = median(tps);
    if (argmax && runs > 0) {
      const double steps = double(runs) * decode_steps, us = 1e6 / steps;
      const double issue = (graphs_after.flush_seconds - graphs_before.flush_seconds) * us;
      const double wait = (graphs_after.wait_seconds - graphs_before.wait_seconds) * us;
      const double replays = double(graphs_after.replays - graphs_before.replays) / steps;
      const double direct = double(graphs_after.direct - graphs_before.direct) / steps;
      const double replay_us = (graphs_after.replay_seconds - graphs_before.replay_seconds) * us;
      std::printf("| decode batch %d host time per step | %.1f us of %.1f | at the host read: issue %.1f us, wait %.1f us; "
                  "graph replays %.2f (%.1f us), direct issues %.2f per step | |\n",
                  b, timed_seconds * us - wait, timed_seconds * us, issue, wait, replays, replay_us, direct);
    }
    const double ctx = prompt_len + (runs + 1) * decode_steps / 2.0;
    const double roof = copy_gbps * 1e9 / (weight_bytes + kv_bytes_per_position * ctx);
    if (overlapped) {
      if (b == 1) std::printf("| decode batch 1 tok/s, overlapped (the engine's steps) | %.1f | %.1f | %.1f%% |\n", d, roof,
                              100 * d / roof);
      else std::printf("| decode batch %d tok/s, overlapped (the engine's steps) | %.1f | %.1fx batch 1 | |\n", b, d,
                       d / batch1);
      std::printf("| decode batch %d overlapped over each step read first | %.3f | | |\n", b, d / greedy_tps[b]);
      engine["decode_" + std::to_string(b) + "_overlapped"] = {{"tok_s", d}, {"runs", tps}, {"roofline_tok_s", roof},
                                                               {"vs_read_first", d / greedy_tps[b]}};
    } else if (!argmax) {
      static const char* const label[] = {"", "all logits to the host", "sampled on the device",
                                          "sampled on the host (logits returned)"};
      static const char* const key[] = {"", "_host_logits", "_sampled_device", "_sampled_host"};
      std::printf("| decode batch %d tok/s, %s | %.1f | %.2fx greedy on the device | |\n", b,
                  label[static_cast<int>(tokens)], d, d / greedy_tps[b]);
      engine["decode_" + std::to_string(b) + key[static_cast<int>(tokens)]] = {{"tok_s", d}, {"runs", tps}};
    } else if (b == 1) {
      batch1 = d;
      const double bytes = weight_bytes + kv_bytes_per_position * ctx;
      std::printf("| decode batch 1 tok/s | %.1f | %.1f | %.1f%% |\n", d, roof, 100 * d / roof);
      engine["decode_1"] = {{"tok_s", d}, {"runs", tps}, {"bytes_per_token", bytes}, {"avg_context", ctx},
                            {"roofline_tok_s", roof}, {"ratio", d / roof}};
    } else {
      std::printf("| decode batch %d tok/s | %.1f | %.1fx batch 1 | |\n", b, d, d / batch1);
      engine["decode_" + std::to_string(b)] = {{"tok_s", d}, {"runs", tps}, {"vs_batch_1", d / batch1}};
    }
    if (argmax) greedy_tps[b] = d;
    std::fflush(stdout);
  }
#ifdef TACHYON_BENCH_ENGINE
  {
    const double roof = copy_gbps * 1e9 / (weight_bytes + kv_bytes_per_position * (128 + 64 / 2.0));
    bench::engine_decode_table(*model, decode_quick ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 64}, runs, roof,
                               engine);
  }
#endif
  report["engine"] = engine;
  report["weight_bytes_per_token"] = weight_bytes;
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}
