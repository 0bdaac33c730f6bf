// The kernels an Ampere or Ada GPU runs (mma.sync and cp.async; no TMA, clusters, wgmma or
// programmatic launch; 163 or 99 KB of shared memory per block), forced on this GPU by
// CudaOptions::arch (TACHYON_CUDA_ARCH): the switch engages them, and they give the bits of the
// Hopper kernels, op by op: the matmul at decode rows (streaming on Hopper) and prefill rows
// (wgmma on Hopper), attention over query tiles and a decode row (clusters on Hopper, smaller
// tiles at 99 KB), sampling (a cluster of eight CTAs per row on Hopper, one CTA before).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/tf32_chunk_attention.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_wgmma.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/matmul.cuh"
#include "kernels/token_sampling.h"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

// Every op's output on `be`, from the same inputs (a fixed seed).
std::vector<std::vector<float>> run_ops(Backend& be) {
  std::mt19937 rng{11};
  DeviceFloats mem(be);
  std::vector<std::vector<float>> outputs;
  // Matmuls: 1 and 8 rows of a 9 M-weight matrix (the streaming kernel on Hopper), 100 rows (wgmma).
  const int64_t n = 8200, k = 1100;
  const auto wb = to_bf16(random_vec(static_cast<size_t>(n * k), rng, 0.05f));
  const Weight w = be.upload_weight(Weight{wb.data(), DType::BF16, n, k});
  const float* x = mem.copy(random_vec(static_cast<size_t>(100 * k), rng));
  for (int64_t rows : {1, 8, 100}) {
    float* out = mem.poisoned(rows * n);
    be.matmul(x, rows, w, nullptr, out);
    outputs.push_back(mem.download(out, rows * n));
  }
  // Attention, head_dim 128, 4 query heads per KV head: a prefill of 70 rows (query tiles) and a
  // decode row at position 700 (split-KV decode: 11 chunks) in one call, then a decode row at 300
  // alone (5 chunks: one cluster on Hopper).
  const int64_t d = 128, heads = 8, kv_heads = 2, bs = 16, blocks = 48 + 5;
  auto kc = random_vec(static_cast<size_t>(blocks * bs * kv_heads * d), rng);
  auto vc = random_vec(kc.size(), rng);
  for (float& v : kc) v = cpu::round_attention_operand(v);
  for (float& v : vc) v = cpu::round_attention_operand(v);
  const PagedKv kv{mem.copy(kc), mem.copy(vc), static_cast<int32_t>(bs), kv_heads, d};
  std::vector<int32_t> positions, row_seq, tables, offsets = {0, 5, 5 + 44};
  for (int32_t b = 0; b < 5; ++b) tables.push_back(b);       // sequence 0: positions 0..69
  for (int32_t b = 0; b < 44; ++b) tables.push_back(5 + b);  // sequence 1: position 700
  for (int32_t p = 0; p < 70; ++p) positions.push_back(p), row_seq.push_back(0);
  positions.push_back(700), row_seq.push_back(1);
  const int64_t rows = static_cast<int64_t>(positions.size());
  const float* q = mem.copy(random_vec(static_cast<size_t>(rows * heads * d), rng));
  AttentionParams p;
  p.num_heads = heads;
  p.scale = 1.f / std::sqrt(static_cast<float>(d));
  float* out = mem.poisoned(rows * heads * d);
  be.attention(q, rows, kv, AttentionMeta{positions.data(), row_seq.data(), tables.data(), offsets.data()}, p, out);
  outputs.push_back(mem.download(out, rows * heads * d));
  const int32_t mid = 300, zero = 0;
  const std::vector<int32_t> mid_offsets = {0, 44};
  float* out_mid = mem.poisoned(heads * d);
  be.attention(q, 1, kv, AttentionMeta{&mid, &zero, tables.data() + 5, mid_offsets.data()}, p, out_mid);
  outputs.push_back(mem.download(out_mid, heads * d));
  // Sampling: flat rows of a 151936-token vocabulary, top-k, top-p and plain draws.
  const int64_t vocab = 151936;
  const float* logits = mem.copy(random_vec(static_cast<size_t>(4 * vocab), rng, 3.f));
  std::vector<TokenSampling> params(4);
  for (size_t r = 0; r < params.size(); ++r) params[r].temperature = 0.8f, params[r].u = 0.1 + 0.2 * r;
  params[1].top_k = 5000, params[2].top_p = 0.9f, params[3].min_p = 0.05f;
  auto* ids = static_cast<int32_t*>(be.allocate(params.size() * sizeof(int32_t)));
  be.sample_tokens(logits, static_cast<int64_t>(params.size()), vocab, params.data(), ids);
  std::vector<int32_t> drawn(params.size());
  be.copy_to_host(drawn.data(), ids, drawn.size() * sizeof(int32_t));
  be.deallocate(ids);
  outputs.emplace_back(drawn.begin(), drawn.end());
  return outputs;
}

TEST_F(CudaKernels, PreHopperKernelsGiveTheBitsOfTheHopperKernels) {
  if (CudaOptions::from_environment().arch != 0 || !cuda::device_arch().hopper)
    GTEST_SKIP() << "the Hopper kernels do not run here (pre-Hopper GPU or build, or TACHYON_CUDA_ARCH set)";
  struct RestoreArch {  // the forced arch is process-wide: the tests after this one run the Hopper kernels
    ~RestoreArch() { cuda::force_device_arch(0); }
  } restore;
  auto hopper_backend = cuda_backend_with([](CudaOptions&) {});
  EXPECT_TRUE(cuda::matmul_streams(1, 8200, 1100));
  const auto expect = run_ops(*hopper_backend);
  hopper_backend.reset();
  for (int arch : {80, 86}) {
    SCOPED_TRACE(testing::Message() << "TACHYON_CUDA_ARCH=" << arch);
    auto pre = cuda_backend_with([&](CudaOptions& o) { o.arch = arch; });
    // The switch engages the pre-Hopper kernels within the emulated GPU's shared memory.
    const cuda::DeviceArch& a = cuda::device_arch();
    EXPECT_EQ(a.forced_arch, arch);
    EXPECT_FALSE(a.hopper);
    EXPECT_FALSE(a.wgmma);
    EXPECT_EQ(a.smem_per_block, cuda::pre_hopper_smem_per_block(arch));
    EXPECT_FALSE(cuda::matmul_streams(1, 8200, 1100));
    EXPECT_FALSE(cuda::attention_wgmma_supported(128));
    const auto got = run_ops(*pre);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].size(), expect[i].size());
      EXPECT_EQ(0, std::memcmp(got[i].data(), expect[i].data(), got[i].size() * sizeof(float))) << "output " << i;
    }
  }
  cuda::force_device_arch(0);
  EXPECT_TRUE(cuda::device_arch().hopper);
}

// Which kernels this GPU runs (printed for the device logs): the Hopper kernels only where both
// the device and the code loaded for it are sm_90 and no arch is forced. A compute_80-PTX build
// JIT-compiled on an H100 loads PTX version 80 and takes the pre-Hopper kernels, whose every
// launch the other tests of that run then exercise (the Hopper ones are traps in that build).
TEST_F(CudaKernels, DeviceArchFollowsTheDeviceAndTheLoadedCode) {
  const cuda::DeviceArch& a = cuda::device_arch();
  std::printf("device_arch: compute capability %d, loaded code version %d, forced arch %d: %s kernels%s, %zu bytes "
              "of shared memory per block, %d SMs\n",
              a.compute_capability, a.code_arch, a.forced_arch, a.hopper ? "Hopper" : "pre-Hopper",
              a.wgmma ? " with wgmma" : "", a.smem_per_block, a.sms);
  EXPECT_EQ(a.hopper, a.forced_arch == 0 && a.compute_capability >= 90 && a.code_arch >= 90);
  EXPECT_EQ(a.forced_arch, CudaOptions::from_environment().arch);
  if (!a.hopper) {
    EXPECT_FALSE(cuda::matmul_streams(1, 8200, 1100));
    EXPECT_FALSE(cuda::attention_wgmma_supported(128));
  }
}

TEST(CudaArch, ForcedArchIsCheckedAndNamesItsSharedMemory) {
  EXPECT_EQ(cuda::pre_hopper_smem_per_block(80), size_t{163} * 1024);
  EXPECT_EQ(cuda::pre_hopper_smem_per_block(86), size_t{99} * 1024);
  EXPECT_EQ(cuda::pre_hopper_smem_per_block(89), size_t{99} * 1024);
  EXPECT_THROW(cuda::pre_hopper_smem_per_block(75), Error);
  EXPECT_THROW(cuda::force_device_arch(90), Error);
  const char* before = std::getenv("TACHYON_CUDA_ARCH");  // the run's own (forced-path runs set it)
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  setenv("TACHYON_CUDA_ARCH", "70", 1);
  EXPECT_THROW(CudaOptions::from_environment(), Error);
  setenv("TACHYON_CUDA_ARCH", "89", 1);
  EXPECT_EQ(CudaOptions::from_environment().arch, 89);
  if (saved) setenv("TACHYON_CUDA_ARCH", saved->c_str(), 1);
  else unsetenv("TACHYON_CUDA_ARCH");
}

}  // namespace
}  // namespace tachyon::kernels
