// A backend executes the op set of kernels/ops.h on one device. Model code holds a
// `Backend&` and never knows which device it runs on.
//
//   std::unique_ptr<Backend> backend = make_backend("cpu");
//   float* x = static_cast<float*>(backend->allocate(rows * hidden * sizeof(float)));
//   backend->embedding(embed, ids, rows, x);
//
// All pointers passed to ops are device pointers of this backend (on the CPU: host
// memory). Host metadata (ids, positions, block tables) is passed as host pointers; a GPU
// backend copies it into static device buffers. Ops are issued in order on one stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/collective.h"
#include "kernels/ops.h"

namespace tachyon::kernels {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Memory (device). Allocations are for load time and grow-only workspaces.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  // Copies a row-major host weight into backend memory, in the layout this backend's
  // kernels read (the CPU repacks matrices into Panel64). The backend owns the copy until
  // it is destroyed; the host bytes may be released afterwards.
  virtual Weight upload_weight(const Weight& host) = 0;
  // upload_weight for a matrix that only matmul reads and only a drafter uses (uploaded while a
  // DraftWeights scope lives, see below). A backend may store it lossily: drafts are verified by
  // the target, so a drafter's precision changes how many drafts are accepted, never the output.
  // The CPU quantizes it to int8 per row (half the bytes of bf16: a CPU drafter's forward streams
  // its weights from memory, so its cost follows their bytes) and, where its rows are whole
  // 32-column blocks, runs it on int8 activations (integer dot products: a block drafter's
  // forward over 8 rows is compute-bound); the default is upload_weight.
  virtual Weight upload_draft_weight(const Weight& host) { return upload_weight(host); }
  // upload_weight for a matrix that only router_logits reads (a MoE router, [num_experts, hidden]):
  // kept so that op computes in f32 from the stored values (never bf16-rounded or int8). The
  // default is upload_weight, for backends whose matmul already does.
  virtual Weight upload_router_weight(const Weight& host) { return upload_weight(host); }
  // `--quantize-decode`: `prefill` (uploaded) carrying `decode` (uploaded: the same matrix in a
  // quantized format) as its decode copy (Weight::decode), kept by the backend for its lifetime.
  Weight with_decode_copy(const Weight& prefill, const Weight& decode);
  // Which rows of the ops that follow are decode rows: [rows] host flags (1: a decode or verify
  // row) that outlive those ops, or empty (every row a prefill row). A matmul-family op (matmul,
  // gated_matmul, gated_mlp, moe_experts, embedding) over a weight with a decode copy computes
  // prefill rows with the weight and decode rows with its copy, each run of rows of one kind as
  // its own call, so a row's bits depend on its kind and never on the rows beside it; such an op
  // must then cover exactly the flagged rows. DecodeRows sets them for one scope.
  void set_decode_rows(std::span<const uint8_t> flags) { decode_rows_ = flags; }
  std::span<const uint8_t> decode_rows() const { return decode_rows_; }
  // True while a DraftWeights scope lives: the weights being loaded belong to a drafter.
  bool loading_draft_weights() const { return loading_draft_weights_; }
  void set_loading_draft_weights(bool on) { loading_draft_weights_ = on; }
  // The int8-activation mode (kernels/quantize.h Int8ActivationMode, resolved to on or off):
  // integer-format weights uploaded while it is on run their matmuls on int8 activations, on a
  // backend that supports_int8_activations(); others keep their kernels. A drafter's weights
  // (loading_draft_weights) keep theirs.
  void set_int8_activations(bool on) { int8_activations_ = on; }
  bool int8_activations() const { return int8_activations_ && supports_int8_activations(); }
  virtual bool supports_int8_activations() const { return false; }
  // How many weights were uploaded in the mode (their matmuls run on int8 activations).
  virtual int64_t int8_activation_weights() const { return 0; }
  // F32 matrices whose every value is a bf16 value, stored as bf16 (the same values, half the
  // bytes), and the bytes that saved.
  struct NarrowedWeights {
    int64_t tensors = 0, bytes_saved = 0;
  };
  virtual NarrowedWeights f32_weights_stored_as_bf16() const { return {}; }
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void copy_to_device(void* device_dst, const void* host_src, size_t bytes) = 0;
  // A read the caller collects later, so that the host can prepare the next step while the
  // device still runs this one (the engine's overlapped decode steps): copies `bytes` of device
  // memory behind every op issued so far, sends those ops to the device and returns without
  // waiting. wait_host_read(read) waits for that copy only (not for ops issued after it) and
  // leaves the bytes in `host_dst`, which must stay valid until then. Reads are collected in
  // the order they were started; one may be outstanding while the next step is issued. The
  // default reads at once (a backend whose ops complete before they return).
  struct HostRead {
    uint64_t id = 0;  // 0: the bytes are in place already (nothing to wait for)
  };
  virtual HostRead copy_to_host_later(void* host_dst, const void* device_src, size_t bytes) {
    copy_to_host(host_dst, device_src, bytes);
    return {};
  }
  virtual void wait_host_read(HostRead read) { (void)read; }
  // True when ops return before the device has run them (a GPU): then the host can prepare a
  // step while the device runs the one before (copy_to_host_later). False: ops complete before
  // they return, and issuing a step early only moves work around.
  virtual bool runs_asynchronously() const { return false; }
  // Backend memory to backend memory, ordered after the ops issued before it (non-overlapping
  // ranges). The default bounces through the host.
  virtual void copy_on_device(void* dst, const void* src, size_t bytes);
  struct DeviceCopy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  // Many copies in one op (a draft tree's accepted branch: every layer's K and V rows). Every
  // source is read before any destination is written; callers guarantee that no source is the
  // destination of an earlier copy, so this equals the copies in order, which the default does.
  virtual void copy_on_device_many(std::span<const DeviceCopy> copies) {
    for (const DeviceCopy& c : copies) copy_on_device(c.dst, c.src, c.bytes);
  }
  virtual void synchronize() {}
  // ---- Host memory for KV blocks swapped out of the device (kv/kv_cache.h, the host tier).
  // Host memory the device copies to and from at full speed (a GPU: pinned). The default and the
  // CPU: plain memory, 64-byte aligned.
  virtual void* allocate_host(size_t bytes);
  virtual void deallocate_host(void* ptr);
  // Copies between this backend's memory and memory from allocate_host: `to_host` true, each
  // copy's src is device memory and dst host memory; false, the other way. They happen after
  // every op issued before and before every op issued after (a GPU runs them on a copy stream,
  // ordered against its compute stream by events), and the caller does not wait: the host memory
  // is only read or written through later swap_copy calls. The default copies now; the CUDA
  // backend queues the swaps that come between two ops and issues them as one launch per run of
  // one direction (cuda/host_swap.h).
  virtual void swap_copy(std::span<const DeviceCopy> copies, bool to_host);
  // The device's own memory (a GPU's: free and total bytes now), for sizing the KV pool from
  // what is left after weights and workspaces. nullopt: the backend runs in host memory.
  struct DeviceMemory {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
  };
  virtual std::optional<DeviceMemory> device_memory() { return std::nullopt; }
  // Count of one-time work done so far (the CUDA backend: graphs captured). Steps during
  // which it grows are warm-up, not steady-state cost: the engine's gates do not time them.
  virtual uint64_t warmup_events() const { return 0; }
  // A hint about the ops until the next call: true while the caller runs a forward whose shape
  // repeats from step to step (the engine's plain and draft-chain decode steps, a model
  // drafter's chain), so the CUDA backend records it as a replayable graph; false for
  // prefill chunks and draft trees, whose shapes vary (a capture costs more than the replays
  // it would get). RepeatingStepHint sets it for one scope.
  virtual void set_repeating_step(bool repeating) { (void)repeating; }
  // Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice). A thread
  // that issues ops on a backend it did not create (a tensor-parallel rank's worker) calls it first.
  virtual void bind_thread() {}

  // out[r, :] = table[ids[r], :] * scale
  virtual void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) = 0;
  // out = x / sqrt(mean(x²) + eps) * (weight_offset + w), per row of `dim` (x may equal out)
  virtual void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                        float* out) = 0;
  // out[r, n] = Σ_k x[r, k] · w[n, k] (+ bias[n])
  virtual void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) = 0;
  // In place on x [rows, heads, head_dim]: rotate dims [table.offset, table.offset +
  // table.rotary_dim) of each head.
  virtual void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
                    const int32_t* positions) = 0;
  // out[r, i] = act(gate_up[r, i]) * gate_up[r, dim + i]   (gate and up concatenated per row)
  virtual void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) = 0;
  // out = gated_activation(gate_up) · Wᵀ (gate_up [rows, 2·dim], w [n, dim]): a gated MLP's down
  // projection. `act_out` [rows, dim] is scratch: the default runs gated_activation into it, then
  // matmul; a backend may apply the activation while it stages the matmul's input instead (CUDA:
  // one launch fewer, the same bits).
  virtual void gated_matmul(const float* gate_up, int64_t rows, int64_t dim, Activation act, const Weight& w,
                            float* act_out, float* out) {
    gated_activation(gate_up, rows, dim, act, act_out);
    matmul(act_out, rows, w, nullptr, out);
  }
  // A gated MLP: out = gated_activation(x · W_gate_upᵀ) · W_downᵀ (x [rows, hidden]; gate_up_w
  // [2 · dim, hidden], the gate rows then the up rows; down_w [n, dim]). `gate_up` [rows, 2 · dim] and
  // `act_out` [rows, dim] are scratch: the default runs matmul into gate_up, then gated_matmul; a
  // backend may keep gate_up out of memory instead (CUDA at prefill rows: the gate_up GEMM's tiles
  // write the activated rows as the down GEMM's input; the same bits).
  virtual void gated_mlp(const float* x, int64_t rows, const Weight& gate_up_w, const Weight& down_w, Activation act,
                         float* gate_up, float* act_out, float* out) {
    matmul(x, rows, gate_up_w, nullptr, gate_up);
    gated_matmul(gate_up, rows, down_w.cols, act, down_w, act_out, out);
  }
  // dst[i, :] = src[rows[i], :] for i < n (row width `width`)
  virtual void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) = 0;
  // x += y (n elements)
  virtual void add(float* x, const float* y, int64_t n) = 0;
  // x += y, then out = rms_norm(x) (x [rows, dim]; out may not alias x): the residual add and
  // the next sub-block's norm in one pass. Same result as add then rms_norm (the default).
  //
  // Deferred norm fusion. A backend may return before issuing this op and compute it as part of
  // the next call on the backend (the CUDA backend: inside a matmul or gated MLP that reads `out`,
  // kernels/cuda/cuda_fusion.cpp; any other call first issues it alone). What a caller may observe:
  //  - through the backend, nothing: every later op, copy (copy_to_host, copy_on_device, ...),
  //    synchronize and deallocate sees x and out exactly as if this op had run alone, same bits;
  //  - until that next call, x and out in device memory may still hold their old values, so they
  //    must not be read, nor x, y or w be changed, by anything outside this backend (another stream,
  //    host-mapped memory, another backend) in between;
  //  - per-op profiles and counters may show the pair as one op (cuda_profile_report:
  //    "add_rms_norm+matmul"); profiling turns the fusion off.
  // The CPU and reference backends run it at once. CudaOptions (kernels/cuda/cuda_options.h) turns
  // the fusion off: TACHYON_CUDA_FUSION=0.
  virtual void add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                            float weight_offset, float* out) {
    add(x, y, rows * dim);
    rms_norm(x, w, rows, dim, eps, weight_offset, out);
  }
  // Whether write_kv and the attention ops read and write `format` (kernels/kv_format.h).
  virtual bool supports_kv_format(KvFormat format) const { return format == KvFormat::F32; }
  // Writes k, v [rows, num_kv_heads, head_dim] into each row's slot of the paged cache, encoded
  // in kv.format (kernels/kv_quant.h).
  virtual void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) = 0;
  // The attention layer's steps between its fused q/k/v projection and the attention itself.
  // qkv [rows, (num_heads + 2·KV)·head_dim] holds per row the q heads, then the k heads, then the
  // v heads (KV = kv.num_kv_heads). Per-head RMSNorm of q and k (p.q_norm/k_norm: [head_dim]
  // weights, or null for none), RoPE of both at p.positions; q [rows, num_heads, head_dim]
  // receives q, and k, v go to each row's cache slot (write_kv). k and v [rows, KV, head_dim]
  // are scratch. The default splits qkv (copy_strided) and runs those ops in that order; a
  // backend may fuse them (CUDA: one kernel instead of eight), giving the same bits.
  virtual void qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                                      const AttentionMeta& meta, float* q, float* k, float* v) {
    const int64_t d = kv.head_dim, q_dim = p.num_heads * d, kv_dim = kv.num_kv_heads * d, stride = q_dim + 2 * kv_dim;
    copy_strided(qkv, stride, rows, q_dim, q, q_dim);
    copy_strided(qkv + q_dim, stride, rows, kv_dim, k, kv_dim);
    copy_strided(qkv + q_dim + kv_dim, stride, rows, kv_dim, v, kv_dim);
    if (p.q_norm) rms_norm(q, *p.q_norm, rows * p.num_heads, d, p.eps, p.weight_offset, q);
    if (p.k_norm) rms_norm(k, *p.k_norm, rows * kv.num_kv_heads, d, p.eps, p.weight_offset, k);
    this->rope(q, rows, p.num_heads, d, *p.rope, p.positions);
    this->rope(k, rows, kv.num_kv_heads, d, *p.rope, p.positions);
    write_kv(k, v, rows, kv, meta);
  }
  // qkv_norm_rope_write_kv, then attention into out [rows, num_heads, head_dim] (q, k, v are
  // scratch). A backend may run the two as one (CUDA, decode steps: the attention normalises
  // and rotates its own q heads and the row's new key, one launch boundary less), same bits.
  virtual void attention_from_qkv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                                  const AttentionMeta& meta, const AttentionParams& params, float* q, float* k,
                                  float* v, float* out) {
    qkv_norm_rope_write_kv(qkv, rows, p, kv, meta, q, k, v);
    attention(q, rows, kv, meta, params, out);
  }
  // out [rows, num_heads, head_dim] = softmax(q·Kᵀ·scale + mask) · V over each row's sequence,
  // keys at positions ≤ the row's position (and inside the sliding window).
  virtual void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                         const AttentionParams& params, float* out) = 0;

  // PFlash's attention probe (SpecPrefill): q [rows, H, D] and k [rows, KV, D] (backend memory,
  // RoPE applied) of one sequence from position 0. For each of the last query_rows rows and each
  // head, the softmax of q·kᵀ·scale over the keys that row sees (causal, sliding window,
  // softcap; no sinks): mass[j] += the probabilities key j gets, summed over heads and query
  // rows, and peak[j] = max(peak[j], the largest of them, each scaled by its query row's weight
  // when p.query_weights is set) (host arrays of `rows`; peak may be null). The default copies the query rows of q and all of k to the host and sums in a fixed
  // order (kernels/attention_probe.cpp), whatever the thread count.
  virtual void attention_probe(const float* q, const float* k, int64_t rows, const AttentionProbeParams& p,
                               float* mass, float* peak);

  // ids[r] = argmax over i < n of x[r, i] (the lowest i among equal maxima) for r < rows;
  // ids is a device int32 array. Greedy sampling on the device: only the ids cross the bus.
  // The default copies the rows to the host and back (the CPU and reference backends use it).
  virtual void argmax(const float* x, int64_t rows, int64_t n, int32_t* ids);
  // ids[r] = the token row r of x draws under params[r] (host memory; the arithmetic of
  // kernels/token_sampling.h: temperature, top-k, top-p, min-p, then the row's uniform draw) for
  // r < rows; ids is a device int32 array. Sampling where the logits are: only the ids cross the
  // bus. A row without a finite logit gets -1 (the caller reports it). The default copies the
  // rows to the host, draws there and copies the ids back.
  virtual void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, int32_t* ids);
  // out[r] = TopTwo of x[r, :n) for r < rows; out is device memory. A drafter's levels stay on
  // the device until its chain is done: one wait per chain instead of one per level. The
  // default copies the rows to the host and back.
  virtual void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out);
  // embedding() with `ids` in device memory (a previous forward's top_two: a drafter feeds its
  // chain without a round trip; the tokens of a step whose host read is still pending). An id
  // outside [0, table.rows) reads row 0: a draw that found no finite logit marks its row -1,
  // and the step that read it is dropped when its own read reports that. The default copies
  // the ids to the host first.
  virtual void embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out);

  // Tensor parallelism (model/shard_plan.h): this backend is rank `rank` of a group whose ranks
  // each hold a shard of one model. Until it joins one, a backend is a group of one.
  void join_group(std::shared_ptr<HostCollective> group, int rank);
  int group_rank() const { return group_rank_; }
  int group_size() const { return group_ ? group_->world() : 1; }
  // x [n] (device memory) = the sum of every rank's x, the same bits on every rank (rank order);
  // a row-parallel projection's partial sums become the full output. Called by every rank of the
  // group in the same order. A group of one: nothing to do. The default goes through the host
  // (HostCollective); a GPU backend may use its own collectives.
  virtual void all_reduce_sum(float* x, int64_t n);

  // ---- Ops added for MoE / MLA / linear-attention architectures. The defaults throw, so a
  // backend that lacks one still compiles and fails loudly at run time.

  // logits [rows, num_experts] = x [rows, hidden] · wᵀ (+ bias [num_experts]), w from
  // upload_router_weight. The CPU backend computes it in f32 whatever its matmul mode (the
  // int8-activation mode would otherwise quantize the router). The default, matmul, is what the
  // CUDA backend keeps: an f32 router there (measured on an H100) moved deepseek_v3's prefill
  // logits onto transformers' but flipped a decode-step near-tie that its bf16 matmul and
  // "cpu-bf16" agree on, and it did not bring the gpt-oss GGUF fixture within llama.cpp's bound.
  virtual void router_logits(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* logits) {
    matmul(x, rows, w, bias, logits);
  }
  // expert_ids, weights [rows, top_k] = routing of logits [rows, num_experts] (see MoeRouting).
  virtual void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& params, int32_t* expert_ids,
                         float* weights);
  // out [rows, hidden] = Σ_k weights[r, k] · Expert_{expert_ids[r, k]}(x[r]). Rows routed to
  // one expert are processed together (a grouped matmul); each row's result is independent
  // of the others in the call. Experts are summed in ascending expert id.
  virtual void moe_experts(const float* x, int64_t rows, const int32_t* expert_ids, const float* weights,
                           int64_t top_k, const MoeExperts& experts, float* out);
  // Per-head matmul: out[r, h, 0:w.rows/heads] = W_h · x[r, h, 0:w.cols], W_h the rows
  // [h·n, (h+1)·n) of w. Element (r, h, i) of x is at x[r·x_row_stride + h·x_head_stride + i];
  // out likewise with its strides. (MLA's absorbed up-projections.)
  virtual void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t x_row_stride, int64_t x_head_stride,
                           const Weight& w, float* out, int64_t out_row_stride, int64_t out_head_stride);
  // dst[r, 0:width] = src[r, 0:width] with row strides (splits and concatenations of columns).
  virtual void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                            int64_t dst_stride);
  // x [rows, dim] *= fn(gate): x[r, i] *= fn(gate[r·gate_stride + i / group]), `group`
  // consecutive elements sharing one gate (group = dim: one scalar gate per row).
  virtual void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                             int64_t group, GateFn fn);
  // Depthwise causal conv1d + SiLU over a ragged batch, continuing each sequence from its
  // conv state (the previous kernel−1 inputs, [kernel − 1, channels] at the start of its slot):
  //   out[t, c] = silu(Σ_i w[c, i] · x[t − kernel + 1 + i, c]),   w [channels, kernel]
  virtual void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w,
                                  const RecurrentMeta& meta, float* state, int64_t state_stride, float* out);
  // Gated delta rule (see DeltaRuleParams) over a ragged batch. q, k, v are read from qkv
  // [rows, qkv_stride] at columns [0, Hk·dk), [Hk·dk, 2·Hk·dk), [2·Hk·dk, 2·Hk·dk + Hv·dv);
  // b, a from ba [rows, 2·Hv] (b first). The recurrent state [Hv, dk, dv] of a sequence is at
  // state + slot·state_stride. out [rows, Hv, dv].
  virtual void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                                const DeltaRuleParams& params, const RecurrentMeta& meta, float* state,
                                int64_t state_stride, float* out);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
  // For a matmul-family op over `rows` rows of `w` (set_decode_rows): when w has a decode copy
  // and some of the rows are decode rows, calls run(first_row, count, decode) for each run of
  // consecutive rows of one kind (decode: the run reads w.of_kind(true)) and returns true;
  // otherwise returns false, calling nothing: every row reads `w` and the op runs as usual.
  bool for_each_row_kind(int64_t rows, const Weight& w, const std::function<void(int64_t, int64_t, bool)>& run) const;
  // `experts` with each expert's weights of one kind (Weight::of_kind), in `storage`.
  static MoeExperts experts_of_kind(const MoeExperts& experts, bool decode, std::vector<Weight>& storage);

 private:
  std::deque<Weight> decode_copies_;      // with_decode_copy's, at stable addresses
  std::span<const uint8_t> decode_rows_;  // set_decode_rows
  bool loading_draft_weights_ = false;
  bool int8_activations_ = false;
  std::shared_ptr<HostCollective> group_;
  int group_rank_ = 0;
  std::vector<float> group_scratch_;  // all_reduce_sum's host copy, reused from step to step
};

// The TopTwo of one host row of n values (Backend::top_two's definition; softmax sum in double).
TopTwo top_two_of_row(const float* row, int64_t n);
// Its ids only (best, then runner-up; the first index among equal values), probabilities zero.
TopTwo top_two_ids(const float* row, int64_t n);

// Backend::set_repeating_step for one scope: set on entry, cleared on every exit.
class RepeatingStepHint {
 public:
  RepeatingStepHint(Backend& backend, bool repeating) : backend_(backend) { backend_.set_repeating_step(repeating); }
  ~RepeatingStepHint() { backend_.set_repeating_step(false); }
  RepeatingStepHint(const RepeatingStepHint&) = delete;
  RepeatingStepHint& operator=(const RepeatingStepHint&) = delete;

 private:
  Backend& backend_;
};

// Backend::set_decode_rows for one scope; the previous flags come back on exit:
//   kernels::DecodeRows kinds(backend, batch.decode_rows);  // the forward's rows
class DecodeRows {
 public:
  DecodeRows(Backend& backend, std::span<const uint8_t> flags) : backend_(backend), before_(backend.decode_rows()) {
    backend_.set_decode_rows(flags);
  }
  ~DecodeRows() { backend_.set_decode_rows(before_); }
  DecodeRows(const DecodeRows&) = delete;
  DecodeRows& operator=(const DecodeRows&) = delete;

 private:
  Backend& backend_;
  std::span<const uint8_t> before_;
};

// Marks the weights loaded in one scope as a drafter's (Backend::upload_draft_weight), unless
// `on` is false (weights as stored); the previous mode comes back on exit:
//   { kernels::DraftWeights scope(backend); drafter = model::load_model(dir, backend); }
class DraftWeights {
 public:
  explicit DraftWeights(Backend& backend, bool on = true) : backend_(backend), before_(backend.loading_draft_weights()) {
    backend_.set_loading_draft_weights(on);
  }
  ~DraftWeights() { backend_.set_loading_draft_weights(before_); }
  DraftWeights(const DraftWeights&) = delete;
  DraftWeights& operator=(const DraftWeights&) = delete;

 private:
  Backend& backend_;
  bool before_;
};

// "cpu" (AVX2/FMA/F16C when the CPU has them, else portable), "cuda" (builds with
// TACHYON_CUDA; device 0; "cuda:N" device N), "reference" (the scalar oracle every other backend is tested
// against) or "cpu-bf16" (the CPU backend rounding matmul operands to bf16 where the CUDA
// backend does: a CPU oracle for the GPU's numerics, kernels/cpu/cpu_bf16_backend.h).
std::unique_ptr<Backend> make_backend(const std::string& name);

// "cuda" when this build has the CUDA backend and a GPU is visible, else "cpu".
std::string default_device();

}  // namespace tachyon::kernels
