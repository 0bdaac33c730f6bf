// The matmul dispatch table: which kernel serves x [M, K] · Wᵀ at each shape (matmul.cuh). The
// kernels live in matmul_decode.cu (M <= 64), matmul_stream.cu (decode of large matrices),
// matmul_prefill.cu (mma.sync, M > 64) and matmul_wgmma.cu (sm_90a, M > 64); weight packing in
// matmul_pack.cu.
#include "kernels/cuda/matmul.cuh"

#include "kernels/cuda/matmul_common.cuh"
#include "kernels/cuda/matmul_decode.cuh"
#include "kernels/cuda/matmul_prefill.cuh"
#include "kernels/cuda/matmul_stream.cuh"

namespace tachyon::kernels::cuda {

int decode_variant = kDecodeAuto;
bool splitk_smem_weights = false;

void set_decode_matmul_variant(int variant) {
  decode_variant = variant == kDecodeSplitKShared ? kDecodeSplitK : variant;
  splitk_smem_weights = variant == kDecodeSplitKShared;
}

namespace {

// Auto (measured on the H200, docs/perf/cuda.md): at M <= 16 wide matrices with k <= 4096
// (gate_up, LM head) stream best through the long-lived 4-n-tile kernel, the rest through
// split-K; at 17-64 rows wide matrices through the batched kernel (v8), the rest through the
// skinny kernel over A fragments.
// Then (docs/perf/cuda.md) the streaming kernel: at M = 1 for matrices of 16 MB or more,
// at 2-8 rows for n >= 4096 (Qwen3-8B shapes, same call: batch 4 736.7 vs 705.4
// tok/s with only n >= 16384 streamed, batch 8 1320.4 vs 1308.9; docs/perf/cuda.md).
// The narrowest matrix streamed at 2-8 rows (bench/cuda/lab/stream-min-n.patch: narrower ones,
// not measured yet).
int64_t stream_min_n() { return 4096; }

int decode_variant_for(int64_t rows, int64_t n, int64_t k) {
  int variant = decode_variant;
  const bool streams = stream_matmul_fits(rows, k);
  if (variant == kDecodeStream && !streams) variant = kDecodeAuto;
  if (variant == kDecodeAuto && streams && n * k >= (int64_t{8} << 20) && (rows == 1 || n >= stream_min_n()))
    variant = kDecodeStream;
  if (variant == kDecodeAuto || variant == kDecodeAutoClassic ||
      (rows <= 16 && (variant == kDecodeBatched || variant == kDecodeBatchedWhole))) {
    if (rows <= 16) variant = n >= 16384 && k <= 4096 ? kDecodeWide : kDecodeSplitK;
    else variant = n >= 16384 ? kDecodeBatched : kDecodeWide;  // 17-64 rows
  }
  return variant;
}

}  // namespace

// Rows 17-64 may need both: the A fragments, then (batched kernel with split k) the segment
// sums after them.
size_t matmul_workspace_bytes(int64_t rows, int64_t n, int64_t k) {
  const size_t fragments =
      rows <= 16 ? 0 : static_cast<size_t>(a_fragment_m_tiles(rows) * (round_up(k, kMmaColPad) / 16) * 32) * sizeof(uint4);
  const size_t partial = rows <= 64 ? static_cast<size_t>(ceil_div(round_up(k, kMmaColPad), kSegmentK) * rows *
                                                          round_up(n, kMmaRowPad)) * sizeof(float)
                                    : 0;
  return rows <= 64 ? fragments + partial : fragments;
}

size_t matmul_counter_count(int64_t n) { return static_cast<size_t>(round_up(n, kMmaRowPad) / 8 / kSplitWarps); }

void matmul(const float* x, int64_t rows, const void* w, const void* w_core, int64_t n, int64_t k, const float* bias,
            float* out, void* workspace, unsigned* counters, cudaStream_t stream) {
  if (rows == 0) return;
  const int M = static_cast<int>(rows), N = static_cast<int>(n), K = static_cast<int>(k);
  const auto* wf = static_cast<const uint4*>(w);
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  const int variant = decode_variant_for(rows, n, k);
  if (variant == kDecodeStream && stream_matmul_takes(x, rows, k))
    return matmul_stream(x, M, K, wf, N, k_tiles / 2, bias, out, stream);
  if (matmul_decode_from_x(variant, splitk_smem_weights, x, M, K, wf, N, k_tiles / 2, bias, out,
                           static_cast<float*>(workspace), counters, stream))
    return;
  if (rows > 64 && w_core) return matmul_wgmma({x}, M, K, k_tiles, w_core, n, bias, out, workspace, stream);
  // x -> A fragments once; every CTA then reads 16 bytes per lane per (m-tile, k-tile).
  const int64_t m_tiles = a_fragment_m_tiles(rows);
  auto* xa = static_cast<uint4*>(workspace);
  to_a_fragments(x, M, K, m_tiles, k_tiles, xa, stream);
  if (rows <= 64) {
    auto* partial = reinterpret_cast<float*>(xa + m_tiles * k_tiles * 32);
    return matmul_decode_from_fragments(variant, x, xa, M, K, k_tiles, wf, N, bias, out, partial, counters, stream);
  }
  matmul_tiled(xa, M, m_tiles, k_tiles, wf, N, bias, out, stream);
}

bool matmul_streams(int64_t rows, int64_t n, int64_t k) {
  return rows > 0 && decode_variant_for(rows, n, k) == kDecodeStream;
}

void matmul_after_add_norm(const StreamAddNorm& norm, int64_t rows, const void* w, int64_t n, int64_t k,
                           const float* bias, float* out, cudaStream_t stream) {
  const int k_tiles = static_cast<int>(round_up(k, kMmaColPad) / 16);
  matmul_stream(nullptr, static_cast<int>(rows), static_cast<int>(k), static_cast<const uint4*>(w),
                static_cast<int>(n), k_tiles / 2, bias, out, stream, norm);
}


}  // namespace tachyon::kernels::cuda
