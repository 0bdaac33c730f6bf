// The int8-activation kernels (cpu/isa/matmul_int8.h) against the f32 kernels they replace, on
// one thread, for the integer formats at Qwen3-0.6B's MLP shapes (gate_up 6144 x 1024, down
// 1024 x 3072): decode (1 row), verify (4 rows) and prefill (512 rows). Per case: µs of the f32
// quantized kernel (weights dequantized into the fma chain), of the int8 path (activation
// quantization included) with the best kernel here (AMX-INT8 where present) and with AVX-512
// VNNI alone, and the speed-ups. Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID), min of
// --runs, so a busy machine slows them less than wall time; decode is memory-bound at full
// thread count, which this does not show (cpu_bench and run_gguf_bench.sh measure it).
// Usage: int8_matmul_bench [--runs 5]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/isa/matmul_int8.h"
#include "kernels/cpu/quant_pack.h"
#include "kernels/quantize.h"
#include "kernel_timing.h"
#include "quant_panels.h"  // tests/kernels: packing into owned buffers

using namespace tachyon;
using namespace tachyon::kernels;

namespace {

// Thread CPU time: the kernels run on the calling thread alone.
template <class Fn>
double time_min(int runs, Fn&& fn) {
  return bench::time_min(runs, fn, bench::thread_seconds);
}

struct Format {
  const char* name;
  WeightFormat format;
  int bits, group;
};
// group 0: one scale per row, as --quantize int8's rows (128-column activation blocks).
const Format kFormats[] = {{"int8 rows (Symmetric 8-bit, a scale per row, as --quantize int8)", WeightFormat::Symmetric, 8, 0},
                           {"q8_0 (Symmetric 8-bit g32 F16)", WeightFormat::Symmetric, 8, 32},
                           {"q4_0 (Symmetric 4-bit g32 F16)", WeightFormat::Symmetric, 4, 32},
                           {"int4 (Affine 4-bit g64 F16, --quantize int4)", WeightFormat::Affine, 4, 64},
                           {"q4_k-like (Affine 4-bit g32 F16)", WeightFormat::Affine, 4, 32}};

QuantHost make_host(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng) {
  QuantHost h;
  h.w = Weight{nullptr, DType::U8, rows, cols};
  h.w.format = f.format;
  h.w.quant.bits = static_cast<uint8_t>(f.bits);
  h.w.quant.group = f.group > 0 ? f.group : cols;
  h.w.quant.scale_dtype = DType::F16;
  h.codes.resize(static_cast<size_t>(quant_code_bytes(h.w)));
  for (auto& b : h.codes) b = static_cast<uint8_t>(rng());
  const int64_t n = quant_scale_count(h.w);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t s = f32_to_f16(0.01f + 0.001f * static_cast<float>(i % 7));
    h.scales.push_back(static_cast<uint8_t>(s & 0xff));
    h.scales.push_back(static_cast<uint8_t>(s >> 8));
  }
  if (f.format == WeightFormat::Affine) h.biases = h.scales;
  h.w.data = h.codes.data();
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = h.biases.empty() ? nullptr : h.biases.data();
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
  const auto& isa = cpu::isa_kernels();
  const bool vnni = std::strcmp(cpu::matmul_int8_kernel_name(), "portable") != 0 &&
                    std::strcmp(cpu::matmul_int8_kernel_name(), "avx2") != 0;
  std::printf("one thread; f32 kernels: %s; int8 kernel: %s; thread CPU time, min of %d\n\n", isa.name,
              cpu::matmul_int8_kernel_name(), runs);
  std::printf("| format | matrix | rows | f32 µs | int8 µs | speed-up | int8 VNNI-only µs | speed-up |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(1);
  const int64_t shapes[2][2] = {{6144, 1024}, {1024, 3072}};
  for (const Format& f : kFormats)
    for (const auto& shape : shapes) {
      const QuantHost h = make_host(f, shape[0], shape[1], rng);
      const QuantHost f32w = pack_panels(h.w, cpu::quant_panel64_bytes, cpu::pack_quant_panel64);
      const QuantHost dotw = pack_panels(h.w, cpu::quant_panel64_dot_bytes,
                                 static_cast<Weight (*)(const Weight&, void*, void*, void*)>(cpu::pack_quant_panel64_dot));
      for (int64_t rows : {1, 4, 512}) {
        std::vector<float> x(static_cast<size_t>(rows * shape[1]));
        std::normal_distribution<float> normal(0.f, 1.f);
        for (auto& v : x) v = normal(rng);
        std::vector<float> out(static_cast<size_t>(rows * shape[0]));
        cpu::Int8Activations acts;
        const double t_f32 = time_min(runs, [&] { isa.matmul_range(x.data(), rows, f32w.w, 0, shape[0], out.data(), shape[0]); });
        const double t_int8 = time_min(runs, [&] {
          cpu::matmul_int8_kernel()(acts.quantize(x.data(), rows, shape[1], cpu::int8_activation_block(dotw.w)), dotw.w, 0, shape[0], out.data(), shape[0]);
        });
        double t_vnni = 0;
#if defined(__x86_64__)
        if (vnni)
          t_vnni = time_min(runs, [&] {
            cpu::matmul_int8_avx512(acts.quantize(x.data(), rows, shape[1], cpu::int8_activation_block(dotw.w)), dotw.w, 0, shape[0], out.data(), shape[0]);
          });
#endif
        std::printf("| %s | %lld x %lld | %lld | %.0f | %.0f | %.2fx | %.0f | %.2fx |\n", f.name,
                    static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(rows),
                    t_f32 * 1e6, t_int8 * 1e6, t_f32 / t_int8, t_vnni * 1e6, t_vnni > 0 ? t_f32 / t_vnni : 0.0);
        std::fflush(stdout);
      }
    }
  return 0;
}
