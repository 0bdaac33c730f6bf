// Every op of the CUDA backend against the scalar reference, on awkward sizes (rows not a
// multiple of the 16-row MMA tile, columns not a multiple of the 128-column tile, k spanning
// partial 512-k segments), plus the exactness property of DESIGN.md: a row's bits do not
// depend on the batch, across the skinny (<= 64 rows) and tiled matmul kernels and across
// attention query tiles. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/tf32_chunk_attention.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_wgmma.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/matmul_stream.cuh"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

// The fusions some tests count are the Hopper kernels' (the streaming matmul's norm, the wgmma
// epilogues); the pre-Hopper kernels (an older GPU, or TACHYON_CUDA_ARCH) run those ops unfused,
// with the same bits.
bool hopper_fusions() { return cuda::device_arch().hopper; }

// Per-head attention sinks of the 8-head attention tests (gpt-oss style), of both signs and zero.
const std::vector<float> kHeadSinks = {0.5f, -1.f, 2.f, 0.f, 1.f, 1.f, -3.f, 0.25f};

// A cache as write_kv leaves it: values rounded to the attention's operand format.
std::vector<float> operand_cache(size_t n, std::mt19937& rng) {
  auto cache = random_vec(n, rng);
  for (float& x : cache) x = cpu::round_attention_operand(x);
  return cache;
}

// Attention against the f32 reference: a TACHYON_ATTENTION_BF16 build (7-bit mantissa operands)
// is held 8x looser than the tf32 one (10-bit).
double attention_operand_scale() { return cpu::kCudaAttentionOperands == cpu::AttentionOperands::kBf16 ? 8 : 1; }

TEST_F(CudaKernels, MatmulMatchesReference) {
  for (auto [rows, n, k] : {std::tuple{1, 72, 64}, {5, 200, 96}, {16, 136, 130}, {17, 1000, 520}, {64, 264, 1100},
                            {65, 130, 64}, {130, 300, 1100}, {300, 520, 2048}}) {
    const auto wf = random_vec(static_cast<size_t>(n * k), rng, 0.05f);
    const auto wb = to_bf16(wf);
    const auto bias = random_vec(static_cast<size_t>(n), rng);
    const auto x = random_vec(static_cast<size_t>(rows * k), rng);
    const Weight host_w{wb.data(), DType::BF16, n, k}, host_b{bias.data(), DType::F32, 1, n};
    const Weight w = gpu->upload_weight(host_w), b = gpu->upload_weight(host_b);
    float* out = poisoned(static_cast<size_t>(rows * n));
    gpu->matmul(upload(x), rows, w, &b, out);
    std::vector<float> expect(static_cast<size_t>(rows * n));
    ref->matmul(x.data(), rows, host_w, &host_b, expect.data());
    EXPECT_LT(rel_l2(download(out, expect.size()), expect), 4e-3) << rows << "x" << n << "x" << k;
  }
}

TEST_F(CudaKernels, MatmulF32AndF16WeightsAreConvertedToBf16) {
  const int64_t rows = 3, n = 40, k = 48;
  const auto wf = random_vec(static_cast<size_t>(n * k), rng, 0.05f);
  std::vector<uint16_t> wh;
  for (float v : wf) wh.push_back(f32_to_f16(v));
  const auto x = random_vec(static_cast<size_t>(rows * k), rng);
  std::vector<float> expect(static_cast<size_t>(rows * n));
  const Weight host_f{wf.data(), DType::F32, n, k};
  ref->matmul(x.data(), rows, host_f, nullptr, expect.data());
  for (const Weight& host : {host_f, Weight{wh.data(), DType::F16, n, k}}) {
    float* out = poisoned(expect.size());
    gpu->matmul(upload(x), rows, gpu->upload_weight(host), nullptr, out);
    EXPECT_LT(rel_l2(download(out, expect.size()), expect), 4e-3) << dtype_name(host.dtype);
  }
}

// The same row through the split-K kernel (1 to 64 rows: its four instantiations), the older
// skinny kernel, the streaming kernel (1 and 7 rows),
// the batched kernel (17-64 rows; k split over CTAs and whole) and the tiled one
// (65, 200 rows), at different places in the batch: identical bits.
TEST_F(CudaKernels, MatmulRowIsBitIdenticalWhateverTheBatchOrKernel) {
  for (int64_t k : {64, 1100, 4096}) {
    const int64_t n = 264, big = 200;
    const auto wb = to_bf16(random_vec(static_cast<size_t>(n * k), rng, 0.05f));
    const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, n, k});
    const auto x = random_vec(static_cast<size_t>(big * k), rng);
    float* dx = upload(x);
    float* all = poisoned(static_cast<size_t>(big * n));
    gpu->matmul(dx, big, w, nullptr, all);
    const auto batched = download(all, static_cast<size_t>(big * n));
    for (int variant : {cuda::kDecodeSplitK, cuda::kDecodeSplitKShared, cuda::kDecodeWide, cuda::kDecodeBatched,
                        cuda::kDecodeBatchedWhole, cuda::kDecodeStream}) {
      cuda::set_decode_matmul_variant(variant);
      for (int64_t rows : {1, 7, 9, 17, 33, 64, 65}) {
        for (int64_t first : {int64_t{0}, big - rows, int64_t{3}}) {
          float* part = poisoned(static_cast<size_t>(rows * n));
          gpu->matmul(dx + first * k, rows, w, nullptr, part);
          const auto got = download(part, static_cast<size_t>(rows * n));
          EXPECT_EQ(0, std::memcmp(got.data(), batched.data() + first * n, got.size() * sizeof(float)))
              << "k " << k << ", rows [" << first << ", " << first + rows << "), variant " << variant;
        }
      }
    }
    cuda::set_decode_matmul_variant(cuda::kDecodeAuto);
  }
}

// The streaming kernel on matrices large enough that each CTA owns several rounds of n-tiles
// (narrower last rounds, uneven shares) and its ring wraps many times (k = 12288: 24 segments per
// n-tile), with a short last segment (k = 1100) and a bias: the bits of the prefill kernel's rows.
// At 3 and 8 rows of k 12288 and 8 rows of k 6144, x does not fit whole and comes by segments:
// two rounds (n 12000), one round of 3-4 n-tiles and a ragged last one (n 4100: down's shape),
// one n-tile per CTA (n 520: most warps have no unit in most segments). Where a matrix has more
// n-tiles than the rings' first fill (n 8200 of k 1100, n 12000, n 4100 at one row) the CTAs take
// the rest from a counter, which every launch leaves at zero.
TEST_F(CudaKernels, StreamingDecodeMatmulGivesTheBitsOfEveryOtherKernel) {
  TACHYON_SKIP_WITHOUT_HOPPER_KERNELS();
  EXPECT_TRUE(cuda::stream_tiles(1, 8200, 1100).taken);
  EXPECT_TRUE(cuda::stream_tiles(8, 8200, 1100).taken);
  EXPECT_TRUE(cuda::stream_tiles(1, 4100, 12288).taken);
  EXPECT_FALSE(cuda::stream_tiles(1, 1000, 4096).taken);  // 125 n-tiles: one CTA each
  for (auto [n, k] : {std::pair{int64_t{8200}, int64_t{1100}}, {12000, 12288}, {1000, 4096}, {4100, 12288},
                      {520, 6144}}) {
    const int64_t big = 72;
    const auto wb = to_bf16(random_vec(static_cast<size_t>(n * k), rng, 0.05f));
    const auto bias = random_vec(static_cast<size_t>(n), rng);
    const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, n, k});
    const Weight b = gpu->upload_weight(Weight{bias.data(), DType::F32, 1, n});
    float* dx = upload(random_vec(static_cast<size_t>(big * k), rng));
    float* all = poisoned(static_cast<size_t>(big * n));
    gpu->matmul(dx, big, w, &b, all);
    const auto batched = download(all, static_cast<size_t>(big * n));
    cuda::set_decode_matmul_variant(cuda::kDecodeStream);
    for (int64_t rows : {1, 3, 8}) {
      for (int64_t first : {int64_t{0}, big - rows}) {
        float* part = poisoned(static_cast<size_t>(rows * n));
        gpu->matmul(dx + first * k, rows, w, &b, part);
        const auto got = download(part, static_cast<size_t>(rows * n));
        EXPECT_EQ(0, std::memcmp(got.data(), batched.data() + first * n, got.size() * sizeof(float)))
            << "n " << n << ", k " << k << ", rows [" << first << ", " << first + rows << ")";
      }
    }
    cuda::set_decode_matmul_variant(cuda::kDecodeAuto);
    EXPECT_TRUE(cuda_stream_tile_counters_are_zero(*gpu)) << "n " << n << ", k " << k;
  }
}

// Taken n-tiles between launches that follow one another without a host wait (each starts
// streaming during the one before): a launch that read a counter before the previous one had
// reset it would skip or repeat n-tiles. 40 launches of three shapes in turn, directly and as a
// replayed graph: every output the bits of the same launch alone.
TEST_F(CudaKernels, StreamingMatmulsBackToBackTakeEveryNTileOnce) {
  TACHYON_SKIP_WITHOUT_HOPPER_KERNELS();
  struct Shape {
    int64_t n, k;
  };
  const std::vector<Shape> shapes = {{8200, 1100}, {4100, 4096}, {24000, 512}};
  cuda::set_decode_matmul_variant(cuda::kDecodeStream);
  std::vector<Weight> weights;
  std::vector<float*> xs, alone;
  for (const Shape& sh : shapes) {
    EXPECT_TRUE(cuda::stream_tiles(1, sh.n, sh.k).taken) << sh.n;
    const auto wb = to_bf16(random_vec(static_cast<size_t>(sh.n * sh.k), rng, 0.05f));
    weights.push_back(gpu->upload_weight(Weight{wb.data(), DType::BF16, sh.n, sh.k}));
    xs.push_back(upload(random_vec(static_cast<size_t>(sh.k), rng)));
    alone.push_back(poisoned(static_cast<size_t>(sh.n)));
    gpu->matmul(xs.back(), 1, weights.back(), nullptr, alone.back());
    gpu->synchronize();
  }
  std::vector<float*> outs;
  for (int i = 0; i < 40; ++i) outs.push_back(poisoned(static_cast<size_t>(shapes[static_cast<size_t>(i) % 3].n)));
  for (bool graphs : {false, true}) {
    cuda_graphs_enable(*gpu, graphs);
    for (int pass = 0; pass < (graphs ? 2 : 1); ++pass) {  // with graphs: captured, then replayed
      for (int i = 0; i < 40; ++i) {
        const std::vector<float> poison(static_cast<size_t>(shapes[static_cast<size_t>(i) % 3].n), NAN);
        gpu->copy_to_device(outs[static_cast<size_t>(i)], poison.data(), poison.size() * sizeof(float));
      }
      gpu->synchronize();
      for (int i = 0; i < 40; ++i) {
        const size_t s = static_cast<size_t>(i) % shapes.size();
        gpu->matmul(xs[s], 1, weights[s], nullptr, outs[static_cast<size_t>(i)]);
      }
      for (int i = 0; i < 40; ++i) {
        const size_t s = static_cast<size_t>(i) % shapes.size(), n = static_cast<size_t>(shapes[s].n);
        const auto got = download(outs[static_cast<size_t>(i)], n), expect = download(alone[s], n);
        EXPECT_EQ(0, std::memcmp(got.data(), expect.data(), n * sizeof(float)))
            << "launch " << i << (graphs ? ", graphs, pass " + std::to_string(pass) : ", direct");
      }
      EXPECT_TRUE(cuda_stream_tile_counters_are_zero(*gpu));
    }
  }
  cuda_graphs_enable(*gpu, false);
  cuda::set_decode_matmul_variant(cuda::kDecodeAuto);
}

// gated_matmul applies the activation while converting the wgmma kernel's input (prefill rows)
// and falls back to the two ops elsewhere (decode rows): the bits of gated_activation then
// matmul, for both activations.
TEST_F(CudaKernels, GatedMatmulGivesTheBitsOfTheActivationThenTheMatmul) {
  struct Case {
    int64_t rows, n, k;
    bool fused;
  };
  for (const Case& c : {Case{1, 8200, 1100, false}, {8, 16400, 2050, false}, {20, 300, 1100, false},
                        {100, 300, 2050, true}, {300, 1000, 4096, true}}) {
    const auto wb = to_bf16(random_vec(static_cast<size_t>(c.n * c.k), rng, 0.05f));
    const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, c.n, c.k});
    float* gate_up = upload(random_vec(static_cast<size_t>(c.rows * 2 * c.k), rng));
    EXPECT_EQ(c.fused, cuda::matmul_gated_fuses(c.rows, c.n, c.k, c.rows > 64)) << c.rows << " rows";
    for (auto act : {Activation::SiLU, Activation::GeluTanh}) {
      float* h = poisoned(static_cast<size_t>(c.rows * c.k));
      float* expect = poisoned(static_cast<size_t>(c.rows * c.n));
      gpu->gated_activation(gate_up, c.rows, c.k, act, h);
      gpu->matmul(h, c.rows, w, nullptr, expect);
      float* got = poisoned(static_cast<size_t>(c.rows * c.n));
      gpu->gated_matmul(gate_up, c.rows, c.k, act, w, poisoned(static_cast<size_t>(c.rows * c.k)), got);
      const auto a = download(got, static_cast<size_t>(c.rows * c.n)), b = download(expect, a.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << c.rows << " x " << c.n << " x " << c.k << (act == Activation::GeluTanh ? ", gelu" : ", silu");
    }
  }
}

// gated_mlp at prefill rows: the gate_up GEMM's tiles write the activated rows as the down GEMM's
// bf16 input. The bits of its two matmuls (a backend with CudaOptions::gated_mlp_fusion off), at both tile widths
// and by shape, for both activations, with a k tail (hidden 1100), last tiles holding fewer
// activation columns than their width (inter 1024 and 640 at 96 per tile: the gate half's tail
// reads up rows, the up half runs past the weight), a pair whose second row block lies past the
// rows (100 rows), and rows that are not a multiple of 8; 64 rows or fewer and an inter that is not
// a multiple of 64 take the two matmuls (the fused calls are counted).
TEST_F(CudaKernels, GatedMlpGivesTheBitsOfItsTwoMatmuls) {
  auto plain = cuda_backend_with([](CudaOptions& o) { o.gated_mlp_fusion = false; });
  struct Case {
    int64_t rows, hidden, inter, n;
    bool fused;
  };
  for (const Case& c : {Case{20, 1100, 1024, 300, false}, {100, 1100, 1024, 300, true}, {300, 512, 4096, 1000, true},
                        {1001, 1024, 640, 520, true}, {200, 512, 1000, 256, false}}) {
    const auto wgu = to_bf16(random_vec(static_cast<size_t>(2 * c.inter * c.hidden), rng, 0.05f));
    const auto wd = to_bf16(random_vec(static_cast<size_t>(c.n * c.inter), rng, 0.05f));
    const auto x = random_vec(static_cast<size_t>(c.rows * c.hidden), rng);
    const auto run = [&](Backend& be, Activation act) {
      const Weight gate_up_w = be.upload_weight(Weight{wgu.data(), DType::BF16, 2 * c.inter, c.hidden});
      const Weight down_w = be.upload_weight(Weight{wd.data(), DType::BF16, c.n, c.inter});
      DeviceFloats buffers(be);
      float *dx = buffers.copy(x), *out = buffers.poisoned(c.rows * c.n);
      be.gated_mlp(dx, c.rows, gate_up_w, down_w, act, buffers.poisoned(c.rows * 2 * c.inter),
                   buffers.poisoned(c.rows * c.inter), out);
      return buffers.download(out, c.rows * c.n);
    };
    for (auto act : {Activation::SiLU, Activation::GeluTanh}) {
      const auto want = run(*plain, act);
      for (int cols : {128, 192, 0}) {
        cuda::set_wgmma_columns(cols);
        const uint64_t before = cuda_fused_gated_mlps(*gpu);
        const auto got = run(*gpu, act);
        EXPECT_EQ(cuda_fused_gated_mlps(*gpu), before + (c.fused && hopper_fusions() ? 1 : 0)) << c.rows << " rows, inter " << c.inter;
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << c.rows << " rows, hidden " << c.hidden << ", inter " << c.inter << ", n " << c.n << ", columns "
            << cols << (act == Activation::GeluTanh ? ", gelu" : ", silu");
      }
      if (c.rows != 100) continue;  // one case against the reference backend (the scalar matmuls take a while)
      std::vector<float> gate_up(static_cast<size_t>(c.rows * 2 * c.inter)), h(static_cast<size_t>(c.rows * c.inter)),
          expect(want.size());
      ref->gated_mlp(x.data(), c.rows, Weight{wgu.data(), DType::BF16, 2 * c.inter, c.hidden},
                     Weight{wd.data(), DType::BF16, c.n, c.inter}, act, gate_up.data(), h.data(), expect.data());
      EXPECT_LT(rel_l2(want, expect), 1e-2) << (act == Activation::GeluTanh ? "gelu" : "silu");
    }
  }
  EXPECT_EQ(cuda_fused_gated_mlps(*plain), 0u);
}

// Prefill on wgmma (sm_90a, the weight's core-matrix copy) and on the mma.sync tiled kernel
// (CudaOptions::wgmma off): identical bits, with row, column and k tails and several k segments, at
// each wgmma tile width (128 and 192 columns; 192 over n = 131, 1024 and 4096 runs past the
// weight's last rows, 4096 with a pair's whole half-box outside) and the width chosen by shape,
// each with the epilogue's tensor stores (n % 4 == 0; boxes past n and rows past `rows` clipped)
// and without them: an odd n stores one float at a time, any other n two.
TEST_F(CudaKernels, WgmmaPrefillMatmulGivesTheBitsOfTheMmaSyncKernel) {
  TACHYON_SKIP_WITHOUT_HOPPER_KERNELS();
  auto mma = cuda_backend_with([](CudaOptions& o) { o.wgmma = false; });
  const auto run = [](Backend& be, const std::vector<uint16_t>& wb, const std::vector<float>& bias,
                      const std::vector<float>& x, int64_t rows, int64_t n, int64_t k) {
    const Weight w = be.upload_weight(Weight{wb.data(), DType::BF16, n, k});
    const Weight b = be.upload_weight(Weight{bias.data(), DType::F32, 1, n});
    auto* dx = static_cast<float*>(be.allocate(x.size() * sizeof(float)));
    auto* out = static_cast<float*>(be.allocate(static_cast<size_t>(rows * n) * sizeof(float)));
    be.copy_to_device(dx, x.data(), x.size() * sizeof(float));
    be.matmul(dx, rows, w, &b, out);
    std::vector<float> got(static_cast<size_t>(rows * n));
    be.copy_to_host(got.data(), out, got.size() * sizeof(float));
    be.deallocate(dx);
    be.deallocate(out);
    return got;
  };
  for (auto [rows, n, k] : {std::tuple{int64_t{65}, int64_t{131}, int64_t{64}}, {200, 264, 1100}, {130, 258, 520},
                            {1000, 300, 2050}, {512, 1024, 4096}, {1000, 4200, 1100}, {300, 4096, 600},
                            {520, 6144, 512}}) {
    const auto wb = to_bf16(random_vec(static_cast<size_t>(n * k), rng, 0.05f));
    const auto bias = random_vec(static_cast<size_t>(n), rng);
    const auto x = random_vec(static_cast<size_t>(rows * k), rng);
    const auto want_bits = run(*mma, wb, bias, x, rows, n, k);
    for (bool tma_store : {true, false})
      for (int cols : {128, 192, 0}) {
        cuda::set_wgmma_tma_store(tma_store);
        cuda::set_wgmma_columns(cols);
        const auto got = run(*gpu, wb, bias, x, rows, n, k);
        EXPECT_EQ(0, std::memcmp(got.data(), want_bits.data(), got.size() * sizeof(float)))
            << rows << "x" << n << "x" << k << ", columns " << cols << (tma_store ? ", tensor stores" : "");
      }
    cuda::set_wgmma_tma_store(true);
    if (rows * n * k > 1'000'000'000) continue;  // the scalar reference would take seconds
    std::vector<float> want(want_bits.size());
    ref->matmul(x.data(), rows, Weight{wb.data(), DType::BF16, n, k}, nullptr, want.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c) want[r * n + c] += bias[c];
    EXPECT_LT(rel_l2(want_bits, want), 1e-2) << rows << "x" << n << "x" << k;
  }
}

// copy_to_device inside a repeating step is staged and recorded with the step (the MTP head's
// hidden states): each sighting of the same step, issued directly, captured or replayed, reads
// that step's host bytes, and the host buffer may change right after the call.
TEST_F(CudaKernels, CopyToDeviceInARepeatingStepReadsEachStepsBytes) {
  const int64_t n = 1000;
  float* dst = poisoned(static_cast<size_t>(n));
  float* acc = upload(std::vector<float>(static_cast<size_t>(n), 0.f));
  std::vector<float> host(static_cast<size_t>(n)), expect(static_cast<size_t>(n), 0.f);
  for (int step = 0; step < 5; ++step) {  // sightings 1 (direct), 2 (capture), 3-5 (replays)
    {
      const RepeatingStepHint hint(*gpu, true);
      for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(step * 1000 + i);
      gpu->copy_to_device(dst, host.data(), host.size() * sizeof(float));
      std::fill(host.begin(), host.end(), -1.f);  // the call has taken its bytes
      gpu->add(acc, dst, n);
    }
    for (int64_t i = 0; i < n; ++i) expect[i] += static_cast<float>(step * 1000 + i);
    EXPECT_EQ(download(acc, static_cast<size_t>(n)), expect) << "step " << step;
  }
  const auto c = cuda_graph_counters(*gpu);
  EXPECT_GT(c.replays, 0u) << "the repeated step was never replayed";
}

// Greedy sampling on the device: the first index of each row's maximum (planted ties).
TEST_F(CudaKernels, ArgmaxReturnsTheFirstMaximum) {
  const int64_t rows = 5, n = 151936;
  auto x = random_vec(static_cast<size_t>(rows * n), rng);
  const int64_t planted[rows] = {0, n - 1, 77777, 5, 100000};
  for (int64_t r = 0; r < rows; ++r) x[r * n + planted[r]] = 10.f;
  x[3 * n + 9] = 10.f;  // a tie after the planted maximum: the first one wins
  x[4 * n + 100001] = 10.f;
  auto* ids = static_cast<int32_t*>(gpu->allocate(rows * sizeof(int32_t)));
  gpu->argmax(upload(x), rows, n, ids);
  std::vector<int32_t> got(rows);
  gpu->copy_to_host(got.data(), ids, rows * sizeof(int32_t));
  gpu->deallocate(ids);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[r], planted[r]) << "row " << r;
  // Rows of 1001: every other one not 16-byte aligned (visited one element at a time), the others
  // by float4 with a 1-element tail; maxima planted in the tail, at the start, between NaNs, and
  // a row of -inf and NaN only (the first -inf).
  const int64_t odd = 1001;
  auto y = random_vec(static_cast<size_t>(rows * odd), rng);
  const int64_t odd_planted[rows] = {1000, 0, 999, 500, 3};
  for (int64_t r = 0; r < rows; ++r) y[r * odd + odd_planted[r]] = 10.f;
  y[3 * odd + 499] = std::nanf(""), y[3 * odd + 501] = std::nanf(""), y[3 * odd + 700] = 10.f;
  for (int64_t i = 0; i < odd; ++i) y[4 * odd + i] = i % 3 ? -INFINITY : std::nanf("");
  const int64_t odd_expect[rows] = {1000, 0, 999, 500, 1};
  ids = static_cast<int32_t*>(gpu->allocate(rows * sizeof(int32_t)));
  gpu->argmax(upload(y), rows, odd, ids);
  gpu->copy_to_host(got.data(), ids, rows * sizeof(int32_t));
  gpu->deallocate(ids);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[r], odd_expect[r]) << "row " << r << " of " << odd;
}

// A drafter level's choice on the device: the host definition's indices exactly (ties: the
// first maximum; the runner-up also ties with the maximum or comes first among its equals) and
// its probabilities within rounding.
TEST_F(CudaKernels, TopTwoIsTheHostDefinition) {
  const int64_t rows = 5, n = 8192;
  auto x = random_vec(static_cast<size_t>(rows * n), rng);
  x[0 * n + 17] = 9.f;                                      // a clear best, second from the noise
  x[1 * n + 4000] = 9.f, x[1 * n + 12] = 9.f;               // a tie: best 12, second 4000
  x[2 * n + n - 1] = 9.f, x[2 * n + 3] = 8.f, x[2 * n + 5] = 8.f;  // second: the first of two equals
  x[3 * n + 0] = 9.f;
  x[4 * n + 77] = 50.f;                                     // p_best ~ 1, p_second ~ 0
  auto* out = static_cast<TopTwo*>(gpu->allocate(rows * sizeof(TopTwo)));
  gpu->top_two(upload(x), rows, n, out);
  std::vector<TopTwo> got(rows);
  gpu->copy_to_host(got.data(), out, rows * sizeof(TopTwo));
  gpu->deallocate(out);
  for (int64_t r = 0; r < rows; ++r) {
    const TopTwo want = top_two_of_row(x.data() + r * n, n);
    EXPECT_EQ(got[r].best, want.best) << "row " << r;
    EXPECT_EQ(got[r].second, want.second) << "row " << r;
    EXPECT_NEAR(got[r].p_best, want.p_best, 1e-5f * std::max(1.f, want.p_best)) << "row " << r;
    EXPECT_NEAR(got[r].p_second, want.p_second, 1e-5f * std::max(1.f, want.p_second)) << "row " << r;
  }
  EXPECT_EQ(got[1].best, 12);
  EXPECT_EQ(got[1].second, 4000);
  EXPECT_EQ(got[2].second, 3);
}

// The fused residual add + norm gives the bits of add then rms_norm (wide rows: the wide fused
// kernel; rows up to 1024: the warp-per-row fused kernel; wide unaligned rows: the default's two
// kernels).
TEST_F(CudaKernels, AddRmsNormIsAddThenRmsNorm) {
  for (int64_t dim : {int64_t{4096}, int64_t{200}, int64_t{384}, int64_t{1000}, int64_t{2050}}) {
    const int64_t rows = 11;
    const auto wv = random_vec(static_cast<size_t>(dim), rng);
    const Weight w = gpu->upload_weight(Weight{wv.data(), DType::F32, 1, dim});
    const auto x = random_vec(static_cast<size_t>(rows * dim), rng), y = random_vec(x.size(), rng);
    float *x1 = upload(x), *x2 = upload(x), *dy = upload(y), *o1 = poisoned(x.size()), *o2 = poisoned(x.size());
    gpu->add(x1, dy, rows * dim);
    gpu->rms_norm(x1, w, rows, dim, 1e-6f, 0.f, o1);
    gpu->add_rms_norm(x2, dy, w, rows, dim, 1e-6f, 0.f, o2);
    const auto a = download(o1, x.size()), b = download(o2, x.size());
    const auto xa = download(x1, x.size()), xb = download(x2, x.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "dim " << dim;
    EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float))) << "dim " << dim;
  }
}

// At prefill rows, add_rms_norm waits for the op after it: a prefill matmul or gated MLP of its
// output takes the norm's own bf16 core-order copy of it (no conversion). The bits of a backend
// with CudaOptions::prefill_norm_fusion off in x, out and the products, with rows not a multiple of 8 or of
// 128 (the copy's padding rows), both tile widths by shape, a matmul of another buffer after the
// norm (no fusion: the norm runs first) and a narrow dim (no wide path: never fused).
TEST_F(CudaKernels, AddRmsNormAtPrefillRowsWritesTheNextMatmulsInput) {
  auto plain = cuda_backend_with([](CudaOptions& o) { o.prefill_norm_fusion = false; });
  struct Case {
    int64_t rows, dim, n, inter;
    bool fused;
  };
  for (const Case& c : {Case{65, 1024, 264, 640, true}, {300, 4096, 1000, 1024, true}, {1001, 1024, 6144, 640, true},
                        {300, 384, 264, 640, false}}) {
    const auto wn = random_vec(static_cast<size_t>(c.dim), rng), wn2 = random_vec(wn.size(), rng);
    const auto wm = to_bf16(random_vec(static_cast<size_t>(c.n * c.dim), rng, 0.05f));
    const auto wgu = to_bf16(random_vec(static_cast<size_t>(2 * c.inter * c.dim), rng, 0.05f));
    const auto wd = to_bf16(random_vec(static_cast<size_t>(c.dim * c.inter), rng, 0.05f));
    const auto x = random_vec(static_cast<size_t>(c.rows * c.dim), rng), y = random_vec(x.size(), rng);
    const auto run = [&](Backend& be) {
      const Weight norm_w = be.upload_weight(Weight{wn.data(), DType::F32, 1, c.dim});
      const Weight norm_w2 = be.upload_weight(Weight{wn2.data(), DType::F32, 1, c.dim});
      const Weight w = be.upload_weight(Weight{wm.data(), DType::BF16, c.n, c.dim});
      const Weight gate_up_w = be.upload_weight(Weight{wgu.data(), DType::BF16, 2 * c.inter, c.dim});
      const Weight down_w = be.upload_weight(Weight{wd.data(), DType::BF16, c.dim, c.inter});
      DeviceFloats buffers(be);
      const int64_t xn = c.rows * c.dim;
      float *dx = buffers.copy(x), *dy = buffers.copy(y), *out = buffers.poisoned(xn), *out2 = buffers.poisoned(xn);
      float *out3 = buffers.poisoned(xn), *prod = buffers.poisoned(c.rows * c.n), *mlp = buffers.poisoned(xn);
      float* other = buffers.poisoned(c.rows * c.n);
      // Scratch first: a copy to the device between the norm and its matmul would run the norm.
      float *gate_up = buffers.poisoned(c.rows * 2 * c.inter), *act = buffers.poisoned(c.rows * c.inter);
      be.add_rms_norm(dx, dy, norm_w, c.rows, c.dim, 1e-6f, 0.f, out);
      be.matmul(out, c.rows, w, nullptr, prod);
      be.add_rms_norm(dx, dy, norm_w2, c.rows, c.dim, 1e-6f, 1.f, out2);
      be.gated_mlp(out2, c.rows, gate_up_w, down_w, Activation::SiLU, gate_up, act, mlp);
      be.add_rms_norm(dx, mlp, norm_w, c.rows, c.dim, 1e-6f, 0.f, out3);
      be.matmul(out, c.rows, w, nullptr, other);  // not the norm's output: the norm runs first
      std::vector<float> got;
      for (auto [p, count] : {std::pair{dx, xn}, {out, xn}, {prod, c.rows * c.n}, {out2, xn}, {mlp, xn}, {out3, xn},
                              {other, c.rows * c.n}}) {
        const auto v = buffers.download(p, count);
        got.insert(got.end(), v.begin(), v.end());
      }
      return got;
    };
    const uint64_t before = cuda_fused_prefill_norms(*gpu);
    const auto got = run(*gpu), want = run(*plain);
    EXPECT_EQ(cuda_fused_prefill_norms(*gpu), before + (c.fused && hopper_fusions() ? 2 : 0)) << c.rows << " rows, dim " << c.dim;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << c.rows << " rows, dim " << c.dim;
  }
  EXPECT_EQ(cuda_fused_prefill_norms(*plain), 0u);
}

// At decode rows, add_rms_norm waits for the op after it: a matmul of its output on the
// streaming kernel computes the norm in its staging (one launch). The bits of the two ops in
// turn (x, the normed rows and the product), with and without bias, at 1-8 rows (the kernel's
// limit; the backend here fuses up to 8, by default up to 4); the launch is fused where it can
// be and not where the matmul does not read the norm's output or does not stream. n 16392: a
// wide fused launch, whose ring is deeper than the unfused launch's (normed_stream_slots).
TEST_F(CudaKernels, AddRmsNormFusedIntoTheStreamingMatmulGivesTheBitsOfTheTwoOps) {
  TACHYON_SKIP_WITHOUT_HOPPER_KERNELS();
  gpu = cuda_backend_with([](CudaOptions& o) { o.fused_norm_rows = 8; });
  struct Case {
    int64_t dim, n;
  };
  for (const Case c : {Case{4096, 2048}, Case{2052, 4104}, Case{4096, 16392}}) {
    const auto wv = random_vec(static_cast<size_t>(c.dim), rng);
    const Weight norm_w = gpu->upload_weight(Weight{wv.data(), DType::F32, 1, c.dim});
    const auto wb = to_bf16(random_vec(static_cast<size_t>(c.n * c.dim), rng, 0.05f));
    const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, c.n, c.dim});
    const auto bias = random_vec(static_cast<size_t>(c.n), rng);
    const Weight b = gpu->upload_weight(Weight{bias.data(), DType::F32, 1, c.n});
    for (int64_t rows : {1, 3, 8}) {
      if (rows > 1 && c.n < 4096) continue;  // streams at one row only
      for (const Weight* bp : {static_cast<const Weight*>(nullptr), &b}) {
        const auto x = random_vec(static_cast<size_t>(rows * c.dim), rng), y = random_vec(x.size(), rng);
        float *x1 = upload(x), *x2 = upload(x), *dy = upload(y);
        float *h1 = poisoned(x.size()), *h2 = poisoned(x.size());
        float *o1 = poisoned(static_cast<size_t>(rows * c.n)), *o2 = poisoned(static_cast<size_t>(rows * c.n));
        const uint64_t before = cuda_fused_norm_launches(*gpu);
        gpu->add_rms_norm(x1, dy, norm_w, rows, c.dim, 1e-6f, 1.f, h1);
        gpu->matmul(h1, rows, w, bp, o1);
        EXPECT_EQ(cuda_fused_norm_launches(*gpu), before + 1) << "dim " << c.dim << ", rows " << rows;
        gpu->add_rms_norm(x2, dy, norm_w, rows, c.dim, 1e-6f, 1.f, h2);
        gpu->synchronize();  // the norm launches alone
        gpu->matmul(h2, rows, w, bp, o2);
        EXPECT_EQ(cuda_fused_norm_launches(*gpu), before + 1);
        const std::string where = "dim " + std::to_string(c.dim) + ", rows " + std::to_string(rows);
        EXPECT_EQ(download(x1, x.size()), download(x2, x.size())) << where;
        const auto ha = download(h1, x.size()), hb = download(h2, x.size());
        EXPECT_EQ(0, std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float))) << where;
        const auto oa = download(o1, static_cast<size_t>(rows * c.n)), ob = download(o2, oa.size());
        EXPECT_EQ(0, std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float))) << where;
      }
    }
  }
  // A matmul that does not read the norm's output, and one that does not stream (a small
  // matrix): the norm launches first, the results are the two ops'.
  const int64_t dim = 1024, n = 64;
  const auto wv = random_vec(static_cast<size_t>(dim), rng);
  const Weight norm_w = gpu->upload_weight(Weight{wv.data(), DType::F32, 1, dim});
  const auto wb = to_bf16(random_vec(static_cast<size_t>(n * dim), rng, 0.05f));
  const Weight w = gpu->upload_weight(Weight{wb.data(), DType::BF16, n, dim});
  const auto x = random_vec(static_cast<size_t>(dim), rng), y = random_vec(x.size(), rng);
  float *dx = upload(x), *dy = upload(y), *h = poisoned(x.size()), *o = poisoned(static_cast<size_t>(n));
  const uint64_t before = cuda_fused_norm_launches(*gpu);
  gpu->add_rms_norm(dx, dy, norm_w, 1, dim, 1e-6f, 0.f, h);
  gpu->matmul(dy, 1, w, nullptr, o);  // reads y, not the norm's output
  gpu->add_rms_norm(dx, dy, norm_w, 1, dim, 1e-6f, 0.f, h);
  gpu->matmul(h, 1, w, nullptr, o);
  EXPECT_EQ(cuda_fused_norm_launches(*gpu), before);
  std::vector<float> xx(x.size()), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) xx[i] = (x[i] + y[i]) + y[i];
  double ss = 0;
  for (float v : xx) ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
  for (size_t i = 0; i < x.size(); ++i) want[i] = static_cast<float>(wv[i] * xx[i] * inv);
  EXPECT_LT(rel_l2(download(dx, x.size()), xx), 1e-6);
  EXPECT_LT(rel_l2(download(h, x.size()), want), 1e-5);
}

// A decode step's chain of fused norms on one residual stream, with no host wait between launches:
// in each launch the CTA counted last writes the norm's rows back, and the next fused launch stages
// x + y from them. The bits of the same ops unfused (the norm launched alone), at 1 and 3 rows,
// through a square and a wide (deep-ring) matmul per layer.
TEST_F(CudaKernels, FusedNormsBackToBackGiveTheBitsOfTheOpsUnfused) {
  gpu = cuda_backend_with([](CudaOptions& o) { o.fused_norm_rows = 8; });
  auto plain = cuda_backend_with([](CudaOptions& o) { o.fused_norm_rows = 0; });
  const int64_t dim = 4096, wide = 16392, layers = 5;
  const auto wn = random_vec(static_cast<size_t>(dim), rng);
  const auto wsq = to_bf16(random_vec(static_cast<size_t>(dim * dim), rng, 0.02f));
  const auto wwide = to_bf16(random_vec(static_cast<size_t>(wide * dim), rng, 0.02f));
  for (int64_t rows : {1, 3}) {
    const auto x0 = random_vec(static_cast<size_t>(rows * dim), rng), d0 = random_vec(x0.size(), rng);
    const auto run = [&](Backend& be) {
      const Weight norm_w = be.upload_weight(Weight{wn.data(), DType::F32, 1, dim});
      const Weight sq = be.upload_weight(Weight{wsq.data(), DType::BF16, dim, dim});
      const Weight wd = be.upload_weight(Weight{wwide.data(), DType::BF16, wide, dim});
      DeviceFloats buf(be);
      float *x = buf.copy(x0), *d = buf.copy(d0), *h = buf.poisoned(rows * dim);
      std::vector<float*> a, g;
      for (int64_t l = 0; l < layers; ++l) {
        a.push_back(buf.poisoned(rows * dim));
        g.push_back(buf.poisoned(rows * wide));
        be.add_rms_norm(x, l == 0 ? d : a[l - 1], norm_w, rows, dim, 1e-6f, 1.f, h);
        be.matmul(h, rows, sq, nullptr, a[l]);
        be.add_rms_norm(x, a[l], norm_w, rows, dim, 1e-6f, 1.f, h);
        be.matmul(h, rows, wd, nullptr, g[l]);
      }
      std::vector<float> all = buf.download(x, rows * dim);
      const auto hv = buf.download(h, rows * dim);
      all.insert(all.end(), hv.begin(), hv.end());
      for (int64_t l = 0; l < layers; ++l) {
        const auto av = buf.download(a[l], rows * dim), gv = buf.download(g[l], rows * wide);
        all.insert(all.end(), av.begin(), av.end());
        all.insert(all.end(), gv.begin(), gv.end());
      }
      return all;
    };
    const uint64_t before = cuda_fused_norm_launches(*gpu);
    const auto got = run(*gpu);
    EXPECT_EQ(cuda_fused_norm_launches(*gpu), before + (hopper_fusions() ? 2 * layers : 0)) << rows << " rows";
    const auto want = run(*plain);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << rows << " rows";
  }
  EXPECT_EQ(cuda_fused_norm_launches(*plain), 0u);
}

TEST_F(CudaKernels, RowwiseOpsMatchReference) {
  const int64_t rows = 37, dim = 200;
  const auto wv = random_vec(static_cast<size_t>(dim), rng);
  const Weight host_w{wv.data(), DType::F32, 1, dim};
  const auto x = random_vec(static_cast<size_t>(rows * dim), rng);
  std::vector<float> expect(x.size());
  float* dx = upload(x);
  float* out = poisoned(x.size());
  gpu->rms_norm(dx, gpu->upload_weight(host_w), rows, dim, 1e-6f, 1.f, out);
  ref->rms_norm(x.data(), host_w, rows, dim, 1e-6f, 1.f, expect.data());
  EXPECT_LT(rel_l2(download(out, x.size()), expect), 1e-6) << "rms_norm";
  {  // wide rows take the block-per-row kernel
    const int64_t wide = 4096;
    const auto ww = random_vec(static_cast<size_t>(wide), rng);
    const Weight host_ww{ww.data(), DType::F32, 1, wide};
    const auto xw = random_vec(static_cast<size_t>(3 * wide), rng);
    std::vector<float> ew(xw.size());
    float* ow = poisoned(xw.size());
    gpu->rms_norm(upload(xw), gpu->upload_weight(host_ww), 3, wide, 1e-6f, 0.f, ow);
    ref->rms_norm(xw.data(), host_ww, 3, wide, 1e-6f, 0.f, ew.data());
    EXPECT_LT(rel_l2(download(ow, xw.size()), ew), 1e-6) << "rms_norm, wide rows";
  }

  for (auto act : {Activation::SiLU, Activation::GeluTanh}) {
    float* g = poisoned(x.size() / 2);
    gpu->gated_activation(dx, rows, dim / 2, act, g);
    std::vector<float> e(x.size() / 2);
    ref->gated_activation(x.data(), rows, dim / 2, act, e.data());
    const auto vectorised = download(g, e.size());
    EXPECT_LT(rel_l2(vectorised, e), 1e-6) << "gated_activation";
    // The same rows one float past a 16-byte boundary take the scalar kernel: the same bits.
    std::vector<float> padded(1, 0.f);
    padded.insert(padded.end(), x.begin(), x.end());
    float* shifted = upload(padded);
    float* gs = poisoned(x.size() / 2 + 1);
    gpu->gated_activation(shifted + 1, rows, dim / 2, act, gs + 1);
    const auto scalar = download(gs, e.size() + 1);
    EXPECT_EQ(0, std::memcmp(scalar.data() + 1, vectorised.data(), e.size() * sizeof(float))) << "gated_activation";
  }

  const auto y = random_vec(x.size(), rng);
  float* sum = upload(x);
  gpu->add(sum, upload(y), static_cast<int64_t>(x.size()));
  std::vector<float> e = x;
  ref->add(e.data(), y.data(), static_cast<int64_t>(e.size()));
  EXPECT_EQ(download(sum, e.size()), e) << "add";

  const std::vector<int32_t> pick = {36, 0, 5, 5};
  float* gathered = poisoned(pick.size() * dim);
  gpu->gather_rows(dx, pick.data(), 4, dim, gathered);
  std::vector<float> ge(pick.size() * dim);
  ref->gather_rows(x.data(), pick.data(), 4, dim, ge.data());
  EXPECT_EQ(download(gathered, ge.size()), ge) << "gather_rows";

  const int64_t vocab = 300, hidden = 96;  // hidden: not a multiple of the 64-column padding
  const auto table = to_bf16(random_vec(static_cast<size_t>(vocab * hidden), rng));
  const Weight host_t{table.data(), DType::BF16, vocab, hidden};
  const std::vector<int32_t> ids = {299, 0, 17, 128, 17};
  float* emb = poisoned(ids.size() * hidden);
  gpu->embedding(gpu->upload_weight(host_t), ids.data(), 5, 2.f, emb);
  std::vector<float> ee(ids.size() * hidden);
  ref->embedding(host_t, ids.data(), 5, 2.f, ee.data());
  EXPECT_EQ(download(emb, ee.size()), ee) << "embedding from the fragment layout";
}

TEST_F(CudaKernels, RopeMatchesReference) {
  const int64_t rows = 9, heads = 3, d = 64;
  for (bool interleaved : {false, true})
    for (int64_t rotary : {d, d / 2}) {
      RopeTable t;
      for (int64_t i = 0; i < rotary / 2; ++i) t.inv_freq.push_back(std::pow(10000.f, -2.f * i / rotary));
      t.rotary_dim = rotary;
      t.attention_scaling = 1.1f;
      t.interleaved = interleaved;
      std::vector<int32_t> pos = {0, 1, 2, 100, 4000, 5, 6, 7, 31};
      const auto x = random_vec(static_cast<size_t>(rows * heads * d), rng);
      float* dx = upload(x);
      gpu->rope(dx, rows, heads, d, t, pos.data());
      std::vector<float> e = x;
      ref->rope(e.data(), rows, heads, d, t, pos.data());
      EXPECT_LT(rel_l2(download(dx, e.size()), e), 1e-5) << interleaved << " " << rotary;
    }
}

// Paged attention over a scattered block table: three sequences (a long prefill, a decode
// row deep in its context, a short chunk), GQA, sliding window, softcap, sinks; then each
// sequence alone must give the same bits as in the batch.
TEST_F(CudaKernels, AttentionMatchesReferenceAndIsRowInvariant) {
  const auto oracle = make_backend("cpu-bf16");
  // Every query-tile shape (warps per CTA, chunk buffers); the default (8, 2) last, so it stays set.
  for (auto [warps, stages] : {std::pair{2, 1}, {8, 1}, {8, 2}})
  for (int64_t d : {16, 40, 64, 128, 256}) {
    // Every head_dim fits, on 99 KB with K and V apart (TACHYON_CUDA_ARCH=86, 89: head_dim 256).
    ASSERT_TRUE(cuda::attention_fits(static_cast<int>(d), 4));
    cuda::set_attention_tile_variant(warps, stages);
    SCOPED_TRACE(testing::Message() << "tile variant " << warps << "x" << stages);
    const int64_t heads = 8, kv_heads = 2, bs = 16, blocks = 96, width = kv_heads * d;
    const auto kc = operand_cache(static_cast<size_t>(blocks * bs * width), rng);
    const auto vc = operand_cache(kc.size(), rng);
    std::vector<int32_t> tables, offsets = {0};
    std::vector<int32_t> positions, row_seq;
    // seq 0: rows for positions 0..69 (prefill: query tiles); seq 1: one decode row at 700
    // (split-KV); seq 2: rows 30..44 (a short run: split-KV row by row).
    const std::vector<std::pair<int, int>> seqs = {{0, 70}, {700, 701}, {30, 45}};
    std::vector<int32_t> perm(blocks);
    for (int i = 0; i < blocks; ++i) perm[i] = (i * 17 + 5) % blocks;
    int next_block = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int need = seqs[s].second / static_cast<int>(bs) + 1;
      for (int b = 0; b < need; ++b) tables.push_back(perm[next_block++]);
      offsets.push_back(static_cast<int32_t>(tables.size()));
      for (int p = seqs[s].first; p < seqs[s].second; ++p) positions.push_back(p), row_seq.push_back(static_cast<int32_t>(s));
    }
    const int64_t rows = static_cast<int64_t>(positions.size());
    const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng);
    float* dq = upload(q);
    const PagedKv gkv{upload(kc), upload(vc), static_cast<int32_t>(bs), kv_heads, d};
    const PagedKv rkv{const_cast<float*>(kc.data()), const_cast<float*>(vc.data()), static_cast<int32_t>(bs), kv_heads, d};
    const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
    const std::vector<float>& sinks = kHeadSinks;
    const float* d_sinks = upload(sinks);
    for (int variant = 0; variant < 4; ++variant) {
      AttentionParams p;
      p.num_heads = heads;
      p.scale = 1.f / std::sqrt(float(d));
      if (variant == 1) p.sliding_window = 21;
      if (variant == 2) p.softcap = 3.f;
      if (variant == 3) p.sinks = d_sinks;  // device memory (an uploaded weight), host for the reference
      float* out = poisoned(q.size());
      gpu->attention(dq, rows, gkv, meta, p, out);
      const auto got = download(out, q.size());
      std::vector<float> expect(q.size());
      AttentionParams host_p = p;
      if (variant == 3) host_p.sinks = sinks.data();
      ref->attention(q.data(), rows, rkv, meta, host_p, expect.data());
      // Tensor cores take q, k, p and v as tf32 (10-bit mantissa): ~3e-4 from the f32 reference,
      // and the same arithmetic as cpu-bf16's (kernels/cpu/tf32_chunk_attention.h) up to the
      // order of f32 sums. A TACHYON_ATTENTION_BF16 build (7-bit mantissa) is held 8x looser,
      // as is its distance to the oracle (a p one ulp apart before rounding can round to bf16
      // neighbours 8x further apart).
      const double operand_scale = attention_operand_scale();
      std::vector<float> oracle_out(q.size());
      oracle->attention(q.data(), rows, rkv, meta, host_p, oracle_out.data());
      EXPECT_LT(rel_l2(got, expect), 2e-3 * operand_scale) << "d " << d << " variant " << variant;
      EXPECT_LT(rel_l2(got, oracle_out), 5e-5 * operand_scale) << "d " << d << " variant " << variant;
      std::printf("attention d %lld variant %d: rel_l2 %.3g vs reference, %.3g vs cpu-bf16\n",
                  static_cast<long long>(d), variant, rel_l2(got, expect), rel_l2(got, oracle_out));
      // Sequence 2 alone (as its own batch: row_seq 0, its own table).
      const int64_t first = 71, n = 15;
      std::vector<int32_t> t2(tables.begin() + offsets[2], tables.begin() + offsets[3]), o2 = {0, offsets[3] - offsets[2]};
      std::vector<int32_t> s2(static_cast<size_t>(n), 0);
      const AttentionMeta meta2{positions.data() + first, s2.data(), t2.data(), o2.data()};
      float* out2 = poisoned(static_cast<size_t>(n * heads * d));
      gpu->attention(dq + first * heads * d, n, gkv, meta2, p, out2);
      const auto alone = download(out2, static_cast<size_t>(n * heads * d));
      EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + first * heads * d, alone.size() * sizeof(float)))
          << "d " << d << " variant " << variant;
      // Rows 0..15 of sequence 0 alone take the split-KV decode kernel (a run of <= 16 rows, like
      // a verify step); batched, its 70 rows took query tiles: the same bits.
      std::vector<int32_t> t0(tables.begin() + offsets[0], tables.begin() + offsets[1]), o0 = {0, offsets[1] - offsets[0]};
      std::vector<int32_t> s0(16, 0);
      const AttentionMeta meta0{positions.data(), s0.data(), t0.data(), o0.data()};
      float* out0 = poisoned(static_cast<size_t>(16 * heads * d));
      gpu->attention(dq, 16, gkv, meta0, p, out0);
      const auto short_run = download(out0, static_cast<size_t>(16 * heads * d));
      EXPECT_EQ(0, std::memcmp(short_run.data(), got.data(), short_run.size() * sizeof(float)))
          << "short run vs query tiles, d " << d << " variant " << variant;
      // The decode row alone.
      std::vector<int32_t> t1(tables.begin() + offsets[1], tables.begin() + offsets[2]), o1 = {0, offsets[2] - offsets[1]};
      const int32_t zero = 0;
      const AttentionMeta meta1{positions.data() + 70, &zero, t1.data(), o1.data()};
      float* out1 = poisoned(static_cast<size_t>(heads * d));
      gpu->attention(dq + 70 * heads * d, 1, gkv, meta1, p, out1);
      const auto decode_alone = download(out1, static_cast<size_t>(heads * d));
      EXPECT_EQ(0, std::memcmp(decode_alone.data(), got.data() + 70 * heads * d, decode_alone.size() * sizeof(float)))
          << "decode row, d " << d << " variant " << variant;
      // A decode row at 350 beside one at 700 (16 chunks: the states merged through global
      // memory) and alone (8 chunks: one thread block cluster, whose merging CTA has no keys
      // under the sliding window): the same bits. Two sequences over sequence 1's blocks.
      const std::vector<int32_t> pair_positions = {350, 700}, pair_seqs = {0, 1};
      std::vector<int32_t> pair_tables = t1;
      pair_tables.insert(pair_tables.end(), t1.begin(), t1.end());
      const std::vector<int32_t> pair_offsets = {0, o1[1], 2 * o1[1]};
      const AttentionMeta pair_meta{pair_positions.data(), pair_seqs.data(), pair_tables.data(), pair_offsets.data()};
      float* out_pair = poisoned(static_cast<size_t>(2 * heads * d));
      gpu->attention(dq, 2, gkv, pair_meta, p, out_pair);
      const AttentionMeta mid_meta{pair_positions.data(), &zero, t1.data(), o1.data()};
      float* out_mid = poisoned(static_cast<size_t>(heads * d));
      gpu->attention(dq, 1, gkv, mid_meta, p, out_mid);
      const auto pair = download(out_pair, static_cast<size_t>(2 * heads * d));
      const auto mid_alone = download(out_mid, static_cast<size_t>(heads * d));
      EXPECT_EQ(0, std::memcmp(mid_alone.data(), pair.data(), mid_alone.size() * sizeof(float)))
          << "decode row in a cluster vs merged through global memory, d " << d << " variant " << variant;
    }
  }
}

// A long context: rows 4180..4199 of one sequence take query tiles together; alone, each is a
// decode row whose 66 chunks' states are merged by their own kernel. The same bits, with and
// without a sliding window (the merge then starts past chunk 0) and sinks.
TEST_F(CudaKernels, LongContextDecodeRowsMergedApartGiveTheQueryTilesBits) {
  for (int64_t d : {64, 128, 256}) {
    const int64_t heads = 8, kv_heads = 2, bs = 16, blocks = 64, width = kv_heads * d;
    const auto kc = operand_cache(static_cast<size_t>(blocks * bs * width), rng);
    const auto vc = operand_cache(kc.size(), rng);
    const int32_t first = 4180, n = 20;
    std::vector<int32_t> table;  // 263 blocks of context over the 64 of the cache, each used ~4 times
    for (int b = 0; b <= (first + n) / static_cast<int>(bs); ++b) table.push_back((b * 17 + 5) % static_cast<int>(blocks));
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(table.size())};
    std::vector<int32_t> positions(n), seqs(n, 0);
    for (int i = 0; i < n; ++i) positions[i] = first + i;
    const auto q = random_vec(static_cast<size_t>(n * heads * d), rng);
    float* dq = upload(q);
    const PagedKv gkv{upload(kc), upload(vc), static_cast<int32_t>(bs), kv_heads, d};
    const float* d_sinks = upload(kHeadSinks);
    for (int variant = 0; variant < 3; ++variant) {
      AttentionParams p;
      p.num_heads = heads;
      p.scale = 1.f / std::sqrt(float(d));
      if (variant == 1) p.sliding_window = 1000;
      if (variant == 2) p.sinks = d_sinks;
      const AttentionMeta meta{positions.data(), seqs.data(), table.data(), offsets.data()};
      float* out = poisoned(q.size());
      gpu->attention(dq, n, gkv, meta, p, out);
      const auto tiles = download(out, q.size());
      for (int i : {0, n - 1}) {
        const int64_t merges = cuda::attention_decode_merge_launches();
        const AttentionMeta alone{positions.data() + i, seqs.data(), table.data(), offsets.data()};
        float* out1 = poisoned(static_cast<size_t>(heads * d));
        gpu->attention(dq + i * heads * d, 1, gkv, alone, p, out1);
        const auto row = download(out1, static_cast<size_t>(heads * d));
        EXPECT_EQ(cuda::attention_decode_merge_launches(), merges + 1) << "the states were not merged apart";
        EXPECT_EQ(0, std::memcmp(row.data(), tiles.data() + i * heads * d, row.size() * sizeof(float)))
            << "d " << d << " variant " << variant << " row " << positions[i];
      }
    }
  }
}

// The wgmma query-tile kernel (sm_90a, head_dim 64 and 128) against the mma.sync one over a long
// chunked prefill: 300 rows at positions 200..499 of one sequence (8 chunks of keys, both K
// buffers reused, tiles that straddle chunk boundaries, a ragged last tile), then the last 16
// rows alone, which take the split-KV decode kernel. Every way must give the same bits. Query
// heads per KV head 4, 1 (128 rows per tile), 8 and 5 (a row's heads split between the two
// warpgroups).
TEST_F(CudaKernels, WgmmaQueryTilesGiveTheBitsOfTheMmaSyncKernel) {
  for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {8, 8}, {8, 1}, {10, 2}})
  for (int64_t d : {64, 128}) {
    if (!cuda::attention_wgmma_supported(d)) GTEST_SKIP() << "no sm_90 device: the wgmma attention kernel is not used";
    SCOPED_TRACE(testing::Message() << heads << " heads, " << kv_heads << " KV heads");
    const int64_t bs = 16, first = 200, rows = 300, blocks = (first + rows) / bs + 1;
    auto kc = operand_cache(static_cast<size_t>(blocks * bs * kv_heads * d), rng);
    auto vc = operand_cache(kc.size(), rng);
    std::vector<int32_t> table(static_cast<size_t>(blocks)), offsets = {0, static_cast<int32_t>(blocks)};
    for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>((b * 7 + 3) % blocks);
    std::vector<int32_t> positions(static_cast<size_t>(rows)), row_seq(static_cast<size_t>(rows), 0);
    for (int64_t r = 0; r < rows; ++r) positions[r] = static_cast<int32_t>(first + r);
    const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng);
    float* dq = upload(q);
    const PagedKv kv{upload(kc), upload(vc), static_cast<int32_t>(bs), kv_heads, d};
    const AttentionMeta meta{positions.data(), row_seq.data(), table.data(), offsets.data()};
    std::vector<float> sinks(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) sinks[h] = 0.75f * static_cast<float>(h % 5) - 1.5f;
    const float* d_sinks = upload(sinks);
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(testing::Message() << "d " << d << " variant " << variant);
      AttentionParams p;
      p.num_heads = heads;
      p.scale = 1.f / std::sqrt(float(d));
      if (variant == 1) p.sliding_window = 100;
      if (variant == 2) p.softcap = 3.f;
      if (variant == 3) p.sinks = d_sinks;
      const auto run = [&](bool wgmma, int64_t row0, int64_t n) {
        cuda::set_attention_wgmma(wgmma);
        float* out = poisoned(static_cast<size_t>(n * heads * d));
        const AttentionMeta m{positions.data() + row0, row_seq.data(), table.data(), offsets.data()};
        gpu->attention(dq + row0 * heads * d, n, kv, m, p, out);
        cuda::set_attention_wgmma(true);
        return download(out, static_cast<size_t>(n * heads * d));
      };
      const auto wgmma = run(true, 0, rows), mma = run(false, 0, rows), tail = run(true, rows - 16, 16);
      EXPECT_EQ(0, std::memcmp(wgmma.data(), mma.data(), wgmma.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(tail.data(), wgmma.data() + (rows - 16) * heads * d, tail.size() * sizeof(float)));
      std::vector<float> expect(q.size());
      const PagedKv host_kv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d};
      AttentionParams host_p = p;
      if (variant == 3) host_p.sinks = sinks.data();
      ref->attention(q.data(), rows, host_kv, meta, host_p, expect.data());
      EXPECT_LT(rel_l2(wgmma, expect), 2e-3 * attention_operand_scale());
    }
  }
}

TEST_F(CudaKernels, WriteKvFillsEachRowsSlot) {
  const int64_t kv_heads = 2, d = 32, bs = 4, blocks = 6, width = kv_heads * d;
  std::vector<float> kc(static_cast<size_t>(blocks * bs * width), 0.f), vc = kc;
  std::vector<int32_t> tables = {4, 1, 3, 0}, offsets = {0, 2, 4}, positions = {6, 7, 0, 5}, row_seq = {0, 0, 1, 1};
  const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
  const auto k = random_vec(static_cast<size_t>(4 * width), rng), v = random_vec(k.size(), rng);
  float* dk = upload(kc);
  float* dv = upload(vc);
  gpu->write_kv(upload(k), upload(v), 4, PagedKv{dk, dv, static_cast<int32_t>(bs), kv_heads, d}, meta);
  ref->write_kv(k.data(), v.data(), 4, PagedKv{kc.data(), vc.data(), static_cast<int32_t>(bs), kv_heads, d}, meta);
  // The CUDA cache holds K and V rounded to the precision its attention reads.
  for (float& x : kc) x = cpu::round_attention_operand(x);
  for (float& x : vc) x = cpu::round_attention_operand(x);
  EXPECT_EQ(download(dk, kc.size()), kc);
  EXPECT_EQ(download(dv, vc.size()), vc);
}

// The prologue tests' rotation: `rotary` dims from `offset`, scaled (yarn-like) by 1.1.
RopeTable prologue_rope(int64_t rotary, int64_t offset, bool interleaved) {
  RopeTable t;
  for (int64_t i = 0; i < rotary / 2; ++i) t.inv_freq.push_back(std::pow(10000.f, -2.f * i / rotary));
  t.rotary_dim = rotary;
  t.offset = offset;
  t.attention_scaling = 1.1f;
  t.interleaved = interleaved;
  return t;
}

// The fused attention prologue (one kernel) against the backend's default composition of
// copy_strided, rms_norm, rope and write_kv on the same GPU: identical q and cache bits, with
// and without q/k norms, rotate-half and interleaved, full and partial (offset) rotary, tree
// rows (their K/V slots follow the branch), head_dim 64/128/256.
TEST_F(CudaKernels, FusedAttentionPrologueGivesTheBitsOfTheSeparateOps) {
  struct Case {
    int64_t d, rotary, offset;
    bool norms, interleaved, tree;
  };
  for (const Case c : {Case{128, 128, 0, true, false, false}, Case{64, 32, 32, false, true, false},
                       Case{256, 64, 0, true, false, true}, Case{128, 64, 16, true, true, true}}) {
    const int64_t rows = 5, heads = 4, kv_heads = 2, bs = 4, blocks = 8, width = kv_heads * c.d;
    const int64_t qkv_width = (heads + 2 * kv_heads) * c.d;
    const RopeTable t = prologue_rope(c.rotary, c.offset, c.interleaved);
    // Two sequences; with trees, rows 2-4 are a tree at logical 9, 10, 10 whose nodes live at
    // base 9 + node index (path 0, 1, 2: row 4 is a sibling of row 3); without, a chain.
    std::vector<int32_t> tables = {4, 1, 3, 0, 7, 6}, offsets = {0, 2, 6}, positions = {6, 7, 9, 10, c.tree ? 10 : 11},
                         row_seq = {0, 0, 1, 1, 1};
    std::vector<int32_t> tree_base = {-1, -1, 9, 9, 9}, tree_path(static_cast<size_t>(rows * kMaxTreeDepth), 0);
    tree_path[3 * kMaxTreeDepth + 1] = 1;
    tree_path[4 * kMaxTreeDepth + 1] = 2;
    AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
    if (c.tree) meta.tree_base = tree_base.data(), meta.tree_path = tree_path.data();
    const auto qkv = random_vec(static_cast<size_t>(rows * qkv_width), rng);
    const auto qn = random_vec(static_cast<size_t>(c.d), rng), kn = random_vec(static_cast<size_t>(c.d), rng);
    const Weight q_norm = gpu->upload_weight(Weight{qn.data(), DType::F32, 1, c.d});
    const Weight k_norm = gpu->upload_weight(Weight{kn.data(), DType::F32, 1, c.d});
    const Weight* qw = c.norms ? &q_norm : nullptr;
    const Weight* kw = c.norms ? &k_norm : nullptr;
    const std::vector<float> empty_cache(static_cast<size_t>(blocks * bs * width), 0.f);
    const size_t q_size = static_cast<size_t>(rows * heads * c.d), kv_size = static_cast<size_t>(rows * width);
    std::vector<std::vector<float>> results[2];
    for (int fused = 0; fused < 2; ++fused) {
      float *kc = upload(empty_cache), *vc = upload(empty_cache), *dq = poisoned(q_size);
      float *dk = poisoned(kv_size), *dv = poisoned(kv_size);
      const PagedKv kv{kc, vc, static_cast<int32_t>(bs), kv_heads, c.d};
      const QkvPrologue p{heads, qw, kw, 1e-6f, 0.f, &t, positions.data()};
      if (fused) {
        gpu->qkv_norm_rope_write_kv(upload(qkv), rows, p, kv, meta, dq, dk, dv);
      } else {
        gpu->Backend::qkv_norm_rope_write_kv(upload(qkv), rows, p, kv, meta, dq, dk, dv);
      }
      results[fused] = {download(dq, q_size), download(kc, empty_cache.size()), download(vc, empty_cache.size())};
    }
    const char* names[] = {"q", "k cache", "v cache"};
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(0, std::memcmp(results[0][i].data(), results[1][i].data(), results[0][i].size() * sizeof(float)))
          << names[i] << ", head_dim " << c.d << ", rotary " << c.rotary << (c.tree ? ", tree" : "");
    // And the separate ops are the reference's (so the fused path is too).
    std::vector<float> eq(q_size), ek(kv_size), ev(kv_size), ekc = empty_cache, evc = empty_cache;
    const Weight rq{qn.data(), DType::F32, 1, c.d}, rk{kn.data(), DType::F32, 1, c.d};
    const PagedKv ref_kv{ekc.data(), evc.data(), static_cast<int32_t>(bs), kv_heads, c.d};
    const QkvPrologue ref_p{heads, c.norms ? &rq : nullptr, c.norms ? &rk : nullptr, 1e-6f, 0.f, &t, positions.data()};
    ref->qkv_norm_rope_write_kv(qkv.data(), rows, ref_p, ref_kv, meta, eq.data(), ek.data(), ev.data());
    for (float& x : ekc) x = cpu::round_attention_operand(x);  // the CUDA cache holds operand values (write_kv)
    for (float& x : evc) x = cpu::round_attention_operand(x);
    EXPECT_LT(rel_l2(results[1][0], eq), 1e-5);
    // A last-bit difference can move k across a rounding midpoint: 2^-11 of it in tf32, 2^-8 in bf16.
    const bool bf16_operands = cpu::kCudaAttentionOperands == cpu::AttentionOperands::kBf16;
    EXPECT_LT(rel_l2(results[1][1], ekc), bf16_operands ? 8e-4 : 1e-4);
    EXPECT_EQ(results[1][2], evc);
  }
}

// attention_from_qkv on decode steps of two or more rows (every row alone in its sequence) runs
// the prologue inside the decode attention: the same output and cache bits as the prologue
// kernel then the attention (the backend's default composition), in thread block clusters (rows
// at 350 and 90) and merging through global memory (three rows, one at 700: 16 chunks), with
// and without norms, full and partial interleaved rotary, a sliding window, head_dim 40
// (strides read at run time), 64, 128, 256. q, scratch, is left alone by the fused kernel: that
// is how the test knows it ran; a single row (batch-1 decode) keeps the separate prologue.
TEST_F(CudaKernels, AttentionFromQkvInTheDecodeKernelGivesTheBitsOfThePrologueThenAttention) {
  struct Case {
    int64_t d, rotary, offset;
    bool norms, interleaved;
    int64_t window;
  };
  const std::vector<std::vector<int32_t>> batches = {{350, 90}, {5, 700, 130}, {350}};
  for (const Case c : {Case{128, 128, 0, true, false, 0}, Case{64, 32, 32, false, true, 21},
                       Case{256, 64, 0, true, false, 0}, Case{40, 40, 0, true, false, 0}})
    for (const std::vector<int32_t>& positions : batches) {
      SCOPED_TRACE(testing::Message() << "head_dim " << c.d << ", rows " << positions.size());
      const int64_t heads = 8, kv_heads = 2, bs = 16, width = kv_heads * c.d, rows = std::ssize(positions);
      std::vector<int32_t> tables, offsets = {0}, row_seq;
      for (int64_t r = 0; r < rows; ++r) {
        for (int b = 0; b <= positions[r] / bs; ++b) tables.push_back(static_cast<int32_t>((tables.size() * 7 + 3) % 160));
        offsets.push_back(static_cast<int32_t>(tables.size()));
        row_seq.push_back(static_cast<int32_t>(r));
      }
      const int64_t blocks = 160;
      auto kc = random_vec(static_cast<size_t>(blocks * bs * width), rng), vc = random_vec(kc.size(), rng);
      for (float& x : kc) x = cpu::round_attention_operand(x);  // as write_kv leaves the cache
      for (float& x : vc) x = cpu::round_attention_operand(x);
      const auto qkv = random_vec(static_cast<size_t>(rows * (heads + 2 * kv_heads) * c.d), rng);
      const auto qn = random_vec(static_cast<size_t>(c.d), rng), kn = random_vec(static_cast<size_t>(c.d), rng);
      const Weight q_norm = gpu->upload_weight(Weight{qn.data(), DType::F32, 1, c.d});
      const Weight k_norm = gpu->upload_weight(Weight{kn.data(), DType::F32, 1, c.d});
      const RopeTable t = prologue_rope(c.rotary, c.offset, c.interleaved);
      const QkvPrologue p{heads, c.norms ? &q_norm : nullptr, c.norms ? &k_norm : nullptr, 1e-6f, 0.f, &t,
                          positions.data()};
      AttentionParams params;
      params.num_heads = heads;
      params.scale = 1.f / std::sqrt(static_cast<float>(c.d));
      params.sliding_window = c.window;
      const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
      const size_t q_size = static_cast<size_t>(rows * heads * c.d), kv_size = static_cast<size_t>(rows * width);
      std::vector<std::vector<float>> results[2];
      for (int fused = 0; fused < 2; ++fused) {
        float *dk = upload(kc), *dv = upload(vc), *q = poisoned(q_size), *out = poisoned(q_size);
        const PagedKv kv{dk, dv, static_cast<int32_t>(bs), kv_heads, c.d};
        if (fused) {
          gpu->attention_from_qkv(upload(qkv), rows, p, kv, meta, params, q, poisoned(kv_size), poisoned(kv_size),
                                  out);
        } else {
          gpu->Backend::attention_from_qkv(upload(qkv), rows, p, kv, meta, params, q, poisoned(kv_size),
                                           poisoned(kv_size), out);
        }
        results[fused] = {download(out, q_size), download(dk, kc.size()), download(dv, vc.size()),
                          download(q, q_size)};
      }
      const char* names[] = {"attention", "k cache", "v cache"};
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(0, std::memcmp(results[0][i].data(), results[1][i].data(), results[0][i].size() * sizeof(float)))
            << names[i];
      EXPECT_NE(results[0][1], kc) << "the composition wrote no key";
      const bool q_untouched =
          std::all_of(results[1][3].begin(), results[1][3].end(), [](float x) { return std::isnan(x); });
      if (rows >= 2) {
        EXPECT_TRUE(q_untouched) << "q was written: the prologue did not run inside the decode attention";
      } else {
        EXPECT_FALSE(q_untouched) << "batch 1 should keep the separate prologue";
      }
    }
}

// Many device copies in one op (gathered, then scattered): the result of copying one by one in
// order, when no source is an earlier destination (a tree branch's KV move), on 16-byte aligned
// rows (two kernels) and on unaligned ones (copied one by one).
TEST_F(CudaKernels, CopyOnDeviceManyEqualsTheCopiesInOrder) {
  for (const int64_t row : {32, 5}) {  // floats per row: 128 B (aligned), 20 B (not)
    const auto data = random_vec(static_cast<size_t>(16 * row), rng);
    float* d = upload(data);
    std::vector<float> expect = data;
    const std::vector<std::pair<int, int>> moves = {{7, 5}, {9, 6}, {10, 7}, {12, 8}, {3, 3}};
    std::vector<Backend::DeviceCopy> copies;
    for (auto [from, to] : moves) {
      std::copy_n(expect.begin() + from * row, row, expect.begin() + to * row);
      copies.push_back({d + to * row, d + from * row, static_cast<size_t>(row) * sizeof(float)});
    }
    gpu->copy_on_device_many(copies);
    EXPECT_EQ(download(d, expect.size()), expect) << row << " floats per row";
  }
}

// Swap space (host_swap.h): the swaps queued between two ops leave in one kernel launch per run of
// one direction, whatever the number of blocks and layers, and equal the copies in order: a
// swap-out, then a swap-in of the bytes it wrote, then two swap-outs to one host slot (the later
// wins); slices of 16-byte units, 4-byte words and odd bytes.
TEST_F(CudaKernels, SwapCopiesBetweenTwoOpsAreOneLaunchPerDirectionAndEqualTheCopiesInOrder) {
  for (const size_t slice : {size_t{512}, size_t{20}, size_t{7}}) {
    const int blocks = 6, layers = 3;  // a pool of [layers][blocks] slices, K and V
    const size_t pool_bytes = 2 * layers * blocks * slice;
    std::vector<uint8_t> pool(pool_bytes);
    for (auto& b : pool) b = static_cast<uint8_t>(rng());
    auto* device = upload(pool);
    auto* host = static_cast<uint8_t*>(gpu->allocate_host(2 * layers * 4 * slice));  // 4 host slots
    auto download_bytes = [&](const uint8_t* p, size_t n) {
      std::vector<uint8_t> v(n);
      gpu->copy_to_host(v.data(), p, n);
      return v;
    };
    auto at = [&](int kv, int layer, int block) { return (static_cast<size_t>(kv * layers + layer) * blocks + block) * slice; };
    // Block b's slices, host slot s: the KV cache's host_copies layout (layer-major K then V).
    auto copies_of = [&](int block, int slot, bool to_host) {
      std::vector<Backend::DeviceCopy> c;
      uint8_t* h = host + static_cast<size_t>(slot) * 2 * layers * slice;
      for (int l = 0; l < layers; ++l)
        for (int kv = 0; kv < 2; ++kv, h += slice) {
          uint8_t* d = device + at(kv, l, block);
          c.push_back(to_host ? Backend::DeviceCopy{h, d, slice} : Backend::DeviceCopy{d, h, slice});
        }
      return c;
    };
    std::vector<uint8_t> expect = pool;
    auto move_block = [&](int from, int to) {  // what swapping `from` out and into `to` does
      for (int l = 0; l < layers; ++l)
        for (int kv = 0; kv < 2; ++kv) std::memcpy(&expect[at(kv, l, to)], &pool[at(kv, l, from)], slice);
    };
    const uint64_t launches = cuda_swap_launches(*gpu);
    // Three swap-outs, then three swap-ins: two runs, two launches, issued by the next op.
    for (int i = 0; i < 3; ++i) gpu->swap_copy(copies_of(i, i, true), /*to_host=*/true);
    for (int i = 0; i < 3; ++i) gpu->swap_copy(copies_of(3 + i, i, false), /*to_host=*/false);
    EXPECT_EQ(cuda_swap_launches(*gpu), launches + 1) << "the swap-ins' run issues the swap-outs' first";
    gpu->synchronize();
    EXPECT_EQ(cuda_swap_launches(*gpu), launches + 2);
    for (int i = 0; i < 3; ++i) move_block(i, 3 + i);
    EXPECT_EQ(download_bytes(device, pool_bytes), expect) << slice << "-byte slices";
    // Two swap-outs to one slot, then that slot back in: the second write must win.
    pool = expect;
    gpu->swap_copy(copies_of(0, 3, true), true);
    gpu->swap_copy(copies_of(1, 3, true), true);  // overlaps the queued writes: issued apart
    gpu->swap_copy(copies_of(5, 3, false), false);
    gpu->synchronize();
    EXPECT_EQ(cuda_swap_launches(*gpu), launches + 5);
    move_block(1, 5);
    EXPECT_EQ(download_bytes(device, pool_bytes), expect) << slice << "-byte slices";
    gpu->deallocate_host(host);
  }
}

}  // namespace
}  // namespace tachyon::kernels
