// The CUDA backend's class, shared by the files that implement it: cuda_backend.cpp (construction
// and the op mapping), device_mirror.cpp (weights, buffers, copies), cuda_fusion.cpp (the deferred
// norm fusion and the gated MLP), op_profile.cpp (per-op timing). Not a public header: callers use
// cuda_backend.h.
#pragma once

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
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_mirror.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/grouped_matmul.cuh"
#include "kernels/cuda/host_reads.h"
#include "kernels/cuda/host_swap.h"
#include "kernels/cuda/linear_attention.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/matmul_quant.cuh"
#include "kernels/cuda/matmul_stream.cuh"
#include "kernels/cuda/moe.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/op_profile.h"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/step_graph.h"

namespace tachyon::kernels::cuda {

// Decode attention launches at least this many 64-key chunks per (row, KV head): see attention().
constexpr int kMinDecodeChunks = 8;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda/" + device_name_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;

  // Matrices become bf16 MMA fragments (WeightLayout::MmaFragments); vectors become f32.
  Weight upload_weight(const Weight& host) override;

  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  HostRead copy_to_host_later(void* dst, const void* src, size_t bytes) override;
  bool runs_asynchronously() const override { return true; }
  void wait_host_read(HostRead read) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void* allocate_host(size_t bytes) override;  // pinned (cudaMallocHost)
  void deallocate_host(void* ptr) override;
  void swap_copy(std::span<const DeviceCopy> copies, bool to_host) override;  // on swap_'s copy stream
  void copy_on_device_many(std::span<const DeviceCopy> copies) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  // A stream-ordered copy: recorded with the step's ops (and replayed with its graph) while a
  // step is recorded, else issued now.
  void copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
  // A step seen for the first time is issued op by op (host-bound: up to twice a replay's time
  // for a drafter chain), the second time captured: both are one-time costs of that shape.
  // Timing them made auto-k see the rarer draft counts as expensive and choose them ever
  // less (measured on the H200: auto-k 1.30x against 1.40x with k fixed at 4).
  uint64_t warmup_events() const override;
  std::optional<DeviceMemory> device_memory() override;
  void set_repeating_step(bool repeating) override;
  void bind_thread() override;
  using GraphPolicy = CudaOptions::Graphs;
  double host_read_flush_seconds() const { return host_read_flush_seconds_; }
  double host_read_wait_seconds() const { return host_read_wait_seconds_; }
  uint64_t fused_norm_launches() const { return fused_norms_; }
  uint64_t quant_stream_matmuls() const { return quant_streams_; }
  uint64_t quant_pair_stream_matmuls() const { return quant_pair_streams_; }
  uint64_t fused_gated_mlps() const { return fused_gated_mlps_; }
  uint64_t fused_prefill_norms() const { return fused_prefill_norms_; }
  uint64_t swap_launches() const { return swap_ ? swap_->launches() : 0; }
  bool stream_tile_counters_are_zero() {
    synchronize();
    return cuda::stream_tile_counters_are_zero(stream_);
  }
  void set_graph_policy(GraphPolicy policy);
  void synchronize() override;

  void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override;
  void embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override;
  // ids: device memory.
  void embed(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out);
  void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                float* out) override;
  void matmul(const float* x, int64_t rows, const Weight& w_in, const Weight* bias, float* out) override;
  void gated_matmul(const float* gate_up, int64_t rows, int64_t dim, Activation act, const Weight& w, float* act_out,
                    float* out) override;
  void gated_mlp(const float* x, int64_t rows, const Weight& gate_up_w, const Weight& down_w, Activation act,
                 float* gate_up, float* act_out, float* out) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
            const int32_t* positions) override;
  void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) override;
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) override;
  void add(float* x, const float* y, int64_t n) override;
  void add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                    float weight_offset, float* out) override;
  void argmax(const float* x, int64_t rows, int64_t n, int32_t* ids) override;
  void attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& p, float* mass,
                       float* peak) override;
  void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, int32_t* ids) override;
  void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) override;
  // Every format of kernels/kv_format.h: write_kv encodes, the attention kernels decode as they stage.
  bool supports_kv_format(KvFormat) const override { return true; }
  void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) override;
  void qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                              const AttentionMeta& meta, float* q, float* k, float* v) override;
  // Decode steps of two or more rows (every row the only one of its sequence, no tree rows) run
  // the prologue inside the decode attention: one kernel and one launch boundary less per layer.
  // H200, Qwen3-8B shape (docs/perf/cuda.md): device time per step -0.6% at
  // batch 8, +0.1% at batch 4, but +0.7% at batch 1, where the separate prologue stays.
  void attention_from_qkv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                          const AttentionMeta& meta, const AttentionParams& params, float* q, float* k, float* v,
                          float* out) override;
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& p, float* out) override;

  // ---- MoE / MLA / linear-attention ops
  void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids,
                 float* weights) override;
  void moe_experts(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                   const MoeExperts& e, float* out) override;
  // One group per head: the head's rows of w are n-tiles [h·n/8, (h+1)·n/8) of the packed matrix.
  void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs, const Weight& w,
                   float* out, int64_t ors, int64_t ohs) override;
  void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                    int64_t dst_stride) override;
  void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride, int64_t group,
                     GateFn fn) override;
  void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w, const RecurrentMeta& meta,
                          float* state, int64_t state_stride, float* out) override;
  void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                        const DeltaRuleParams& p, const RecurrentMeta& meta, float* state, int64_t state_stride,
                        float* out) override;

  OpProfile& profile() { return *profile_; }
  cuda::StepGraphs& graphs() { return *graphs_; }
  cudaStream_t stream() const { return stream_; }

 private:
  // A device scratch buffer of at least `need` bytes. Grow-only, geometrically: a steady decode
  // loop never reallocates (a reallocation synchronises the stream).
  void grow_workspace(void*& buffer, size_t& bytes, size_t need);
  // add_rms_norm at decode rows waits here (pending_norm_) for the op after it: a matmul of its
  // output on the streaming kernel takes it into its staging (matmul_stream.cuh: one launch and
  // one kernel boundary fewer per norm, the same bits); anything else launches it first
  // (settle: every Scope, flush and copy). At most CudaOptions::fused_norm_rows rows: every CTA
  // normalises every row, and the CTA that stages last writes them back.
  struct PendingNorm {
    float* x;
    const float* y;
    const float* w;
    int64_t rows, dim;
    float eps, weight_offset;
    float* out;
  };
  // Whether [a, a + an) and [b, b + bn) share an element.
  static bool overlaps(const float* a, int64_t an, const float* b, int64_t bn) { return a < b + bn && b < a + an; }
  // Issues what earlier calls deferred, in their order: the queued swaps (HostSwap::issue), then a
  // pending add_rms_norm. Called before every op, flush and host copy.
  void settle();
  bool matmul_after_pending_norm(const float* x, int64_t rows, const Weight& w, const float* bias, float* out);

  // A pending norm at prefill rows whose output `x` is a prefill matmul's input (k = its dim): taken,
  // to write that input itself (norm_into_core), so the matmul skips its conversion.
  std::optional<PendingNorm> take_prefill_norm(const float* x, int64_t rows, int64_t k);
  // The norm, writing out and its rows in the wgmma kernel's core-matrix order at the workspace's start.
  void norm_into_core(const PendingNorm& p);
  bool matmul_after_prefill_norm(const float* x, int64_t rows, const Weight& w, const float* bias, float* out);

  // The matmul workspace and split-K counters for w at `rows`.
  void prepare_matmul(int64_t rows, const Weight& w);
  // w's core-matrix copy when the prefill (wgmma) kernel would use it, else null.
  const void* core_copy(int64_t rows, const Weight& w) const;

  // Brackets one op: installs the step recorder for its launches (graph-safe ops; `direct()`
  // for the others, which synchronise inside), or profile events when profiling is on.
  struct Scope {
    Scope(CudaBackend* b, const char* op, int64_t n = 0, int64_t k = 0, int64_t m = 0)
        : backend(b), previous((b->settle(), cuda::active_step_graphs())) {
      if (!b->profile_->enabled) {
        if (b->graphs_->enabled) cuda::active_step_graphs() = b->graphs_.get();
        return;
      }
      b->flush();
      backend->profile_->begin(backend->stream_, n ? fmt::format("{} {}x{} M={}", op, n, k, m) : std::string(op));
      on = true;
    }
    ~Scope() {
      cuda::active_step_graphs() = previous;
      if (on) backend->profile_->end(backend->stream_);
    }
    // This op issues its work directly (it reads results on the host or syncs): everything
    // recorded before it goes first.
    void direct() {
      cuda::active_step_graphs() = previous;
      backend->flush();
    }
    CudaBackend* backend;
    cuda::StepGraphs* previous;
    bool on = false;
  };

  static float load_host(const Weight& w, int64_t i);

  // Device copy of n host elements for the op being issued: staged in the step's arena while
  // it is recorded for a graph, else mirrored by content.
  template <typename T>
  const T* staged(const T* host, size_t n) {
    if (cuda::active_step_graphs() == graphs_.get())
      return static_cast<const T*>(graphs_->stage(host, n * sizeof(T)));
    return mirror_->get(host, n);
  }
  // Counters that kernels count on and leave zeroed (split-K matmul, decode attention): at least
  // `need`, grow-only and geometrically (a reallocation synchronises the stream), zeroed once.
  void grow_zeroed_counters(unsigned*& counters, size_t& count, size_t need);
  // Issues the recorded ops (graph or direct) before anything that leaves the recording.
  void flush();

  // The prologue's arguments in device memory, its host arrays staged: call it inside the op's
  // Scope (staged outside, they go to the mirror, whose addresses change the step's graph key).
  // Positions that are the attention meta's are not staged twice (dmeta holds them). False, with
  // nothing staged, for shapes the fused kernels do not cover.
  bool device_prologue(const QkvPrologue& p, const PagedKv& kv, const AttentionMeta& meta,
                       const cuda::DeviceAttentionMeta& dmeta, int64_t rows, cuda::QkPrologue& dp);
  // Every row the only one of its sequence (rows of a sequence are consecutive), no tree rows.
  static bool one_row_per_sequence(const AttentionMeta& meta, int64_t rows);
  static cuda::AttentionShape attention_shape(const PagedKv& kv, const AttentionParams& p);
  // A layer's K and V caches as the kernels address them (kernels/kv_format.h's layout).
  static cuda::KvPair device_kv(const PagedKv& kv);
  // The split-KV decode attention of decode_rows_ (with `prologue`, q is the fused projection's
  // output: cuda::attention_decode).
  void decode_attention(const float* q, const cuda::QkPrologue* prologue, const PagedKv& kv, const AttentionMeta& meta,
                        const cuda::AttentionShape& shape, const cuda::DeviceAttentionMeta& dmeta, float* out);

  cuda::DeviceAttentionMeta device_meta(const AttentionMeta& meta, int64_t rows);

  cuda::DeviceRecurrentMeta device_meta(const RecurrentMeta& meta);

  // ---- quantized weights (quant_weights.cpp; layout: quant_layout.h)
  // upload_weight of a quantized format or Dense I8: the codes, scales and biases repacked on the
  // host into WeightLayout::QuantFragments (vectors: dequantized to f32).
  Weight upload_quant_weight(const Weight& host);
  // The kernels' view of an uploaded quantized weight.
  cuda::QuantMatrix quant_matrix(const Weight& w) const;
  // matmul of a QuantFragments weight: the decode kernel at <= 64 rows, else a bf16 copy
  // (dequantized into quant_dense_) through the bf16 prefill GEMM.
  void quant_matmul(const float* x, int64_t rows, const Weight& w, const float* bias, float* out);
  // w dequantized into quant_dense_[buffer] (0 or 1: a gated MLP needs both matrices) as bf16
  // fragments or core matrices: the buffer.
  void* dequantize_dense(const Weight& w, bool core, int buffer);
  // moe_experts with quantized experts: each expert dequantized into moe_dense_, then the bf16 MoE.
  void moe_experts_quant(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                         const MoeExperts& e, float* out);

  // A [1, k] weight (uploaded as an f32 vector, e.g. Qwen3-Next's shared_expert_gate) used as
  // a matrix: packed into fragments on first use, once per weight.
  const Weight& packed_row(const Weight& v);

  cudaStream_t stream_ = nullptr;
  std::string device_name_;
  std::unique_ptr<cuda::MoeRunner> moe_;
  std::vector<cuda::GroupTile> head_tiles_;
  std::map<const void*, Weight> packed_rows_;
  bool wgmma_ = false;                                // see the constructor
  std::map<const void*, const void*> core_copies_;  // fragment-packed matrix -> its core-matrix copy
  std::unique_ptr<DeviceMirror> mirror_;
  std::unique_ptr<cuda::StepGraphs> graphs_;
  std::unique_ptr<cuda::HostReads> reads_;  // copy_to_host_later
  std::unique_ptr<cuda::HostSwap> swap_;    // swap_copy's copy stream, made on first use
  std::unique_ptr<OpProfile> profile_;
  unsigned* counters_ = nullptr;  // split-K matmul: one zeroed counter per column group
  size_t num_counters_ = 0;
  unsigned* attn_counters_ = nullptr;  // decode attention: one zeroed counter per (row, KV head)
  size_t num_attn_counters_ = 0;
  std::optional<PendingNorm> pending_norm_;
  const int fused_norm_rows_;  // CudaOptions::fused_norm_rows
  uint64_t fused_norms_ = 0;  // launches of the fused path (tests)
  uint64_t quant_streams_ = 0;  // quantized matmuls by the streaming kernel (tests)
  uint64_t quant_pair_streams_ = 0;  // of them, decoded as bf16 pairs (QuantMatrix::bf16_pairs)
  // The codes of uploaded matrices whose QuantMatrix::bf16_pairs the packer set (weights are freed
  // only with the backend, so an address never names two matrices).
  std::unordered_set<const void*> bf16_pair_codes_;
  // The gated MLP with the activation in the gate_up GEMM's epilogue (CudaOptions); the calls
  // that took it.
  const bool gated_mlp_fusion_;
  uint64_t fused_gated_mlps_ = 0;
  // add_rms_norm at prefill rows writing the next prefill matmul's input (CudaOptions); the norms
  // that did.
  const bool prefill_norm_fusion_;
  uint64_t fused_prefill_norms_ = 0;
  unsigned* norm_arrivals_ = nullptr;  // the fused norm's CTA count (matmul_stream.cuh), left zeroed
  size_t num_norm_arrivals_ = 0;
  std::vector<void*> owned_;
  // Quantized matrices dequantized for a prefill matmul, gated MLP or head_matmul (dequantize_dense).
  std::array<void*, 2> quant_dense_{};
  std::array<size_t, 2> quant_dense_bytes_{};
  void* moe_dense_ = nullptr;  // a MoE layer's quantized experts dequantized (moe_experts_quant)
  size_t moe_dense_bytes_ = 0;
  std::vector<Weight> moe_dense_weights_;  // [gate_up of each expert, down of each expert]
  void* staging_ = nullptr;  // row-major weight on its way to being packed
  size_t staging_bytes_ = 0;
  void* workspace_ = nullptr;  // A fragments of the matmuls with more than 16 rows
  size_t workspace_bytes_ = 0;
  void* copy_workspace_ = nullptr;  // copy_on_device_many: the sources, gathered
  size_t copy_workspace_bytes_ = 0;
  void* sample_workspace_ = nullptr;  // sample_tokens: each row's candidates
  size_t sample_workspace_bytes_ = 0;
  std::vector<cuda::CopyDesc> copy_descs_;
  void* probe_workspace_ = nullptr;  // attention_probe: the scores, then the layer's mass and peak
  size_t probe_workspace_bytes_ = 0;
  void* attn_workspace_ = nullptr;  // split-KV partial results of decode attention
  size_t attn_workspace_bytes_ = 0;
  void* rotated_q_ = nullptr;  // turbo KV: the queries rotated as the stored keys (attention())
  size_t rotated_q_bytes_ = 0;
  std::vector<cuda::QueryTile> query_tiles_;  // attention's plan, reused: no allocation per call
  std::vector<int32_t> decode_rows_;
  GraphPolicy graph_policy_;  // see the constructor
  int device_ = 0;            // the GPU this backend's memory and stream live on
  double host_read_flush_seconds_ = 0, host_read_wait_seconds_ = 0;  // copy_to_host: issuing, then waiting
};

}  // namespace tachyon::kernels::cuda
