// Quantized weights on the CUDA backend (kernels/cuda/quant_layout.h) against the reference
// backend over the same host weight (the bf16 bound of the other CUDA tests), and bit for bit
// against the bf16 path on the dequantized matrix (bf16_rn of each element: the arithmetic the
// layout promises), for every format x rows 1, 3, 8, 64, 300 x odd shapes; a row's bits whatever
// the batch (decode kernel at 1-64 rows, bf16 copy + prefill GEMM above, wgmma or mma.sync);
// embedding, MoE experts and head_matmul of quantized weights; graph replay. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/matmul_quant.cuh"
#include "cuda_test_fixture.h"
#include "quant_test_data.h"

namespace tachyon::kernels {
namespace {

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
  return a.size() >= n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

// The columns of the shapes below are multiples of every group (128); fp8 also takes 1100.
struct Shape {
  int64_t n, k;
};
std::vector<Shape> shapes_for(const QuantCase& qc) {
  std::vector<Shape> s = {{100, 384}, {260, 1152}};
  if (qc.format == WeightFormat::Fp8Block) s.push_back({136, 1100});
  return s;
}

class CudaQuant : public CudaKernels {};

TEST_F(CudaQuant, MatmulMatchesReferenceAndTheBf16PathBitForBit) {
  for (const QuantCase& qc : quant_cases()) {
    for (const Shape& sh : shapes_for(qc)) {
      const HostQuant hq(qc, sh.n, sh.k, rng);
      const Weight w = gpu->upload_weight(hq.weight());
      EXPECT_EQ(w.layout, WeightLayout::QuantFragments);
      const bool int8_rows = qc.format == WeightFormat::Dense;
      const auto dense_host = int8_rows ? std::vector<uint16_t>() : hq.bf16_matrix();
      const Weight dense =
          int8_rows ? Weight{} : gpu->upload_weight(Weight{dense_host.data(), DType::BF16, sh.n, sh.k});
      const auto bias = random_vec(static_cast<size_t>(sh.n), rng);
      const Weight host_b{bias.data(), DType::F32, 1, sh.n};
      const Weight b = gpu->upload_weight(host_b);
      for (int64_t rows : {1, 3, 8, 64, 300}) {
        SCOPED_TRACE(qc.name + " " + std::to_string(rows) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k));
        const auto x = random_vec(static_cast<size_t>(rows * sh.k), rng);
        const float* dx = upload(x);
        float* out = poisoned(static_cast<size_t>(rows * sh.n));
        gpu->matmul(dx, rows, w, &b, out);
        const auto got = download(out, static_cast<size_t>(rows * sh.n));
        std::vector<float> expect(got.size());
        ref->matmul(x.data(), rows, hq.weight(), &host_b, expect.data());
        EXPECT_LT(rel_l2(got, expect), 4e-3);
        if (int8_rows) continue;
        float* out_dense = poisoned(got.size());
        gpu->matmul(dx, rows, dense, &b, out_dense);
        EXPECT_TRUE(same_bits(got, download(out_dense, got.size()).data(), got.size()));
      }
    }
  }
}

// A row's bits from the decode kernel (1-64 rows: its four instantiations) and from the bf16 copy
// through the prefill GEMM (65, 200 rows; wgmma and mma.sync), at different places in the batch.
TEST_F(CudaQuant, RowIsBitIdenticalWhateverTheBatchOrKernel) {
  auto mma_sync = cuda_backend_with([](CudaOptions& o) { o.wgmma = false; });
  DeviceFloats other(*mma_sync);
  for (const QuantCase& qc : quant_cases()) {
    SCOPED_TRACE(qc.name);
    const int64_t n = 260, k = 1152, big = 200;
    const HostQuant hq(qc, n, k, rng);
    const Weight w = gpu->upload_weight(hq.weight());
    const auto bias = random_vec(static_cast<size_t>(n), rng);
    const Weight b = gpu->upload_weight(Weight{bias.data(), DType::F32, 1, n});
    const auto x = random_vec(static_cast<size_t>(big * k), rng);
    float* dx = upload(x);
    float* all = poisoned(static_cast<size_t>(big * n));
    gpu->matmul(dx, big, w, &b, all);
    const auto batched = download(all, static_cast<size_t>(big * n));
    for (int64_t rows : {1, 7, 9, 17, 33, 64, 65}) {
      for (int64_t first : {int64_t{0}, big - rows, int64_t{3}}) {
        float* part = poisoned(static_cast<size_t>(rows * n));
        gpu->matmul(dx + first * k, rows, w, &b, part);
        EXPECT_TRUE(same_bits(download(part, static_cast<size_t>(rows * n)), batched.data() + first * n,
                              static_cast<size_t>(rows * n)))
            << "rows [" << first << ", " << first + rows << ")";
      }
    }
    // Every number of segments per warp of the decode kernel (up to 8 rows; 8-bit codes take 1 or 2).
    for (int segs : {1, 2, 4}) {
      cuda::set_quant_decode_segments(segs);
      for (int64_t rows : {1, 8}) {
        float* part = poisoned(static_cast<size_t>(rows * n));
        gpu->matmul(dx + 5 * k, rows, w, &b, part);
        EXPECT_TRUE(same_bits(download(part, static_cast<size_t>(rows * n)), batched.data() + 5 * n,
                              static_cast<size_t>(rows * n)))
            << rows << " rows, " << segs << " segments per warp";
      }
    }
    cuda::set_quant_decode_segments(0);
    // The mma.sync prefill GEMM (no wgmma) gives the wgmma kernel's bits.
    const Weight w2 = mma_sync->upload_weight(hq.weight());
    const Weight b2 = mma_sync->upload_weight(Weight{bias.data(), DType::F32, 1, n});
    float* out2 = other.poisoned(big * n);
    mma_sync->matmul(other.copy(x), big, w2, &b2, out2);
    EXPECT_TRUE(same_bits(other.download(out2, big * n), batched.data(), static_cast<size_t>(big * n)));
  }
}

// The streaming decode kernel (matmul_quant_stream.cu) takes 1-8 rows of every format on Hopper
// (counted per call) with the bits of the split-K kernel (the lab switch off) and of the bf16 path
// on the dequantized matrix: n not a multiple of 8, k 4608 (9 segments: a partial last ring unit of
// 8-bit and 4-bit codes), groups of 16 (two groups per 32-column unit), Fp8's partial last block.
// With a pre-Hopper GPU's kernels (CudaOptions::arch) the split-K kernel runs: uncounted, same bits.
TEST_F(CudaQuant, StreamingDecodeTakesOneToEightRowsWithTheSplitKBits) {
  const bool hopper = cuda::device_arch().hopper;
  for (const QuantCase& qc : quant_cases()) {
    std::vector<Shape> shapes = {{100, 384}, {264, 4608}};
    if (qc.format == WeightFormat::Fp8Block) shapes.push_back({136, 1100});
    for (const Shape& sh : shapes) {
      const HostQuant hq(qc, sh.n, sh.k, rng);
      const Weight w = gpu->upload_weight(hq.weight());
      const bool int8_rows = qc.format == WeightFormat::Dense;
      // 4-bit integer codes with bf16 scales: HostQuant's biases (b = −z·s) admit every group.
      const bool pairs = qc.bits == 4 && qc.scale_dtype == DType::BF16 && qc.format != WeightFormat::Mxfp4;
      const auto dense_host = int8_rows ? std::vector<uint16_t>() : hq.bf16_matrix();
      const Weight dense =
          int8_rows ? Weight{} : gpu->upload_weight(Weight{dense_host.data(), DType::BF16, sh.n, sh.k});
      const auto bias = random_vec(static_cast<size_t>(sh.n), rng);
      const Weight b = gpu->upload_weight(Weight{bias.data(), DType::F32, 1, sh.n});
      for (int64_t rows = 1; rows <= 8; ++rows) {
        SCOPED_TRACE(qc.name + " " + std::to_string(rows) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k));
        const size_t size = static_cast<size_t>(rows * sh.n);
        const float* dx = upload(random_vec(static_cast<size_t>(rows * sh.k), rng));
        float* out = poisoned(size);
        const uint64_t before = cuda_quant_stream_matmuls(*gpu), pairs_before = cuda_quant_pair_stream_matmuls(*gpu);
        gpu->matmul(dx, rows, w, &b, out);
        EXPECT_EQ(cuda_quant_stream_matmuls(*gpu) - before, hopper ? 1u : 0u);
        EXPECT_EQ(cuda_quant_pair_stream_matmuls(*gpu) - pairs_before, hopper && pairs ? 1u : 0u) << "bf16 pairs";
        const auto got = download(out, size);
        cuda::set_quant_decode_stream(false);
        float* split = poisoned(size);
        gpu->matmul(dx, rows, w, &b, split);
        cuda::set_quant_decode_stream(true);
        EXPECT_EQ(cuda_quant_stream_matmuls(*gpu) - before, hopper ? 1u : 0u) << "the switch is off";
        EXPECT_TRUE(same_bits(got, download(split, size).data(), size)) << "split-K";
        if (int8_rows) continue;
        float* out_dense = poisoned(size);
        gpu->matmul(dx, rows, dense, &b, out_dense);
        EXPECT_TRUE(same_bits(got, download(out_dense, size).data(), size)) << "bf16";
      }
      EXPECT_TRUE(cuda_stream_tile_counters_are_zero(*gpu));
    }
  }
  if (!hopper || CudaOptions::from_environment().arch != 0) return;
  struct RestoreArch {  // the forced arch is process-wide
    ~RestoreArch() { cuda::force_device_arch(0); }
  } restore;
  const QuantCase qc = quant_cases()[0];  // affine4_g32_f16
  const HostQuant hq(qc, 260, 1152, rng);
  const auto x = random_vec(8 * 1152, rng);
  const Weight w = gpu->upload_weight(hq.weight());
  float* out = poisoned(8 * 260);
  gpu->matmul(upload(x), 8, w, nullptr, out);
  const auto expect = download(out, 8 * 260);
  auto pre = cuda_backend_with([](CudaOptions& o) { o.arch = 89; });
  EXPECT_FALSE(cuda::device_arch().hopper);
  DeviceFloats other(*pre);
  const Weight w89 = pre->upload_weight(hq.weight());
  float* out89 = other.poisoned(8 * 260);
  pre->matmul(other.copy(x), 8, w89, nullptr, out89);
  EXPECT_EQ(cuda_quant_stream_matmuls(*pre), 0u);
  EXPECT_TRUE(same_bits(other.download(out89, 8 * 260), expect.data(), 8 * 260)) << "TACHYON_CUDA_ARCH=89";
}

// Qwen3-8B's decode shapes (q/o 4096x4096, down 4096x12288: 24 segments) at 1 and 8 rows: the bits
// of the bf16 path (there the streaming kernel) on the dequantized matrix. On Hopper the quantized
// streaming kernel takes them but 8 rows of k 12288 (x does not fit beside the ring); 1 row of k
// 12288 takes n-tiles from the device counter (stream_ring.cuh's TileSchedule).
TEST_F(CudaQuant, DecodeOnModelShapesGivesTheBf16PathBits) {
  for (const QuantCase& qc : quant_cases()) {
    if (qc.name != "symmetric4_g32_bf16" && qc.name != "affine4_g128_bf16" && qc.name != "fp8_block128" &&
        qc.name != "symmetric8_g128_f16" && qc.name != "mxfp4")
      continue;
    for (const Shape& sh : {Shape{4096, 4096}, Shape{4096, 12288}}) {
      SCOPED_TRACE(qc.name + " " + std::to_string(sh.n) + "x" + std::to_string(sh.k));
      const HostQuant hq(qc, sh.n, sh.k, rng);
      const Weight w = gpu->upload_weight(hq.weight());
      const auto dense_host = hq.bf16_matrix();
      const Weight dense = gpu->upload_weight(Weight{dense_host.data(), DType::BF16, sh.n, sh.k});
      for (int64_t rows : {1, 8}) {
        const float* dx = upload(random_vec(static_cast<size_t>(rows * sh.k), rng));
        float* out = poisoned(static_cast<size_t>(rows * sh.n));
        float* out_dense = poisoned(static_cast<size_t>(rows * sh.n));
        const uint64_t before = cuda_quant_stream_matmuls(*gpu);
        gpu->matmul(dx, rows, w, nullptr, out);
        EXPECT_EQ(cuda_quant_stream_matmuls(*gpu) - before,
                  cuda::device_arch().hopper && (rows == 1 || sh.k == 4096) ? 1u : 0u)
            << rows << " rows";
        gpu->matmul(dx, rows, dense, nullptr, out_dense);
        const auto got = download(out, static_cast<size_t>(rows * sh.n));
        EXPECT_TRUE(same_bits(got, download(out_dense, got.size()).data(), got.size())) << rows << " rows";
        EXPECT_TRUE(cuda_stream_tile_counters_are_zero(*gpu));
      }
    }
  }
}

// Decode matmuls of a quantized weight recorded as a graph and replayed: the bits issued directly.
TEST_F(CudaQuant, GraphReplayGivesTheDirectBits) {
  const QuantCase qc = quant_cases()[4];  // symmetric4_g32_bf16
  const HostQuant hq(qc, 1000, 2048, rng);
  const Weight w = gpu->upload_weight(hq.weight());
  const float* dx = upload(random_vec(2048 * 3, rng));
  float* direct = poisoned(3000);
  gpu->matmul(dx, 3, w, nullptr, direct);
  const auto expect = download(direct, 3000);
  cuda_graphs_enable(*gpu, true);
  for (int pass = 0; pass < 3; ++pass) {  // first sighting, capture, replay
    float* out = poisoned(3000);
    gpu->matmul(dx, 3, w, nullptr, out);
    EXPECT_TRUE(same_bits(download(out, 3000), expect.data(), 3000)) << "pass " << pass;
  }
  cuda_graphs_enable(*gpu, false);
}

// Embedding rows of a quantized table (tied embeddings): the f32 scalar definition times the scale,
// exactly; device ids outside the table read row 0.
TEST_F(CudaQuant, EmbeddingIsTheScalarDefinition) {
  for (const QuantCase& qc : quant_cases()) {
    SCOPED_TRACE(qc.name);
    const int64_t vocab = 300, dim = qc.format == WeightFormat::Fp8Block ? 1100 : 384;
    const HostQuant hq(qc, vocab, dim, rng);
    const Weight table = gpu->upload_weight(hq.weight());
    const std::vector<int32_t> ids = {0, 299, 17, 17, 150};
    const float scale = 0.75f;
    std::vector<float> expect(ids.size() * static_cast<size_t>(dim));
    for (size_t r = 0; r < ids.size(); ++r)
      for (int64_t c = 0; c < dim; ++c) expect[r * dim + c] = hq.element(ids[r], c) * scale;
    float* out = poisoned(expect.size());
    gpu->embedding(table, ids.data(), static_cast<int64_t>(ids.size()), scale, out);
    EXPECT_TRUE(same_bits(download(out, expect.size()), expect.data(), expect.size()));
    const std::vector<int32_t> device_ids = {-1, 299, 300};  // -1 and 300 read row 0
    float* out2 = poisoned(3 * static_cast<size_t>(dim));
    gpu->embedding_device_ids(table, upload(device_ids), 3, scale, out2);
    const auto got2 = download(out2, 3 * static_cast<size_t>(dim));
    EXPECT_TRUE(same_bits(got2, expect.data(), static_cast<size_t>(dim)));                                 // row 0
    EXPECT_TRUE(same_bits(std::vector<float>(got2.begin() + dim, got2.end()), expect.data() + dim, dim));  // row 299
    EXPECT_TRUE(same_bits(std::vector<float>(got2.begin() + 2 * dim, got2.end()), expect.data(), dim));    // row 0
  }
}

// MoE experts in quantized formats: the bits of the same experts uploaded as their bf16 matrices,
// near the reference over the host weights, and each row's bits alone as in the batch (alone, only
// the row's experts are dequantized: the others keep the previous call's copies, unread).
TEST_F(CudaQuant, MoeExpertsOfQuantizedWeights) {
  const int64_t E = 4, H = 384, I = 256;
  for (const QuantCase& qc : quant_cases()) {
    if (qc.name != "symmetric4_g32_bf16" && qc.name != "affine8_g64_f32" && qc.name != "fp8_block128" &&
        qc.name != "mxfp4")
      continue;
    SCOPED_TRACE(qc.name);
    std::vector<std::unique_ptr<HostQuant>> host;
    std::vector<std::vector<uint16_t>> dense_host;
    std::vector<Weight> q_gu, q_down, d_gu, d_down, r_gu, r_down;
    for (int64_t e = 0; e < E; ++e) {
      for (bool gate_up : {true, false}) {
        host.push_back(std::make_unique<HostQuant>(qc, gate_up ? 2 * I : H, gate_up ? H : I, rng));
        dense_host.push_back(host.back()->bf16_matrix());
        const Weight& hw = host.back()->weight();
        (gate_up ? q_gu : q_down).push_back(gpu->upload_weight(hw));
        (gate_up ? d_gu : d_down)
            .push_back(gpu->upload_weight(Weight{dense_host.back().data(), DType::BF16, hw.rows, hw.cols}));
        (gate_up ? r_gu : r_down).push_back(hw);
      }
    }
    const MoeExperts qe{q_gu.data(), q_down.data(), nullptr, nullptr, E, I, H, false, 7.f, 1.702f};
    const MoeExperts de{d_gu.data(), d_down.data(), nullptr, nullptr, E, I, H, false, 7.f, 1.702f};
    const MoeExperts re{r_gu.data(), r_down.data(), nullptr, nullptr, E, I, H, false, 7.f, 1.702f};
    // 130 x 2 slots: past the 256 up to which only the routed experts are dequantized.
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 2}, {5, 3}, {40, 2}, {130, 2}}) {
      const auto x = random_vec(static_cast<size_t>(rows * H), rng);
      std::vector<int32_t> ids(static_cast<size_t>(rows * k));
      const auto wts = random_vec(ids.size(), rng);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; ++j) ids[r * k + j] = static_cast<int32_t>((r * 5 + j * 3 + 1) % E);
      std::vector<float> expect(static_cast<size_t>(rows * H));
      ref->moe_experts(x.data(), rows, ids.data(), wts.data(), k, re, expect.data());
      const float* dx = upload(x);
      const int32_t* dids = upload(ids);
      const float* dw = upload(wts);
      float* out = poisoned(expect.size());
      gpu->moe_experts(dx, rows, dids, dw, k, qe, out);
      const auto got = download(out, expect.size());
      EXPECT_LT(rel_l2(got, expect), 1e-2) << rows << " rows";
      float* out_dense = poisoned(expect.size());
      gpu->moe_experts(dx, rows, dids, dw, k, de, out_dense);
      EXPECT_TRUE(same_bits(got, download(out_dense, expect.size()).data(), expect.size())) << rows << " rows";
      for (int64_t r = 0; r < rows; r += 7) {
        float* alone = poisoned(static_cast<size_t>(H));
        gpu->moe_experts(dx + r * H, 1, dids + r * k, dw + r * k, k, qe, alone);
        EXPECT_TRUE(same_bits(download(alone, H), got.data() + r * H, static_cast<size_t>(H))) << "row " << r;
      }
    }
  }
}

// A gated MLP and an add_rms_norm + matmul at prefill rows: quantized weights take the fused paths
// (on core-matrix copies dequantized for the call) where bf16 weights do, counted, with the bits of
// the same calls on the bf16 matrices; 20 rows take the unfused ops.
TEST_F(CudaQuant, PrefillFusionsOfQuantizedWeightsGiveTheBf16Bits) {
  const int64_t hidden = 512, inter = 1024;
  for (const QuantCase& qc : quant_cases()) {
    if (qc.name != "symmetric4_g32_bf16" && qc.name != "fp8_block128") continue;
    const HostQuant gu(qc, 2 * inter, hidden, rng), dn(qc, hidden, inter, rng);
    const auto gu_bf16 = gu.bf16_matrix(), dn_bf16 = dn.bf16_matrix();
    const Weight q_gu = gpu->upload_weight(gu.weight()), q_dn = gpu->upload_weight(dn.weight());
    const Weight d_gu = gpu->upload_weight(Weight{gu_bf16.data(), DType::BF16, 2 * inter, hidden});
    const Weight d_dn = gpu->upload_weight(Weight{dn_bf16.data(), DType::BF16, hidden, inter});
    const auto norm_host = random_vec(static_cast<size_t>(hidden), rng, 0.1f);
    const Weight norm_w = gpu->upload_weight(Weight{norm_host.data(), DType::F32, 1, hidden});
    for (int64_t rows : {20, 100, 300}) {
      SCOPED_TRACE(qc.name + ", " + std::to_string(rows) + " rows");
      const auto x = random_vec(static_cast<size_t>(rows * hidden), rng);
      const auto y = random_vec(static_cast<size_t>(rows * hidden), rng);
      const float* dx = upload(x);
      const float* dy = upload(y);
      const auto mlp = [&](const Weight& a, const Weight& b, uint64_t& fused) {
        const uint64_t before = cuda_fused_gated_mlps(*gpu);
        float* out = poisoned(static_cast<size_t>(rows * hidden));
        gpu->gated_mlp(dx, rows, a, b, Activation::SiLU, poisoned(static_cast<size_t>(rows * 2 * inter)),
                       poisoned(static_cast<size_t>(rows * inter)), out);
        const auto got = download(out, static_cast<size_t>(rows * hidden));
        fused = cuda_fused_gated_mlps(*gpu) - before;
        return got;
      };
      uint64_t fused_q = 0, fused_d = 0;
      const auto got_q = mlp(q_gu, q_dn, fused_q), got_d = mlp(d_gu, d_dn, fused_d);
      EXPECT_TRUE(same_bits(got_q, got_d.data(), got_d.size())) << "gated_mlp";
      EXPECT_EQ(fused_q, fused_d) << "gated_mlp fused calls";
      const auto norm_matmul = [&](const Weight& w, uint64_t& fused) {
        const uint64_t before = cuda_fused_prefill_norms(*gpu);
        float* residual = upload(x);
        float* normed = poisoned(static_cast<size_t>(rows * hidden));
        float* out = poisoned(static_cast<size_t>(rows * 2 * inter));
        gpu->add_rms_norm(residual, dy, norm_w, rows, hidden, 1e-6f, 1.f, normed);
        gpu->matmul(normed, rows, w, nullptr, out);
        auto got = download(out, static_cast<size_t>(rows * 2 * inter));
        const auto n = download(normed, static_cast<size_t>(rows * hidden));
        got.insert(got.end(), n.begin(), n.end());
        fused = cuda_fused_prefill_norms(*gpu) - before;
        return got;
      };
      const auto nq = norm_matmul(q_gu, fused_q), nd = norm_matmul(d_gu, fused_d);
      EXPECT_TRUE(same_bits(nq, nd.data(), nd.size())) << "add_rms_norm + matmul";
      EXPECT_EQ(fused_q, fused_d) << "fused prefill norms";
    }
  }
}

// head_matmul (MLA's per-head projections) of a quantized weight: the bf16 path's bits.
TEST_F(CudaQuant, HeadMatmulOfAQuantizedWeightGivesTheBf16Bits) {
  const QuantCase qc = quant_cases()[0];  // affine4_g32_f16
  const int64_t heads = 4, n = 32, k = 384, rows = 7, xhs = k + 3, ohs = n + 5;
  const HostQuant hq(qc, heads * n, k, rng);
  const auto dense_host = hq.bf16_matrix();
  const Weight w = gpu->upload_weight(hq.weight());
  const Weight dense = gpu->upload_weight(Weight{dense_host.data(), DType::BF16, heads * n, k});
  const float* dx = upload(random_vec(static_cast<size_t>(rows * heads * xhs), rng));
  const size_t size = static_cast<size_t>(rows * heads * ohs);
  float* out = upload(std::vector<float>(size, -7.f));
  float* out_dense = upload(std::vector<float>(size, -7.f));
  gpu->head_matmul(dx, rows, heads, heads * xhs, xhs, w, out, heads * ohs, ohs);
  gpu->head_matmul(dx, rows, heads, heads * xhs, xhs, dense, out_dense, heads * ohs, ohs);
  EXPECT_TRUE(same_bits(download(out, size), download(out_dense, size).data(), size));
}

}  // namespace
}  // namespace tachyon::kernels
