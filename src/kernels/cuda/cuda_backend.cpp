// The CUDA backend: construction, the op mapping (each Backend op onto its kernels, under a Scope
// that records it for the step's graph or times it), and the test and benchmark hooks of
// cuda_backend.h. The class is in cuda_backend_impl.h; weights, buffers and copies are in
// device_mirror.cpp, the fusions in cuda_fusion.cpp.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/byte_size.h"
#include "base/error.h"
#include "kernels/cuda/attention_probe.cuh"
#include "kernels/cuda/cuda_backend_impl.h"

namespace tachyon::kernels {
namespace cuda {

void fail_cuda(const char* file, int line, const char* expr, cudaError_t err) {
  throw Error("{}:{}: {} failed: {}", file, line, expr, cudaGetErrorString(err));
}
void fail_allocation(bool device, size_t bytes, cudaError_t err) {
  cudaGetLastError();  // an allocation's failure is not sticky: later calls must not report it again
  const auto size = format_byte_size(static_cast<int64_t>(bytes));
  if (!device) throw Error("pinned host memory: {} could not be allocated: {}", size, cudaGetErrorString(err));
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess)
    throw Error("device memory: {} could not be allocated: {}", size, cudaGetErrorString(err));
  throw Error("device memory: {} could not be allocated ({} free of {}): {}", size,
              format_byte_size(static_cast<int64_t>(free)), format_byte_size(static_cast<int64_t>(total)),
              cudaGetErrorString(err));
}
void fail_unsupported(const char* what, int64_t value) {
  throw Error("the CUDA backend does not support {} = {}", what, value);
}

int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  TACHYON_CUDA_CHECK(cudaGetDevice(&device));
  TACHYON_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

CudaBackend::CudaBackend(const CudaOptions& options)
    : fused_norm_rows_(std::clamp(options.fused_norm_rows, 0, cuda::kStreamMaxRows)),
      gated_mlp_fusion_(options.gated_mlp_fusion),
      prefill_norm_fusion_(options.prefill_norm_fusion),
      graph_policy_(options.graphs),
      device_(options.device) {
  const int visible = cuda_device_count();
  TACHYON_CHECK(visible > 0, "no CUDA device is visible");
  if (device_ < 0 || device_ >= visible) throw Error("CUDA device {} does not exist ({} visible)", device_, visible);
  TACHYON_CUDA_CHECK(cudaSetDevice(device_));
  // Before anything asks which kernels this GPU runs. Process-wide and kept: a backend made later
  // with the default options (tests' references) runs the forced kernels too.
  if (options.arch != 0) cuda::force_device_arch(options.arch);
  TACHYON_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  mirror_ = std::make_unique<DeviceMirror>(stream_);
  graphs_ = std::make_unique<cuda::StepGraphs>(stream_, options.graph_trace);
  reads_ = std::make_unique<cuda::HostReads>(stream_);
  // By default graphs record the forwards their callers mark as repeating (the engine's plain
  // and draft-chain decode steps, the model drafters' chains: on the launch-bound demo model
  // +16-26% plain, +4-44% prompt lookup) and nothing else: prefill chunks change shape, and
  // graphing draft-tree steps measured no faster (docs/perf/cuda.md). CudaOptions::graphs
  // overrides it.
  graphs_->enabled = graph_policy_ == GraphPolicy::Always;
  moe_ = std::make_unique<cuda::MoeRunner>(stream_);
  profile_ = std::make_unique<OpProfile>();
  cudaDeviceProp prop{};
  TACHYON_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  device_name_ = prop.name;
  // Prefill matmuls on wgmma (sm_90a code on compute capability 9.0, not forced to an older arch)
  // need each matrix also in core-matrix order (cuda::pack_core_weight); CudaOptions::wgmma false
  // keeps the mma.sync kernel.
  wgmma_ = cuda::device_arch().wgmma && options.wgmma;
}
CudaBackend::~CudaBackend() {
  try {
    flush();
  } catch (...) {
  }
  cudaStreamSynchronize(stream_);
  graphs_.reset();
  reads_.reset();
  swap_.reset();
  mirror_.reset();
  moe_.reset();
  for (void* p : owned_) cudaFree(p);
  if (staging_) cudaFree(staging_);
  if (workspace_) cudaFree(workspace_);
  if (counters_) cudaFree(counters_);
  if (attn_counters_) cudaFree(attn_counters_);
  if (norm_arrivals_) cudaFree(norm_arrivals_);
  profile_.reset();
  if (attn_workspace_) cudaFree(attn_workspace_);
  if (rotated_q_) cudaFree(rotated_q_);
  if (copy_workspace_) cudaFree(copy_workspace_);
  for (void* p : quant_dense_)
    if (p) cudaFree(p);
  if (moe_dense_) cudaFree(moe_dense_);
  if (sample_workspace_) cudaFree(sample_workspace_);
  cudaStreamDestroy(stream_);
}

void CudaBackend::embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  if (for_each_row_kind(rows, table, [&](int64_t first, int64_t n, bool decode) {
        embedding(table.of_kind(decode), ids + first, n, scale, out + first * table.cols);
      }))
    return;
  Scope scope(this, "embedding");
  embed(table, staged(ids, rows), rows, scale, out);
}

void CudaBackend::embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  if (for_each_row_kind(rows, table, [&](int64_t first, int64_t n, bool decode) {
        embedding_device_ids(table.of_kind(decode), ids + first, n, scale, out + first * table.cols);
      }))
    return;
  Scope scope(this, "embedding");
  embed(table, ids, rows, scale, out);
}

void CudaBackend::embed(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  if (table.layout == WeightLayout::QuantFragments)
    return cuda::embedding_quant(quant_matrix(table), ids, rows, scale, out, stream_);
  TACHYON_CHECK(table.layout == WeightLayout::MmaFragments || table.dtype == DType::F32, "embedding table layout");
  cuda::embedding(table.data, table.layout == WeightLayout::MmaFragments, table.rows, table.cols, ids, rows, scale, out,
                  stream_);
}

void CudaBackend::rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                           float* out) {
  Scope scope(this, "rms_norm");
  TACHYON_CHECK(w.dtype == DType::F32 && w.cols == dim, "rms_norm weight must be an uploaded [dim] vector");
  cuda::rms_norm(x, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out, stream_);
}

void CudaBackend::matmul(const float* x, int64_t rows, const Weight& w_in, const Weight* bias, float* out) {
  // --quantize-decode: one matmul per run of rows of one kind (a pending norm launches first).
  if (for_each_row_kind(rows, w_in, [&](int64_t first, int64_t n, bool decode) {
        settle();
        matmul(x + first * w_in.cols, n, w_in.of_kind(decode), bias, out + first * w_in.rows);
      }))
    return;
  const Weight& w = w_in.rows == 1 && w_in.layout == WeightLayout::RowMajor ? packed_row(w_in) : w_in;
  const float* b = bias && !bias->empty() ? static_cast<const float*>(bias->data) : nullptr;
  if (pending_norm_ && matmul_after_pending_norm(x, rows, w, b, out)) return;
  if (w.layout == WeightLayout::QuantFragments) return quant_matmul(x, rows, w, b, out);
  Scope scope(this, "matmul", w.rows, w.cols, rows);
  TACHYON_CHECK(w.layout == WeightLayout::MmaFragments, "matmul weights must come from upload_weight");
  prepare_matmul(rows, w);
  cuda::matmul(x, rows, w.data, core_copy(rows, w), w.rows, w.cols, b, out, workspace_, counters_, stream_);
}

void CudaBackend::gated_matmul(const float* gate_up, int64_t rows, int64_t dim, Activation act, const Weight& w,
                               float* act_out, float* out) {
  if (for_each_row_kind(rows, w, [&](int64_t first, int64_t n, bool decode) {
        settle();
        gated_matmul(gate_up + first * 2 * dim, n, dim, act, w.of_kind(decode), act_out + first * dim,
                     out + first * w.rows);
      }))
    return;
  if (w.layout != WeightLayout::MmaFragments || w.cols != dim ||
      !cuda::matmul_gated_fuses(rows, w.rows, w.cols, core_copy(rows, w) != nullptr))
    return Backend::gated_matmul(gate_up, rows, dim, act, w, act_out, out);
  Scope scope(this, "gated_matmul", w.rows, w.cols, rows);
  prepare_matmul(rows, w);
  cuda::matmul_gated(gate_up, act == Activation::GeluTanh, rows, core_copy(rows, w), w.rows, w.cols, nullptr, out,
                     workspace_, stream_);
}

void CudaBackend::rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
                       const int32_t* positions) {
  Scope scope(this, "rope");
  cuda::rope(x, rows, heads, head_dim, staged(table.inv_freq.data(), table.inv_freq.size()), table.rotary_dim,
             table.offset, table.attention_scaling, table.interleaved, staged(positions, rows), stream_);
}

void CudaBackend::gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) {
  Scope scope(this, "gated_activation");
  cuda::gated_activation(gate_up, rows, dim, act, out, stream_);
}

void CudaBackend::gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) {
  Scope scope(this, "gather_rows");
  cuda::gather_rows(src, staged(rows, n), n, width, dst, stream_);
}

void CudaBackend::add(float* x, const float* y, int64_t n) {
  Scope scope(this, "add");
  cuda::add(x, y, n, stream_);
}

void CudaBackend::argmax(const float* x, int64_t rows, int64_t n, int32_t* ids) {
  Scope scope(this, "argmax");
  cuda::argmax(x, rows, n, ids, stream_);
}

void CudaBackend::sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, int32_t* ids) {
  Scope scope(this, "sample_tokens");
  grow_workspace(sample_workspace_, sample_workspace_bytes_, cuda::sample_workspace_bytes(rows, n));
  cuda::sample_tokens(x, rows, n, staged(params, static_cast<size_t>(rows)), sample_workspace_, ids, stream_);
}

void CudaBackend::attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& p,
                                  float* mass, float* peak) {
  TACHYON_CHECK(p.query_rows > 0 && p.query_rows <= rows, "attention probe: {} query rows of {}", p.query_rows, rows);
  TACHYON_CHECK(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0, "attention probe: {} heads over {} KV heads",
                p.num_heads, p.num_kv_heads);
  Scope scope(this, "attention_probe");
  scope.direct();
  const size_t scores = cuda::attention_probe_workspace_bytes(rows, p);
  const size_t results = 2 * static_cast<size_t>(rows) * sizeof(float);
  grow_workspace(probe_workspace_, probe_workspace_bytes_, scores + results);
  float* layer = reinterpret_cast<float*>(static_cast<char*>(probe_workspace_) + scores);  // [2, rows]
  cuda::attention_probe(q, k, rows, p, probe_workspace_, layer, layer + rows, stream_);
  std::vector<float> host(2 * static_cast<size_t>(rows));
  copy_to_host(host.data(), layer, results);
  for (int64_t j = 0; j < rows; ++j) {
    mass[j] += host[static_cast<size_t>(j)];
    if (peak) peak[j] = std::max(peak[j], host[static_cast<size_t>(rows + j)]);
  }
}

void CudaBackend::top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) {
  Scope scope(this, "top_two");
  cuda::top_two(x, rows, n, out, stream_);
}

void CudaBackend::write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) {
  Scope scope(this, "write_kv");
  cuda::write_kv(k, v, rows, device_meta(meta, rows), device_kv(kv), kv.block_size, static_cast<int>(kv.head_dim),
                 stream_);
}

void CudaBackend::qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                                         const AttentionMeta& meta, float* q, float* k, float* v) {
  if (rows > 0) {
    Scope scope(this, "qkv_norm_rope_write_kv");
    const cuda::DeviceAttentionMeta dmeta = device_meta(meta, rows);
    cuda::QkPrologue dp;
    if (device_prologue(p, kv, meta, dmeta, rows, dp) &&
        cuda::qkv_norm_rope_write_kv(qkv, q, rows, dp, dmeta, device_kv(kv), kv.block_size, stream_))
      return;
  }
  Backend::qkv_norm_rope_write_kv(qkv, rows, p, kv, meta, q, k, v);
}

void CudaBackend::attention_from_qkv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                                     const AttentionMeta& meta, const AttentionParams& params, float* q, float* k,
                                     float* v, float* out) {
  // Turbo keys are stored rotated: the queries are rotated before the attention
  // (CudaBackend::attention), so the decode kernel's own prologue does not take them.
  if (rows >= 2 && !kv_format_rotates_keys(kv.format) && one_row_per_sequence(meta, rows)) {
    Scope scope(this, "attention");
    const cuda::DeviceAttentionMeta dmeta = device_meta(meta, rows);
    cuda::QkPrologue dp;
    if (device_prologue(p, kv, meta, dmeta, rows, dp)) {
      const cuda::AttentionShape shape = attention_shape(kv, params);
      decode_rows_.resize(static_cast<size_t>(rows));
      std::iota(decode_rows_.begin(), decode_rows_.end(), 0);
      decode_attention(qkv, &dp, kv, meta, shape, dmeta, out);
      return;
    }
  }
  Backend::attention_from_qkv(qkv, rows, p, kv, meta, params, q, k, v, out);
}

void CudaBackend::attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                            const AttentionParams& p, float* out) {
  if (rows == 0) return;
  Scope scope(this, "attention");
  const cuda::AttentionShape shape = attention_shape(kv, p);
  if (kv_format_rotates_keys(kv.format)) {  // q·k in the rotated space of the stored keys
    grow_workspace(rotated_q_, rotated_q_bytes_, static_cast<size_t>(rows * p.num_heads * kv.head_dim) * sizeof(float));
    cuda::rotate_queries(q, rows, static_cast<int>(p.num_heads), static_cast<int>(kv.head_dim),
                         static_cast<float*>(rotated_q_), stream_);
    q = static_cast<const float*>(rotated_q_);
  }
  std::vector<cuda::QueryTile>& tiles = query_tiles_;
  cuda::make_query_tiles(meta.row_seq, meta.tree_base, rows,
                         cuda::query_tile_rows(shape.num_heads / shape.num_kv_heads, shape.head_dim), tiles,
                         decode_rows_);
  const cuda::DeviceAttentionMeta dmeta = device_meta(meta, rows);
  if (!tiles.empty())
    cuda::attention(q, dmeta, staged(tiles.data(), tiles.size()), static_cast<int>(tiles.size()), device_kv(kv), shape,
                    out, stream_);
  if (!decode_rows_.empty()) decode_attention(q, nullptr, kv, meta, shape, dmeta, out);
}

void CudaBackend::moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids,
                            float* weights) {
  Scope scope(this, "moe_route");
  scope.direct();
  cuda::moe_route(logits, rows, p, ids, weights, stream_);
}

void CudaBackend::moe_experts(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                              const MoeExperts& e, float* out) {
  std::vector<Weight> of_kind;
  if (e.num_experts > 0 && for_each_row_kind(rows, e.gate_up[0], [&](int64_t first, int64_t n, bool decode) {
        moe_experts(x + first * e.hidden, n, ids + first * top_k, weights + first * top_k, top_k,
                    experts_of_kind(e, decode, of_kind), out + first * e.hidden);
      }))
    return;
  Scope scope(this, "moe_experts");
  scope.direct();
  for (int64_t i = 0; i < e.num_experts; ++i)
    if (e.gate_up[i].layout == WeightLayout::QuantFragments || e.down[i].layout == WeightLayout::QuantFragments)
      return moe_experts_quant(x, rows, ids, weights, top_k, e, out);
  moe_->run(x, rows, ids, weights, top_k, e, out);
}

void CudaBackend::head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs, const Weight& w,
                              float* out, int64_t ors, int64_t ohs) {
  if (rows == 0) return;
  Scope scope(this, "head_matmul", w.rows, w.cols, rows);
  const bool quantized = w.layout == WeightLayout::QuantFragments;
  TACHYON_CHECK(w.layout == WeightLayout::MmaFragments || quantized,
                "head_matmul weights must come from upload_weight");
  if (quantized) {
    TACHYON_CHECK(w.format != WeightFormat::Dense, "head_matmul of an I8 weight (row scales) is not supported on CUDA");
    scope.direct();  // the dequantized copy is written now, in stream order
  }
  const int64_t n = w.rows / heads;
  if (n % 8 != 0) cuda::fail_unsupported("head_matmul rows per head (a multiple of 8)", n);
  head_tiles_.clear();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; r += cuda::kGroupTileRows)
      head_tiles_.push_back({static_cast<int32_t>(h), static_cast<int32_t>(r),
                             static_cast<int32_t>(std::min<int64_t>(cuda::kGroupTileRows, rows - r)), 0});
  TACHYON_CHECK(head_tiles_.size() <= 65535, "head_matmul: {} rows x {} heads is too many tiles", rows, heads);
  cuda::GroupedMatmul p;
  p.x = x, p.x_row_stride = xrs, p.x_group_stride = xhs;
  p.w = quantized ? dequantize_dense(w, false, 0) : w.data;  // quantized: a bf16 copy (the GEMM's bits)
  p.w_group_stride = (n / 8) * (cuda::round_up(w.cols, cuda::kMmaColPad) / 32) * 512;  // bytes
  p.n = n, p.k = w.cols, p.out = out, p.out_row_stride = ors, p.out_group_stride = ohs;
  const auto* tiles = static_cast<const cuda::GroupTile*>(
      staged(head_tiles_.data(), head_tiles_.size()));
  cuda::grouped_matmul(p, tiles, nullptr, static_cast<int64_t>(head_tiles_.size()), stream_);
}

void CudaBackend::copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                               int64_t dst_stride) {
  Scope scope(this, "copy_strided");
  cuda::copy_strided(src, src_stride, rows, width, dst, dst_stride, stream_);
}

void CudaBackend::gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                                int64_t group, GateFn fn) {
  Scope scope(this, "gate_multiply");
  cuda::gate_multiply(x, rows, dim, gate, gate_stride, group, fn, stream_);
}

void CudaBackend::causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w,
                                     const RecurrentMeta& meta, float* state, int64_t state_stride, float* out) {
  Scope scope(this, "causal_conv1d_silu");
  scope.direct();
  TACHYON_CHECK(w.layout == WeightLayout::MmaFragments && w.rows == channels,
                "causal_conv1d_silu weight must be an uploaded [channels, kernel] matrix");
  cuda::causal_conv1d_silu(x, channels, w.data, w.cols, device_meta(meta), state, state_stride, out, stream_);
}

void CudaBackend::gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                                   const DeltaRuleParams& p, const RecurrentMeta& meta, float* state,
                                   int64_t state_stride, float* out) {
  Scope scope(this, "gated_delta_rule");
  scope.direct();
  cuda::gated_delta_rule(qkv, qkv_stride, ba, p, device_meta(meta), state, state_stride, out, stream_);
}

void CudaBackend::prepare_matmul(int64_t rows, const Weight& w) {
  grow_workspace(workspace_, workspace_bytes_, cuda::matmul_workspace_bytes(rows, w.rows, w.cols));
  grow_zeroed_counters(counters_, num_counters_, cuda::matmul_counter_count(w.rows));
}

const void* CudaBackend::core_copy(int64_t rows, const Weight& w) const {
  if (rows <= 64) return nullptr;
  const auto it = core_copies_.find(w.data);
  return it != core_copies_.end() ? it->second : nullptr;
}

bool CudaBackend::device_prologue(const QkvPrologue& p, const PagedKv& kv, const AttentionMeta& meta,
                                  const cuda::DeviceAttentionMeta& dmeta, int64_t rows, cuda::QkPrologue& dp) {
  const auto norm_fits = [&](const Weight* w) {
    return !w || (w->dtype == DType::F32 && w->cols == kv.head_dim);
  };
  const RopeTable& rope = *p.rope;
  if (!norm_fits(p.q_norm) || !norm_fits(p.k_norm) || rope.rotary_dim > 512) return false;
  dp.num_heads = static_cast<int>(p.num_heads);
  dp.kv_heads = static_cast<int>(kv.num_kv_heads);
  dp.head_dim = static_cast<int>(kv.head_dim);
  dp.q_norm = p.q_norm ? static_cast<const float*>(p.q_norm->data) : nullptr;
  dp.k_norm = p.k_norm ? static_cast<const float*>(p.k_norm->data) : nullptr;
  dp.eps = p.eps;
  dp.weight_offset = p.weight_offset;
  dp.half = rope.rotary_dim >= 2 ? static_cast<int>(rope.rotary_dim / 2) : 0;
  dp.offset = static_cast<int>(rope.offset);
  dp.scaling = rope.attention_scaling;
  dp.interleaved = rope.interleaved ? 1 : 0;
  if (!cuda::prologue_supported(dp)) return false;
  dp.inv_freq = dp.half > 0 ? staged(rope.inv_freq.data(), rope.inv_freq.size()) : nullptr;
  dp.positions = p.positions == meta.positions ? dmeta.positions : staged(p.positions, rows);
  return true;
}

cuda::KvPair CudaBackend::device_kv(const PagedKv& kv) {
  if (const char* why = kv_format_unsupported(kv.format, kv.head_dim))
    throw Error("the {} KV cache cannot store heads of dimension {}: {}", kv_format_name(kv.format), kv.head_dim, why);
  if (kv.format != KvFormat::F32)
    TACHYON_CHECK(int64_t{kv.block_size} * kv.num_kv_heads <= cuda::kMaxBlockRecords,
                  "the CUDA {} KV cache takes at most {} (slot, head) records per block, got {} x {}",
                  kv_format_name(kv.format), cuda::kMaxBlockRecords, kv.block_size, kv.num_kv_heads);
  const auto tensor = [](void* base, const KvTensorLayout& l) {
    return cuda::DeviceKvTensor{static_cast<uint8_t*>(base), l.block_bytes, static_cast<int32_t>(l.params_offset),
                                static_cast<int32_t>(l.code_bytes), static_cast<int32_t>(l.param_bytes),
                                static_cast<int32_t>(l.codec)};
  };
  return {tensor(kv.k, kv.k_layout()), tensor(kv.v, kv.v_layout()), static_cast<int32_t>(kv.num_kv_heads),
          static_cast<int32_t>(kv.format)};
}

bool CudaBackend::one_row_per_sequence(const AttentionMeta& meta, int64_t rows) {
  if (meta.tree_base) return false;
  for (int64_t r = 1; r < rows; ++r)
    if (meta.row_seq[r] == meta.row_seq[r - 1]) return false;
  return true;
}

cuda::AttentionShape CudaBackend::attention_shape(const PagedKv& kv, const AttentionParams& p) {
  TACHYON_CHECK(kv.head_dim <= 256 && kv.head_dim % 8 == 0,
                "the CUDA attention supports head_dim a multiple of 8 up to 256, got {}", kv.head_dim);
  TACHYON_CHECK(p.num_heads % kv.num_kv_heads == 0, "num_heads must be a multiple of num_kv_heads");
  return {static_cast<int>(p.num_heads), static_cast<int>(kv.num_kv_heads), static_cast<int>(kv.head_dim),
          kv.block_size, p.scale, p.softcap, static_cast<int>(p.sliding_window), 0,
          p.sinks};  // device memory: an uploaded weight
}

void CudaBackend::decode_attention(const float* q, const cuda::QkPrologue* prologue, const PagedKv& kv,
                                   const AttentionMeta& meta, const cuda::AttentionShape& shape,
                                   const cuda::DeviceAttentionMeta& dmeta, float* out) {
  int32_t max_pos = 0;
  for (int32_t r : decode_rows_) max_pos = std::max(max_pos, meta.positions[r]);
  // Rounded up to a power of two, at least kMinDecodeChunks: chunks past a row's position
  // exit at once (and are not merged: same bits), and the launch shape, part of a step's
  // graph key, changes at 512, 1024, 2048, ... tokens of context. Starting from one chunk it
  // also changed at 64, 128 and 256, each band had its own graphs of every speculative step
  // shape, and a request of a few hundred tokens kept capturing new ones (~1 ms each on the
  // H200).
  int chunks = kMinDecodeChunks;
  while (chunks < cuda::decode_chunks(max_pos)) chunks *= 2;
  const size_t need = cuda::decode_workspace_bytes(static_cast<int64_t>(decode_rows_.size()), shape.num_heads,
                                                   shape.head_dim, chunks);
  grow_workspace(attn_workspace_, attn_workspace_bytes_, need);
  grow_zeroed_counters(attn_counters_, num_attn_counters_, decode_rows_.size() * static_cast<size_t>(shape.num_kv_heads));
  cuda::attention_decode(q, prologue, dmeta, staged(decode_rows_.data(), decode_rows_.size()),
                         static_cast<int>(decode_rows_.size()), chunks, device_kv(kv), shape,
                         static_cast<float*>(attn_workspace_), attn_counters_, out, stream_);
}

}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<cuda::CudaBackend>(options);
}

namespace {
// The CUDA backend behind `backend`, for the test and benchmark hooks below (`hook` names the caller).
cuda::CudaBackend* as_cuda_backend(Backend& backend, const char* hook) {
  auto* b = dynamic_cast<cuda::CudaBackend*>(&backend);
  TACHYON_CHECK(b != nullptr, "{} needs the CUDA backend", hook);
  return b;
}
}  // namespace

void cuda_profile_enable(Backend& backend, bool on) {
  auto* b = as_cuda_backend(backend, "cuda_profile_enable");
  b->profile().enabled = on;
}

uint64_t cuda_fused_norm_launches(Backend& backend) {
  auto* b = as_cuda_backend(backend, "cuda_fused_norm_launches");
  return b->fused_norm_launches();
}

uint64_t cuda_swap_launches(Backend& backend) {
  auto* b = as_cuda_backend(backend, "cuda_swap_launches");
  return b->swap_launches();
}

uint64_t cuda_quant_stream_matmuls(Backend& backend) {
  return as_cuda_backend(backend, "cuda_quant_stream_matmuls")->quant_stream_matmuls();
}

uint64_t cuda_quant_pair_stream_matmuls(Backend& backend) {
  return as_cuda_backend(backend, "cuda_quant_pair_stream_matmuls")->quant_pair_stream_matmuls();
}

uint64_t cuda_fused_gated_mlps(Backend& backend) {
  return as_cuda_backend(backend, "cuda_fused_gated_mlps")->fused_gated_mlps();
}

uint64_t cuda_fused_prefill_norms(Backend& backend) {
  return as_cuda_backend(backend, "cuda_fused_prefill_norms")->fused_prefill_norms();
}

bool cuda_stream_tile_counters_are_zero(Backend& backend) {
  return as_cuda_backend(backend, "cuda_stream_tile_counters_are_zero")->stream_tile_counters_are_zero();
}

void cuda_graphs_enable(Backend& backend, bool on) {
  auto* b = as_cuda_backend(backend, "cuda_graphs_enable");
  b->set_graph_policy(on ? cuda::CudaBackend::GraphPolicy::Always : cuda::CudaBackend::GraphPolicy::Never);
}

CudaGraphCounters cuda_graph_counters(Backend& backend) {
  auto* b = as_cuda_backend(backend, "cuda_graph_counters");
  const auto& c = b->graphs().counters();
  return {c.replays,          c.captures,         c.direct,         c.capture_failures, b->host_read_flush_seconds(),
          b->host_read_wait_seconds(), c.replay_seconds, c.capture_seconds, c.direct_seconds};
}

std::string cuda_profile_report(Backend& backend) {
  auto* b = as_cuda_backend(backend, "cuda_profile_report");
  return b->profile().report(b->stream());
}

}  // namespace tachyon::kernels
