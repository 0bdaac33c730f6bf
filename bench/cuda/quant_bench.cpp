// Quantized weight formats on the CUDA backend (kernels/cuda/quant_layout.h), on the Qwen3-8B
// layer shapes (hidden 4096, intermediate 12288, 32/8 heads of 128: qkv 6144x4096, o 4096x4096,
// gate_up 24576x4096, down 4096x12288), each figure next to its peer measured in the same run:
//   ceiling:  device-to-device copy bandwidth (read + write bytes / s, as cuda_bench);
//   decode:   batch-1 (and batch-8) matmuls over --layers copies of the layer (more than L2 holds),
//             GB/s of weight bytes read (codes + scales + biases) and its ratio to the copy
//             bandwidth (targets, issue 44: fp8 and int8 >= 0.85, int4 >= 0.75), by the default
//             path (on Hopper the streaming kernel, matmul_quant_stream.cu, where it takes the shape:
//             at 8 rows not the down projection, whose x does not fit beside the ring);
//             then batch 1 on the split-K kernel (cuda::set_quant_decode_stream(false)) by 512-k
//             segments per warp (1, 2, 4: cuda::set_quant_decode_segments; its default is 2 for
//             8-bit codes, 4 for 4-bit ones), and b1 over the split-K default (/split);
//   prefill:  4096-token matmuls of one layer, tok/s and the ratio to bf16 in the same run.
// Protocol: one warm-up pass discarded, median of --runs passes; times by host clock around a
// synchronized pass of many launches (the device is the bottleneck: launches queue ahead).
// Usage: cuda_quant_bench [--runs 5] [--layers 6] [--prefill-rows 4096]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/weight_dequant.h"

using namespace tachyon;
using namespace tachyon::kernels;

namespace {

struct Format {
  const char* name;
  WeightFormat format;
  int bits, group;
  DType scale_dtype;  // Dense: the element dtype (BF16 baseline, I8 with row scales)
};

const Format kFormats[] = {
    {"bf16", WeightFormat::Dense, 16, 0, DType::BF16},
    {"int8 rows (I8)", WeightFormat::Dense, 8, 0, DType::I8},
    {"sym8 g32 f16 (Q8_0)", WeightFormat::Symmetric, 8, 32, DType::F16},
    {"fp8 block128", WeightFormat::Fp8Block, 8, 128, DType::F32},
    {"sym4 g128 f16 (GPTQ)", WeightFormat::Symmetric, 4, 128, DType::F16},
    {"affine4 g128 f16 (AWQ)", WeightFormat::Affine, 4, 128, DType::F16},
    {"affine4 g64 bf16 (MLX)", WeightFormat::Affine, 4, 64, DType::BF16},
    {"sym4 g32 f16 (Q4_0)", WeightFormat::Symmetric, 4, 32, DType::F16},
    {"mxfp4", WeightFormat::Mxfp4, 4, 32, DType::U8},
};

struct Shape {
  const char* name;
  int64_t n, k;
};
const Shape kShapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}};

// One host matrix in `f`'s format with random codes (its buffers owned here).
struct HostMatrix {
  std::vector<uint8_t> data, scales, biases;
  std::vector<float> row_scales;
  Weight w;
};

HostMatrix make_host(const Format& f, int64_t n, int64_t k, std::mt19937_64& rng) {
  HostMatrix h;
  const auto fill = [&](std::vector<uint8_t>& v, size_t bytes) {
    v.resize(bytes);
    for (size_t i = 0; i < bytes; i += 8) {
      const uint64_t r = rng();
      std::memcpy(v.data() + i, &r, std::min<size_t>(8, bytes - i));
    }
  };
  const auto scales16 = [&](std::vector<uint8_t>& v, int64_t count, DType dtype, float value) {
    v.resize(static_cast<size_t>(count) * dtype_size(dtype));
    for (int64_t i = 0; i < count; ++i) {
      if (dtype == DType::F32)
        std::memcpy(v.data() + 4 * i, &value, 4);
      else {
        const uint16_t b = dtype == DType::F16 ? f32_to_f16(value) : f32_to_bf16(value);
        std::memcpy(v.data() + 2 * i, &b, 2);
      }
    }
  };
  h.w.rows = n, h.w.cols = k, h.w.format = f.format;
  if (f.format == WeightFormat::Dense && f.scale_dtype == DType::BF16) {
    h.data.resize(static_cast<size_t>(n * k) * 2);
    std::normal_distribution<float> d(0.f, 0.02f);
    for (size_t i = 0; i < h.data.size(); i += 2) {
      const uint16_t b = f32_to_bf16(d(rng));
      std::memcpy(h.data.data() + i, &b, 2);
    }
    h.w.dtype = DType::BF16;
  } else {
    fill(h.data, static_cast<size_t>(f.bits == 8 ? n * k : n * k / 2));
    h.w.dtype = f.format == WeightFormat::Dense ? DType::I8 : DType::U8;
    h.w.quant.bits = static_cast<uint8_t>(f.bits);
    h.w.quant.group = f.group;
    h.w.quant.scale_dtype = f.scale_dtype;
    switch (f.format) {
      case WeightFormat::Dense:
        h.row_scales.assign(static_cast<size_t>(n), 0.001f);
        h.w.scales = h.row_scales.data();
        break;
      case WeightFormat::Affine:
        scales16(h.biases, n * (k / f.group), f.scale_dtype, -0.08f);
        h.w.quant.biases = h.biases.data();
        [[fallthrough]];
      case WeightFormat::Symmetric:
        scales16(h.scales, n * (k / f.group), f.scale_dtype, 0.01f);
        break;
      case WeightFormat::Fp8Block:
        for (auto& b : h.data)
          if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
        scales16(h.scales, ((n + 127) / 128) * ((k + 127) / 128), DType::F32, 0.0005f);
        break;
      case WeightFormat::Mxfp4:
        h.scales.assign(static_cast<size_t>(n * (k / 32)), 120);
        break;
    }
    h.w.quant.scales = h.scales.empty() ? nullptr : h.scales.data();
  }
  h.w.data = h.data.data();
  return h;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median seconds of `runs` passes of fn (one warm-up pass first), each followed by a synchronize.
template <typename Fn>
double median_seconds(Backend& be, int runs, Fn fn) {
  fn();
  be.synchronize();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    be.synchronize();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, layers = 6;
  int64_t prefill_rows = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (a == "--layers")
      layers = std::atoi(argv[i + 1]);
    else if (a == "--prefill-rows")
      prefill_rows = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: cuda_quant_bench [--runs 5] [--layers 6] [--prefill-rows 4096]\n");
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device visible\n");
    return 1;
  }
  auto gpu = make_backend("cuda");
  std::printf("device: %s\n", gpu->name().c_str());

  // Copy bandwidth: 1 GiB device to device.
  const size_t copy_bytes = size_t{1} << 30;
  void* a = gpu->allocate(copy_bytes);
  void* b = gpu->allocate(copy_bytes);
  const double copy_s = median_seconds(*gpu, runs, [&] {
    for (int i = 0; i < 4; ++i) gpu->copy_on_device(i % 2 ? a : b, i % 2 ? b : a, copy_bytes);
  });
  const double copy_gbs = 4.0 * 2 * static_cast<double>(copy_bytes) / copy_s / 1e9;
  gpu->deallocate(a);
  gpu->deallocate(b);
  std::printf("copy bandwidth (read + write): %.0f GB/s\n\n", copy_gbs);

  int64_t max_k = 0, max_n = 0;
  for (const Shape& s : kShapes) max_k = std::max(max_k, s.k), max_n = std::max(max_n, s.n);
  std::mt19937_64 rng(1);
  std::vector<float> xs(static_cast<size_t>(prefill_rows * max_k));
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : xs) v = nd(rng);
  auto* x = static_cast<float*>(gpu->allocate(xs.size() * sizeof(float)));
  gpu->copy_to_device(x, xs.data(), xs.size() * sizeof(float));
  auto* out = static_cast<float*>(gpu->allocate(static_cast<size_t>(prefill_rows * max_n) * sizeof(float)));

  std::printf("%-24s %9s %9s %7s %9s %7s %12s %8s %29s %7s\n", "format", "MB/layer", "b1 GB/s", "/copy", "b8 GB/s",
              "/copy", "prefill tok/s", "/bf16", "split-K b1 GB/s by segs 1/2/4", "/split");
  double bf16_prefill = 0;
  for (const Format& f : kFormats) {
    std::vector<Weight> w;  // [layer][shape]
    double layer_bytes = 0;
    for (const Shape& s : kShapes) {
      const HostMatrix h = make_host(f, s.n, s.k, rng);
      layer_bytes += static_cast<double>(weight_bytes(h.w));
      for (int l = 0; l < layers; ++l) w.push_back(gpu->upload_weight(h.w));  // host -> device per layer
    }
    // Reorder to layer-major so a pass walks the layers like a forward.
    std::vector<Weight> by_layer;
    for (int l = 0; l < layers; ++l)
      for (size_t s = 0; s < std::size(kShapes); ++s)
        by_layer.push_back(w[s * static_cast<size_t>(layers) + static_cast<size_t>(l)]);
    const auto decode_pass = [&](int64_t rows) {
      return median_seconds(*gpu, runs, [&] {
        for (int rep = 0; rep < 4; ++rep)
          for (const Weight& m : by_layer) gpu->matmul(x, rows, m, nullptr, out);
      });
    };
    const double bytes = 4.0 * layers * layer_bytes;
    const double b1 = bytes / decode_pass(1) / 1e9, b8 = bytes / decode_pass(8) / 1e9;
    double by_segs[3] = {0, 0, 0}, split_default = 0;
    if (f.format != WeightFormat::Dense || f.scale_dtype == DType::I8) {
      cuda::set_quant_decode_stream(false);
      for (int i = 0; i < 3; ++i) {
        if (f.bits == 8 && i == 2) continue;  // 8-bit codes: at most 2 segments per warp
        cuda::set_quant_decode_segments(1 << i);
        by_segs[i] = bytes / decode_pass(1) / 1e9;
      }
      cuda::set_quant_decode_segments(0);
      cuda::set_quant_decode_stream(true);
      split_default = by_segs[f.bits == 8 ? 1 : 2];
    }
    const double prefill_s = median_seconds(*gpu, std::max(1, runs / 2), [&] {
      for (size_t s = 0; s < std::size(kShapes); ++s) gpu->matmul(x, prefill_rows, by_layer[s], nullptr, out);
    });
    const double tok_s = static_cast<double>(prefill_rows) / prefill_s;  // one layer's four matmuls
    if (f.format == WeightFormat::Dense && f.scale_dtype == DType::BF16) bf16_prefill = tok_s;
    std::printf("%-24s %9.1f %9.0f %7.3f %9.0f %7.3f %12.0f %8.3f %15.0f%7.0f%7.0f %7.3f\n", f.name, layer_bytes / 1e6,
                b1, b1 / copy_gbs, b8, b8 / copy_gbs, tok_s, bf16_prefill > 0 ? tok_s / bf16_prefill : 0.0, by_segs[0],
                by_segs[1], by_segs[2], split_default > 0 ? b1 / split_default : 0.0);
    std::fflush(stdout);
  }
  std::printf("\n(b1/b8: batch-1/8 decode matmuls over %d layers; prefill: %lld tokens through one layer's matmuls)\n",
              layers, static_cast<long long>(prefill_rows));
  return 0;
}
