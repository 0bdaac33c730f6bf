// Decode GEMVs of GGUF K-quant matrices on the CPU backend's int8-activation mode (the GGUF
// default), per tensor type and per matrix of the Qwen3-0.6B file (hidden 1024, intermediate
// 3072, q/k/v fused 4096 x 1024, o 1024 x 2048, gate/up fused 6144 x 1024, down 1024 x 3072, the
// tied output 151936 x 1024): one row through as many copies of the matrix as make 256 MB (so
// the bytes come from DRAM, as in a decode), as CpuBackend::matmul runs it (all threads),
// alternated run by run with a read-only pass over as many bytes. Prints the bytes the kernels
// stream per weight (the packed form: compact K-quant forms, cpu/quant_pack.h), the GB/s, and
// the fraction of the read pass (the roofline a decode of those bytes cannot beat).
// Weights are K-quant-shaped (f16 d·6-bit sc scales, Q6_K codes in [−32, 31]); speed does not
// depend on the values. "q4_k f32" is the same Q4_K matrix with scales that do not factor
// (random F32): the form every Q4_K matrix had before the compact forms.
// Last column: the kernel's own ceiling, one thread, one-row GEMV over the first 256 outputs of
// the matrix hot in L2 (thread CPU time, so load on the machine slows it little): where it is far
// above a thread's share of the read pass, the GEMV is memory-bound.
// With --prefill: one thread, 512 rows against the first 256 outputs (thread CPU time, ms): the
// int8 kernel the backend runs (activation quantization included) and the f32 kernels over the
// same matrix packed as Panel64 (the path Q6_K and the mixed q/k/v took before they ran in the
// int8 mode).
// Protocol: one warm-up, min of --runs. Usage: gguf_gemv_bench [--runs 5] [--prefill]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/cpu/quant_pack.h"
#include "../kernels/kernel_timing.h"

using namespace tachyon;
using namespace tachyon::kernels;
using tachyon::bench::thread_seconds;
using tachyon::bench::wall_seconds;

namespace {

enum class Kind { Q4K, Q4KF32, Q5K, Q6K, MixedQkv };
struct Type {
  const char* name;
  const char* what;
  Kind kind;
};
const Type kTypes[] = {
    {"q4_k", "Q4_K: Affine 4-bit g32, factored scales", Kind::Q4K},
    {"q4_k f32", "Q4_K with unfactorable F32 scales (the old form)", Kind::Q4KF32},
    {"q5_k", "Q5_K: Affine 6-bit g32, factored scales", Kind::Q5K},
    {"q6_k", "Q6_K: Symmetric 6-bit g16, factored scales", Kind::Q6K},
    {"mixed", "Q4_K_M's q/k/v with a Q6_K v: Affine 6-bit g16", Kind::MixedQkv},
};
struct Shape {
  const char* name;
  int64_t rows, cols;
};
const Shape kShapes[] = {{"qkv", 4096, 1024},   {"o", 1024, 2048},      {"gate_up", 6144, 1024},
                         {"down", 1024, 3072},  {"output", 151936, 1024}};

struct Host {
  std::vector<uint8_t> codes;
  std::vector<float> scales, biases;
  Weight w;
};

// A K-quant-shaped host weight as model/sources/gguf_repack.h produces it.
Host make_host(Kind kind, int64_t rows, int64_t cols, std::mt19937& rng) {
  Host h;
  const bool four = kind == Kind::Q4K || kind == Kind::Q4KF32, affine = kind != Kind::Q6K;
  const int group = kind == Kind::Q6K || kind == Kind::MixedQkv ? 16 : 32;
  std::uniform_int_distribution<int> u6(0, 63), s8(-128, 127), byte(0, 255);
  std::uniform_real_distribution<float> unit(0.5f, 2.f);
  const auto f16 = [](float v) { return f16_to_f32(f32_to_f16(v)); };
  const int64_t groups = cols / group;
  h.scales.resize(static_cast<size_t>(rows * groups));
  if (affine) h.biases.resize(h.scales.size());
  for (int64_t r = 0; r < rows; ++r) {
    const bool q6 = kind == Kind::Q6K || (kind == Kind::MixedQkv && r >= rows * 3 / 4);
    for (int64_t t = 0; t < cols / 256; ++t) {
      const float d = f16(0.01f * unit(rng)), dmin = f16(0.003f * unit(rng));
      int sc = 0, m = 0;
      for (int64_t g = t * (256 / group); g < (t + 1) * (256 / group); ++g) {
        const size_t at = static_cast<size_t>(r * groups + g);
        if (kind == Kind::Q4KF32) {
          h.scales[at] = 0.01f * unit(rng);
          h.biases[at] = -0.003f * unit(rng);
        } else if (q6) {
          h.scales[at] = d * static_cast<float>(s8(rng));
          if (affine) h.biases[at] = -32.f * h.scales[at];
        } else {
          if (group == 32 || g % 2 == 0) sc = u6(rng), m = u6(rng);
          h.scales[at] = d * static_cast<float>(sc);
          if (affine) h.biases[at] = -(dmin * static_cast<float>(m));
        }
      }
    }
  }
  h.codes.resize(static_cast<size_t>(four ? rows * cols / 2 : rows * cols));
  for (int64_t i = 0; i < static_cast<int64_t>(h.codes.size()); ++i) {
    const bool q6 = kind == Kind::Q6K || (kind == Kind::MixedQkv && i / cols >= rows * 3 / 4);
    const int b = byte(rng);
    h.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(four ? b : kind == Kind::Q6K ? (b & 63) - 32 : q6 ? (b & 63) : (b & 31));
  }
  h.w = Weight{h.codes.data(), DType::U8, rows, cols};
  h.w.format = affine ? WeightFormat::Affine : WeightFormat::Symmetric;
  h.w.quant.bits = static_cast<uint8_t>(four ? 4 : 8);
  h.w.quant.group = group;
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = affine ? h.biases.data() : nullptr;
  return h;
}

// Streams a buffer of `bytes` bytes through all threads (a sum, nothing written).
struct ReadPass {
  std::vector<uint64_t> a;
  std::vector<uint64_t> sums;
  explicit ReadPass(size_t bytes) : a(bytes / 8, 1), sums(256) {}
  void operator()() {
    ThreadPool::global().parallel_for(a.size() / 4096, [&](size_t lo, size_t hi) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = lo * 4096; i < hi * 4096; i += 4) s0 += a[i], s1 += a[i + 1], s2 += a[i + 2], s3 += a[i + 3];
      sums[lo % sums.size()] += s0 + s1 + s2 + s3;
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  bool prefill = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--prefill")) prefill = true;
  }
  std::mt19937 rng(1);
  if (prefill) {
    std::printf("| type | matrix | 512 rows x 256 outputs, 1 thread: int8 mode ms | f32 kernels ms |\n|---|---|---|---|\n");
    for (const Type& type : kTypes)
      for (const Shape& s : kShapes) {
        if (std::strcmp(s.name, "down") != 0 && std::strcmp(s.name, "qkv") != 0) continue;
        if (type.kind == Kind::MixedQkv && std::strcmp(s.name, "qkv") != 0) continue;
        const Host h = make_host(type.kind, 256, s.cols, rng);
        const cpu::PanelDotPlan plan = cpu::plan_panel64_dot(h.w);
        std::vector<uint8_t> c(plan.bytes.codes), sc(plan.bytes.scales), bi(plan.bytes.biases);
        const Weight dot = cpu::pack_planned_panel64_dot(plan, h.w, c.data(), sc.data(), bi.empty() ? nullptr : bi.data());
        const cpu::QuantPanelBytes pb = cpu::quant_panel64_bytes(h.w);
        std::vector<uint8_t> c2(pb.codes), sc2(pb.scales), bi2(pb.biases);
        const Weight panel = cpu::pack_quant_panel64(h.w, c2.data(), sc2.data(), bi2.empty() ? nullptr : bi2.data());
        std::vector<float> x(static_cast<size_t>(512 * s.cols)), out(512 * 256);
        for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(static_cast<int>(i % 23) - 11);
        cpu::Int8Activations acts;
        const auto time_of = [&](auto&& fn) {
          double best = 1e30;
          for (int i = 0; i <= runs; ++i) {
            const double t0 = thread_seconds();
            fn();
            if (i > 0) best = std::min(best, thread_seconds() - t0);
          }
          return best;
        };
        const double t8 = time_of([&] {
          cpu::matmul_int8_kernel()(acts.quantize(x.data(), 512, s.cols, cpu::int8_activation_block(dot)), dot, 0, 256,
                                    out.data(), 256);
        });
        const double t32 = time_of([&] { cpu::isa_kernels().matmul_range(x.data(), 512, panel, 0, 256, out.data(), 256); });
        std::printf("| %s | %s 256x%lld | %.2f | %.2f |\n", type.name, s.name, static_cast<long long>(s.cols), 1e3 * t8,
                    1e3 * t32);
        std::fflush(stdout);
      }
    return 0;
  }
  std::printf("int8 kernel %s, %zu threads; one row per matrix, copies of it up to 256 MB\n\n",
              cpu::matmul_int8_kernel_name(), ThreadPool::global().num_threads());
  std::printf("| type | matrix | bits/weight streamed | µs per GEMV | GB/s | read pass GB/s | of read | L2-hot GB/s, 1 thread |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Type& type : kTypes)
    for (const Shape& s : kShapes) {
      if ((type.kind == Kind::MixedQkv && std::strcmp(s.name, "qkv") != 0) ||
          (type.kind == Kind::Q4KF32 && std::strcmp(s.name, "gate_up") != 0))
        continue;
      auto be = make_backend("cpu");
      be->set_int8_activations(true);
      const Host h = make_host(type.kind, s.rows, s.cols, rng);
      const cpu::QuantPanelBytes pb = cpu::quant_panel64_dot_bytes(h.w);
      const int64_t one = static_cast<int64_t>(pb.codes + pb.scales + pb.biases);
      const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / one);
      std::vector<Weight> ws;
      for (int64_t c = 0; c < copies; ++c) ws.push_back(be->upload_weight(h.w));
      std::vector<float> x(static_cast<size_t>(s.cols), 0.01f), out(static_cast<size_t>(s.rows));
      for (int64_t c = 0; c < s.cols; ++c) x[static_cast<size_t>(c)] = 0.01f * static_cast<float>(c % 17) - 0.08f;
      ReadPass read_pass(static_cast<size_t>(one * copies));
      double gemv = 1e30, read = 1e30;
      for (int i = 0; i <= runs; ++i) {
        const double t0 = wall_seconds();
        for (const Weight& w : ws) be->matmul(x.data(), 1, w, nullptr, out.data());
        const double t1 = wall_seconds();
        read_pass();
        const double t2 = wall_seconds();
        if (i > 0) gemv = std::min(gemv, t1 - t0), read = std::min(read, t2 - t1);
      }
      const double bytes = static_cast<double>(one * copies), gbs = bytes / gemv / 1e9, read_gbs = bytes / read / 1e9;
      // The kernel alone on this thread: 256 outputs, hot after the first pass.
      cpu::Int8Activations acts;
      const cpu::Int8Rows a = acts.quantize(x.data(), 1, s.cols, cpu::int8_activation_block(ws[0]));
      const cpu::MatmulInt8Fn kernel = cpu::matmul_int8_kernel();
      double hot = 1e30;
      for (int i = 0; i <= 20 * runs; ++i) {
        const double t0 = thread_seconds();
        for (int rep = 0; rep < 10; ++rep) kernel(a, ws[0], 0, 256, out.data(), s.rows);
        if (i > 0) hot = std::min(hot, (thread_seconds() - t0) / 10);
      }
      const double hot_gbs = 256.0 * static_cast<double>(one) / static_cast<double>(s.rows) / hot / 1e9;
      std::printf("| %s | %s %lldx%lld | %.2f | %.0f | %.1f | %.1f | %.0f%% | %.1f |\n", type.name, s.name,
                  static_cast<long long>(s.rows), static_cast<long long>(s.cols), 8.0 * one / (s.rows * s.cols),
                  1e6 * gemv / copies, gbs, read_gbs, 100 * gbs / read_gbs, hot_gbs);
      std::fflush(stdout);
    }
  return 0;
}
