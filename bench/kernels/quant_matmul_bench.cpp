// Quantized matmuls of the CPU backend at the Qwen3-0.6B shape (hidden 1024, intermediate 3072,
// 16 / 8 heads of 128, 28 layers, tied vocabulary 151936), every weight format against bf16:
//  1. decode: one row through every matrix of the model (28 layers' q, k, v, o, gate_up, down
//     and the lm_head) as CpuBackend::matmul runs them (all threads): GB/s of the bytes the
//     kernels read (codes + scales + biases) next to a read-only pass over as many bytes,
//     alternated with the decode run by run (the ratio is the fraction of the read roofline),
//     the copy bandwidth of the same run, and the matmul-only tok/s bound;
//  2. one layer's matrices at 1, 6 and 512 rows (µs), the register-tile and the
//     dequantized-panel paths;
//  3. the kernel's compute ceiling: one thread, one-row GEMV over a 1024 x 1024 matrix hot in
//     L2 (GB/s of its bytes): where it is far above the DRAM figure, decode is memory-bound.
// Weights hold random codes (speed does not depend on values). Protocol: one warm-up, min of
// --runs (the machine is shared and noisy).
// Usage: quant_matmul_bench [--runs 5] [--layers 28] [--formats bf16,int8,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernel_timing.h"
#include "kernels/cpu/quant_pack.h"
#include "kernels/quantize.h"

using namespace tachyon;
using namespace tachyon::kernels;
using tachyon::bench::time_min;
using tachyon::bench::wall_seconds;

namespace {

struct Format {
  const char* name;
  const char* what;
  WeightFormat format;
  DType dtype;  // Dense only
  int bits, group;
  DType scale_dtype;
};

const Format kFormats[] = {
    {"bf16", "Dense BF16 (today's baseline)", WeightFormat::Dense, DType::BF16, 16, 0, DType::F32},
    {"int8", "Dense I8, f32 scale per row (--quantize int8)", WeightFormat::Dense, DType::I8, 8, 0, DType::F32},
    {"q8_0", "Symmetric 8-bit g32 F16 (GGUF Q8_0)", WeightFormat::Symmetric, DType::U8, 8, 32, DType::F16},
    {"a8g64", "Affine 8-bit g64 F16 (MLX 8-bit)", WeightFormat::Affine, DType::U8, 8, 64, DType::F16},
    {"fp8", "Fp8Block 128x128 f32 (--quantize fp8)", WeightFormat::Fp8Block, DType::U8, 8, 128, DType::F32},
    {"int4", "Affine 4-bit g64 F16 (--quantize int4, MLX 4-bit)", WeightFormat::Affine, DType::U8, 4, 64, DType::F16},
    {"q4_0", "Symmetric 4-bit g32 F16 (GGUF Q4_0)", WeightFormat::Symmetric, DType::U8, 4, 32, DType::F16},
    {"mxfp4", "Mxfp4 e2m1 + e8m0 per 32", WeightFormat::Mxfp4, DType::U8, 4, 32, DType::U8},
};

// A host weight with random contents, owning its bytes.
struct HostWeight {
  std::vector<uint8_t> data, scales, biases;
  Weight w;
};

HostWeight make_host(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng) {
  HostWeight h;
  std::uniform_int_distribution<int> byte(0, 255);
  auto fill = [&](std::vector<uint8_t>& v, size_t n, uint8_t mask, uint8_t fixed) {
    v.resize(n);
    for (auto& b : v) b = static_cast<uint8_t>((byte(rng) & mask) | fixed);
  };
  if (f.format == WeightFormat::Dense) {
    // bf16: random sign and mantissa, exponent 2^-7 (no subnormal products: they would run
    // on microcode assists and measure those); int8: random bytes.
    fill(h.data, static_cast<size_t>(rows * cols) * dtype_size(f.dtype), 0xFF, 0);
    if (f.dtype == DType::BF16)
      for (size_t i = 0; i < h.data.size(); i += 2) h.data[i + 1] = static_cast<uint8_t>((h.data[i + 1] & 0x80) | 0x3c);
    h.w = Weight{h.data.data(), f.dtype, rows, cols};
    if (f.dtype == DType::I8) {
      h.scales.resize(static_cast<size_t>(rows) * 4);
      for (int64_t r = 0; r < rows; ++r) {
        const float s = 0.01f;
        std::memcpy(h.scales.data() + r * 4, &s, 4);
      }
      h.w.scales = reinterpret_cast<const float*>(h.scales.data());
    }
    return h;
  }
  h.w = Weight{nullptr, DType::U8, rows, cols};
  h.w.format = f.format;
  h.w.quant.bits = static_cast<uint8_t>(f.bits);
  h.w.quant.group = f.group;
  h.w.quant.scale_dtype = f.scale_dtype;
  fill(h.data, static_cast<size_t>(quant_code_bytes(h.w)), f.format == WeightFormat::Fp8Block ? 0x7E : 0xFF, 0);
  const size_t entries = static_cast<size_t>(quant_scale_count(h.w)) * dtype_size(f.scale_dtype);
  // F16 scales around 2^-7 (0x20xx), F32 around 2^-7 (0x3c......), e8m0 around 2^-7.
  if (f.scale_dtype == DType::U8) fill(h.scales, entries, 0x03, 120);
  else if (f.scale_dtype == DType::F16) for (size_t i = 0; i < entries; ++i) h.scales.push_back(i % 2 ? 0x20 : static_cast<uint8_t>(byte(rng)));
  else for (size_t i = 0; i < entries; ++i) h.scales.push_back(i % 4 == 3 ? 0x3c : static_cast<uint8_t>(byte(rng)));
  if (f.format == WeightFormat::Affine) h.biases = h.scales;
  h.w.data = h.data.data();
  h.w.quant.scales = h.scales.data();
  h.w.quant.biases = h.biases.empty() ? nullptr : h.biases.data();
  return h;
}

// Bytes a matmul over the uploaded (Panel64) weight reads.
int64_t packed_bytes(const Weight& host) {
  if (host.quantized()) {
    const cpu::QuantPanelBytes b = cpu::quant_panel64_bytes(host);
    return static_cast<int64_t>(b.codes + b.scales + b.biases);
  }
  return cpu::panel64_padded_rows(host.rows) * host.cols * static_cast<int64_t>(dtype_size(host.dtype)) +
         (host.scales ? host.rows * 4 : 0);
}

struct Shape {
  const char* name;
  int64_t rows, cols;
};
const Shape kLayer[] = {{"q", 2048, 1024}, {"k", 1024, 1024}, {"v", 1024, 1024},
                        {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}};
const Shape kHead = {"lm_head", 151936, 1024};

// Streams a buffer of `bytes` bytes through all threads (a sum, so nothing is written): the
// read roofline a decode of that many bytes cannot beat.
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

double copy_bandwidth(size_t bytes, int runs) {
  std::vector<uint64_t> a(bytes / 8, 1), b(bytes / 8);
  const double t = time_min(runs, [&] {
    ThreadPool::global().parallel_for(a.size() / 4096, [&](size_t lo, size_t hi) {
      std::memcpy(b.data() + lo * 4096, a.data() + lo * 4096, (hi - lo) * 4096 * 8);
    });
  });
  return 2.0 * bytes / t / 1e9;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, layers = 28;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--layers")) layers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--formats")) only = std::string(",") + argv[i + 1] + ",";
  }
  std::mt19937 rng(1);
  std::printf("isa %s, %zu threads; copy bandwidth over 512 MiB: %.1f GB/s (read + write)\n",
              cpu::isa_kernels().name, ThreadPool::global().num_threads(), copy_bandwidth(size_t{512} << 20, runs));
  std::printf("read GB/s: a read-only pass over as many bytes as the format's decode, alternated with it run by run\n\n");
  std::printf("%-6s %-50s %9s %9s %7s %7s %6s %6s | one layer µs: %8s %8s %9s | %s\n", "format", "", "MB read",
              "decode ms", "GB/s", "read", "ratio", "tok/s", "1 row", "6 rows", "512 rows", "L2-hot GB/s, 1 thread");
  for (const Format& f : kFormats) {
    if (!only.empty() && only.find(std::string(",") + f.name + ",") == std::string::npos) continue;
    auto be = make_backend("cpu");
    std::vector<Weight> model;
    std::vector<int64_t> packed_bytes_of_layer;
    int64_t bytes = 0;
    for (int l = 0; l < layers; ++l)
      for (const Shape& s : kLayer) {
        HostWeight h = make_host(f, s.rows, s.cols, rng);
        bytes += packed_bytes(h.w);
        if (l == 0) packed_bytes_of_layer.push_back(packed_bytes(h.w));
        model.push_back(be->upload_weight(h.w));
      }
    {
      HostWeight h = make_host(f, kHead.rows, kHead.cols, rng);
      bytes += packed_bytes(h.w);
      model.push_back(be->upload_weight(h.w));
    }
    std::vector<float> x(512 * 3072, 0.01f), out(512 * kHead.rows);
    // Decode and a read pass of the same bytes alternate, so both see the same machine (shared, noisy).
    ReadPass read_pass(static_cast<size_t>(bytes));
    double decode = 1e30, read = 1e30;
    for (int i = 0; i <= runs; ++i) {
      const double t0 = wall_seconds();
      for (const Weight& w : model) be->matmul(x.data(), 1, w, nullptr, out.data());
      const double t1 = wall_seconds();
      read_pass();
      const double t2 = wall_seconds();
      if (i > 0) decode = std::min(decode, t1 - t0), read = std::min(read, t2 - t1);  // run 0: warm-up
    }
    const double read_gbs = bytes / read / 1e9;
    auto layer_us = [&](int64_t rows, int n) {
      return 1e6 * time_min(n, [&] {
        for (size_t i = 0; i < std::size(kLayer); ++i) be->matmul(x.data(), rows, model[i], nullptr, out.data());
      });
    };
    const double r1 = layer_us(1, runs * 4), r6 = layer_us(6, runs * 4), r512 = layer_us(512, 1);
    // The kernel's own ceiling: one thread, decode over the k matrix (1024 x 1024) hot in L2.
    const Weight& hot = model[1];
    const double t_hot = time_min(runs * 20, [&] { cpu::isa_kernels().matmul_range(x.data(), 1, hot, 0, hot.rows, out.data(), hot.rows); });
    const double hot_gbs = packed_bytes_of_layer[1] / t_hot / 1e9;
    const double gbs = bytes / decode / 1e9;
    std::printf("%-6s %-50s %9.1f %9.2f %7.1f %7.1f %5.0f%% %6.1f | %22.0f %8.0f %9.0f | %7.1f\n", f.name, f.what,
                bytes / 1e6, decode * 1e3, gbs, read_gbs, 100 * gbs / read_gbs, 1.0 / decode, r1, r6, r512, hot_gbs);
    std::fflush(stdout);
  }
  return 0;
}
