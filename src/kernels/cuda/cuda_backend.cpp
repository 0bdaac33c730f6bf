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

#include "base/error.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/grouped_matmul.cuh"
#include "kernels/cuda/host_reads.h"
#include "kernels/cuda/linear_attention.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/matmul_stream.cuh"
#include "kernels/cuda/moe.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/step_graph.h"

namespace tachyon::kernels {
namespace cuda {

void fail_cuda(const char* file, int line, const char* expr, cudaError_t err) {
  throw Error("{}:{}: {} failed: {}", file, line, expr, cudaGetErrorString(err));
}
void fail_unsupported(const char* what, int64_t value) {
  throw Error("the CUDA backend does not support {} = {}", what, value);
}
void fail_unsupported_setting(const char* what, const char* value) {
  throw Error("the CUDA backend does not support {} = '{}'", what, value);
}

bool env_turned_off(const char* name) {
  const char* value = std::getenv(name);
  return value && std::string(value) == "0";
}

int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  TACHYON_CUDA_CHECK(cudaGetDevice(&device));
  TACHYON_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

namespace {

// TACHYON_LAB_SKIP=op,op,...: a measurement switch, never for serving (the outputs are wrong):
// the named ops launch nothing, so a benchmark's step time shows what each small kernel costs on
// the critical path of the real, programmatically launched step (events would serialise it).
bool lab_skips(std::string_view op) {
  static const std::string list = [] {
    const char* value = std::getenv("TACHYON_LAB_SKIP");
    return value ? "," + std::string(value) + "," : std::string();
  }();
  return !list.empty() && list.find("," + std::string(op) + ",") != std::string::npos;
}

// Decode attention launches at least this many 64-key chunks per (row, KV head): see attention().
constexpr int kMinDecodeChunks = 8;

// Device copies of host arrays, found again by content: a step's layers pass the same
// positions and block tables, which then cross the bus once per step.
class DeviceMirror {
 public:
  explicit DeviceMirror(cudaStream_t stream) : stream_(stream) {}
  ~DeviceMirror() {
    for (auto& s : slots_)
      if (s.device) cudaFree(s.device);
  }
  const void* get(const void* host, size_t bytes) {
    if (bytes == 0) return nullptr;
    ++clock_;
    for (auto& s : slots_)
      if (s.host.size() == bytes && std::memcmp(s.host.data(), host, bytes) == 0) {
        s.last_use = clock_;
        return s.device;
      }
    // Least recently used: never one handed out for the op being issued now.
    Slot& s = *std::min_element(slots_.begin(), slots_.end(),
                                [](const Slot& a, const Slot& b) { return a.last_use < b.last_use; });
    s.last_use = clock_;
    if (s.capacity < bytes) {
      if (s.device) {
        TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
        TACHYON_CUDA_CHECK(cudaFree(s.device));
      }
      s.capacity = std::max<size_t>(bytes, 2 * s.capacity);
      TACHYON_CUDA_CHECK(cudaMalloc(&s.device, s.capacity));
    }
    s.host.assign(static_cast<const std::byte*>(host), static_cast<const std::byte*>(host) + bytes);
    // Stream-ordered after every kernel that read this slot's previous content.
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(s.device, s.host.data(), bytes, cudaMemcpyHostToDevice, stream_));
    return s.device;
  }
  template <typename T>
  const T* get(const T* host, size_t n) {
    return static_cast<const T*>(get(static_cast<const void*>(host), n * sizeof(T)));
  }

 private:
  struct Slot {
    std::vector<std::byte> host;
    void* device = nullptr;
    size_t capacity = 0;
    uint64_t last_use = 0;
  };
  cudaStream_t stream_;
  std::array<Slot, 16> slots_{};
  uint64_t clock_ = 0;
};

// Per-op GPU time: a cudaEvent pair around every op while enabled (the events serialise the
// stream, so the programmatic overlap between kernels is lost: a diagnostic, not a benchmark).
class OpProfile {
 public:
  ~OpProfile() {
    for (auto& e : events_) cudaEventDestroy(e.first), cudaEventDestroy(e.second);
  }
  bool enabled = false;
  void begin(cudaStream_t stream, std::string label) {
    if (used_ == events_.size()) {
      std::pair<cudaEvent_t, cudaEvent_t> e;
      TACHYON_CUDA_CHECK(cudaEventCreate(&e.first));
      TACHYON_CUDA_CHECK(cudaEventCreate(&e.second));
      events_.push_back(e);
    }
    labels_.push_back(std::move(label));
    TACHYON_CUDA_CHECK(cudaEventRecord(events_[used_].first, stream));
  }
  void end(cudaStream_t stream) { TACHYON_CUDA_CHECK(cudaEventRecord(events_[used_++].second, stream)); }
  std::string report(cudaStream_t stream) {
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::map<std::string, std::pair<int, double>> by_label;
    double total = 0;
    for (size_t i = 0; i < used_; ++i) {
      float ms = 0;
      TACHYON_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i].first, events_[i].second));
      auto& e = by_label[labels_[i]];
      e.first += 1, e.second += ms * 1e3;
      total += ms * 1e3;
    }
    std::vector<std::pair<std::string, std::pair<int, double>>> rows(by_label.begin(), by_label.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    std::string out = "| op | calls | total us | us/call | share |\n|---|---|---|---|---|\n";
    for (const auto& [label, v] : rows)
      out += fmt::format("| {} | {} | {:.1f} | {:.2f} | {:.1f}% |\n", label, v.first, v.second, v.second / v.first,
                         100 * v.second / total);
    out += fmt::format("| all ops | {} | {:.1f} | | |\n", used_, total);
    used_ = 0;
    labels_.clear();
    return out;
  }

 private:
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<std::string> labels_;
  size_t used_ = 0;
};

}  // namespace

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    TACHYON_CHECK(cuda_device_count() > 0, "no CUDA device is visible");
    TACHYON_CUDA_CHECK(cudaSetDevice(0));
    TACHYON_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    mirror_ = std::make_unique<DeviceMirror>(stream_);
    graphs_ = std::make_unique<cuda::StepGraphs>(stream_);
    reads_ = std::make_unique<cuda::HostReads>(stream_);
    // By default graphs record the forwards their callers mark as repeating (the engine's plain
    // and draft-chain decode steps, the model drafters' chains: on the launch-bound demo model
    // +16-26% plain, +4-44% prompt lookup) and nothing else: prefill chunks change shape, and
    // graphing draft-tree steps measured no faster (bench/NOTES-cuda.md). TACHYON_CUDA_GRAPHS=1
    // records every step, =0 none.
    if (const char* env = std::getenv("TACHYON_CUDA_GRAPHS"))
      graph_policy_ = std::string(env) == "1" ? GraphPolicy::Always : GraphPolicy::Never;
    graphs_->enabled = graph_policy_ == GraphPolicy::Always;
    moe_ = std::make_unique<cuda::MoeRunner>(stream_);
    profile_ = std::make_unique<OpProfile>();
    cudaDeviceProp prop{};
    TACHYON_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device_name_ = prop.name;
    // Prefill matmuls on wgmma (sm_90a: compute capability 9.0 exactly) need each matrix also in
    // core-matrix order (cuda::pack_core_weight); TACHYON_WGMMA=0 keeps the mma.sync kernel.
    wgmma_ = prop.major == 9 && prop.minor == 0 && !cuda::env_turned_off("TACHYON_WGMMA");
  }
  ~CudaBackend() override {
    try {
      flush();
    } catch (...) {
    }
    cudaStreamSynchronize(stream_);
    graphs_.reset();
    reads_.reset();
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
    if (copy_workspace_) cudaFree(copy_workspace_);
    if (sample_workspace_) cudaFree(sample_workspace_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda/" + device_name_; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    TACHYON_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    return p;
  }
  void deallocate(void* ptr) override {
    if (!ptr) return;
    flush();  // recorded ops may still use it
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
    TACHYON_CUDA_CHECK(cudaFree(ptr));
  }

  // Matrices become bf16 MMA fragments (WeightLayout::MmaFragments); vectors become f32.
  Weight upload_weight(const Weight& host) override {
    flush();
    TACHYON_CHECK(host.layout == WeightLayout::RowMajor, "weights arrive row-major");
    TACHYON_CHECK(host.dtype == DType::F32 || host.dtype == DType::BF16 || host.dtype == DType::F16,
                  "the CUDA backend takes f32/bf16/f16 weights, not {}", dtype_name(host.dtype));
    Weight w = host;
    if (host.rows <= 1) {
      std::vector<float> f(static_cast<size_t>(host.cols));
      for (int64_t i = 0; i < host.cols; ++i) f[i] = load_host(host, i);
      void* d = allocate(f.size() * sizeof(float));
      TACHYON_CUDA_CHECK(cudaMemcpyAsync(d, f.data(), f.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
      TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
      owned_.push_back(d);
      w.data = d;
      w.dtype = DType::F32;
      return w;
    }
    TACHYON_CHECK(host.cols % 2 == 0, "the CUDA matmul needs an even number of input features, got {}", host.cols);
    const size_t src_bytes = static_cast<size_t>(host.rows * host.cols) * dtype_size(host.dtype);
    if (staging_bytes_ < src_bytes) {
      if (staging_) TACHYON_CUDA_CHECK(cudaFree(staging_));
      staging_ = allocate(src_bytes);
      staging_bytes_ = src_bytes;
    }
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(staging_, host.data, src_bytes, cudaMemcpyHostToDevice, stream_));
    void* packed = allocate(cuda::packed_weight_bytes(host.rows, host.cols));
    cuda::pack_weight(staging_, host.dtype, host.rows, host.cols, packed, stream_);
    // The wgmma prefill kernel's copy, while the device keeps an eighth of its memory free
    // beyond it (else this matrix's prefill runs on the mma.sync kernel: the same bits).
    if (wgmma_) {
      const size_t bytes = cuda::core_weight_bytes(host.rows, host.cols);
      size_t free = 0, total = 0;
      TACHYON_CUDA_CHECK(cudaMemGetInfo(&free, &total));
      if (free > bytes + total / 8) {
        void* core = allocate(bytes);
        cuda::pack_core_weight(staging_, host.dtype, host.rows, host.cols, core, stream_);
        owned_.push_back(core);
        core_copies_[packed] = core;
      }
    }
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
    owned_.push_back(packed);
    w.data = packed;
    w.dtype = DType::BF16;
    w.layout = WeightLayout::MmaFragments;
    return w;
  }

  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    flush();
    const auto t1 = Clock::now();
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
    host_read_flush_seconds_ += std::chrono::duration<double>(t1 - t0).count();
    host_read_wait_seconds_ += std::chrono::duration<double>(Clock::now() - t1).count();
    graphs_->reset();  // between ops, after a synchronisation: the staging area starts over
  }
  HostRead copy_to_host_later(void* dst, const void* src, size_t bytes) override {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    settle();
    // Part of the step's graph while it is recorded: a replayed step copies its result too.
    copy_async(reads_->begin(dst, bytes), src, bytes, cudaMemcpyDeviceToHost);
    flush();
    const HostRead read{reads_->started()};
    // The next step stages its host arrays in the other bank while this one may still read its own.
    graphs_->switch_bank();
    host_read_flush_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    return read;
  }
  bool runs_asynchronously() const override { return true; }
  void wait_host_read(HostRead read) override {
    const auto t0 = std::chrono::steady_clock::now();
    reads_->wait(read.id);
    host_read_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    settle();
    if (graphs_->enabled && !profile_->enabled) {
      // Recorded like a kernel: the bytes are staged with the step's other host arrays and
      // copied on the device in order, so the step does not wait here and stays replayable
      // (the MTP head's hidden-state input).
      copy_on_device(dst, graphs_->stage(src, bytes), bytes);
      return;
    }
    flush();
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_on_device_many(std::span<const DeviceCopy> copies) override {
    size_t total = 0;
    bool aligned = true;
    for (const DeviceCopy& c : copies) {
      total += c.bytes;
      aligned &= (reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) | c.bytes) % 16 == 0;
    }
    if (!aligned || copies.size() > 65535) return Backend::copy_on_device_many(copies);
    if (copies.empty()) return;
    Scope scope(this, "copy_on_device_many");
    grow_workspace(copy_workspace_, copy_workspace_bytes_, total);
    copy_descs_.clear();
    int64_t offset = 0;
    for (const DeviceCopy& c : copies) {
      const int64_t count = static_cast<int64_t>(c.bytes / 16);
      copy_descs_.push_back({static_cast<uint4*>(c.dst), static_cast<const uint4*>(c.src), offset, count});
      offset += count;
    }
    cuda::copy_many(staged(copy_descs_.data(), copy_descs_.size()), static_cast<int64_t>(copy_descs_.size()),
                    static_cast<uint4*>(copy_workspace_), stream_);
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) override {
    settle();
    copy_async(dst, src, bytes, cudaMemcpyDeviceToDevice);
  }
  // A stream-ordered copy: recorded with the step's ops (and replayed with its graph) while a
  // step is recorded, else issued now.
  void copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (graphs_->enabled && !profile_->enabled) {
      thread_local std::string key;  // reused, as in `launch`: no allocation per recorded copy
      key.clear();
      cuda::append_key(key, dst, src, bytes, kind);
      graphs_->record(key, [=](cudaStream_t s) { TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s)); });
      return;
    }
    TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  }
  // A step seen for the first time is issued op by op (host-bound: up to twice a replay's time
  // for a drafter chain), the second time captured: both are one-time costs of that shape.
  // Timing them made auto-k see the rarer draft counts as expensive and choose them ever
  // less (measured on the H200: auto-k 1.30x against 1.40x with k fixed at 4).
  uint64_t warmup_events() const override {
    const auto& c = graphs_->counters();
    return c.captures + c.capture_failures + c.first_sightings;
  }
  void set_repeating_step(bool repeating) override {
    if (graph_policy_ != GraphPolicy::RepeatingSteps) return;
    flush();  // what was recorded under the old setting goes first
    graphs_->enabled = repeating;
  }
  enum class GraphPolicy { RepeatingSteps, Always, Never };
  double host_read_flush_seconds() const { return host_read_flush_seconds_; }
  double host_read_wait_seconds() const { return host_read_wait_seconds_; }
  uint64_t fused_norm_launches() const { return fused_norms_; }
  uint64_t fused_gated_mlps() const { return fused_gated_mlps_; }
  uint64_t fused_prefill_norms() const { return fused_prefill_norms_; }
  bool stream_tile_counters_are_zero() {
    synchronize();
    return cuda::stream_tile_counters_are_zero(stream_);
  }
  void set_graph_policy(GraphPolicy policy) {
    synchronize();
    graph_policy_ = policy;
    graphs_->enabled = policy == GraphPolicy::Always;
  }
  void synchronize() override {
    flush();
    TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
    graphs_->reset();
  }

  void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override {
    Scope scope(this, "embedding");
    embed(table, staged(ids, rows), rows, scale, out);
  }
  void embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) override {
    Scope scope(this, "embedding");
    embed(table, ids, rows, scale, out);
  }
  // ids: device memory.
  void embed(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
    TACHYON_CHECK(table.layout == WeightLayout::MmaFragments || table.dtype == DType::F32, "embedding table layout");
    cuda::embedding(table.data, table.layout == WeightLayout::MmaFragments, table.rows, table.cols, ids, rows, scale, out,
                    stream_);
  }
  void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                float* out) override {
    Scope scope(this, "rms_norm");
    TACHYON_CHECK(w.dtype == DType::F32 && w.cols == dim, "rms_norm weight must be an uploaded [dim] vector");
    cuda::rms_norm(x, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out, stream_);
  }
  void matmul(const float* x, int64_t rows, const Weight& w_in, const Weight* bias, float* out) override {
    const Weight& w = w_in.rows == 1 && w_in.layout == WeightLayout::RowMajor ? packed_row(w_in) : w_in;
    const float* b = bias && !bias->empty() ? static_cast<const float*>(bias->data) : nullptr;
    if (pending_norm_ && matmul_after_pending_norm(x, rows, w, b, out)) return;
    Scope scope(this, "matmul", w.rows, w.cols, rows);
    TACHYON_CHECK(w.layout == WeightLayout::MmaFragments, "matmul weights must come from upload_weight");
    prepare_matmul(rows, w);
    cuda::matmul(x, rows, w.data, core_copy(rows, w), w.rows, w.cols, b, out, workspace_, counters_, stream_);
  }
  void gated_matmul(const float* gate_up, int64_t rows, int64_t dim, Activation act, const Weight& w, float* act_out,
                    float* out) override {
    if (w.layout != WeightLayout::MmaFragments || w.cols != dim ||
        !cuda::matmul_gated_fuses(rows, w.rows, w.cols, core_copy(rows, w) != nullptr))
      return Backend::gated_matmul(gate_up, rows, dim, act, w, act_out, out);
    Scope scope(this, "gated_matmul", w.rows, w.cols, rows);
    prepare_matmul(rows, w);
    cuda::matmul_gated(gate_up, act == Activation::GeluTanh, rows, core_copy(rows, w), w.rows, w.cols, nullptr, out,
                       workspace_, stream_);
  }
  void gated_mlp(const float* x, int64_t rows, const Weight& gate_up_w, const Weight& down_w, Activation act,
                 float* gate_up, float* act_out, float* out) override {
    const int64_t inter = down_w.cols;
    const void* gate_up_core = core_copy(rows, gate_up_w);
    const void* down_core = core_copy(rows, down_w);
    if (!gated_mlp_fusion_ || gate_up_w.layout != WeightLayout::MmaFragments ||
        down_w.layout != WeightLayout::MmaFragments || gate_up_w.rows != 2 * inter ||
        !cuda::gated_mlp_fuses(rows, inter, gate_up_core && down_core))
      return Backend::gated_mlp(x, rows, gate_up_w, down_w, act, gate_up, act_out, out);
    const auto norm = take_prefill_norm(x, rows, gate_up_w.cols);
    grow_workspace(workspace_, workspace_bytes_, cuda::gated_mlp_workspace_bytes(rows, gate_up_w.cols, inter));
    Scope scope(this, norm ? "add_rms_norm+gated_mlp" : "gated_mlp", gate_up_w.rows, gate_up_w.cols, rows);
    const bool gelu = act == Activation::GeluTanh;
    if (norm) {
      norm_into_core(*norm);
      cuda::gated_mlp_core_input(workspace_, gelu, rows, gate_up_core, gate_up_w.cols, inter, down_core, down_w.rows,
                                 out, stream_);
    } else {
      cuda::gated_mlp(x, gelu, rows, gate_up_core, gate_up_w.cols, inter, down_core, down_w.rows, out, workspace_,
                      stream_);
    }
    ++fused_gated_mlps_;
  }
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
            const int32_t* positions) override {
    Scope scope(this, "rope");
    cuda::rope(x, rows, heads, head_dim, staged(table.inv_freq.data(), table.inv_freq.size()), table.rotary_dim,
               table.offset, table.attention_scaling, table.interleaved, staged(positions, rows), stream_);
  }
  void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) override {
    if (cuda::lab_skips("gated_activation")) return;
    Scope scope(this, "gated_activation");
    cuda::gated_activation(gate_up, rows, dim, act, out, stream_);
  }
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) override {
    Scope scope(this, "gather_rows");
    cuda::gather_rows(src, staged(rows, n), n, width, dst, stream_);
  }
  void add(float* x, const float* y, int64_t n) override {
    Scope scope(this, "add");
    cuda::add(x, y, n, stream_);
  }
  void add_rms_norm(float* x, const float* y, const Weight& w, int64_t rows, int64_t dim, float eps,
                    float weight_offset, float* out) override {
    if (cuda::lab_skips("add_rms_norm")) return;
    if (rows >= 1 && rows <= fused_norm_rows_ && !profile_->enabled && w.dtype == DType::F32 && w.cols == dim &&
        cuda::add_rms_norm_is_wide(x, y, static_cast<const float*>(w.data), dim, out) &&
        !overlaps(x, rows * dim, y, rows * dim) && !overlaps(x, rows * dim, out, rows * dim) &&
        !overlaps(y, rows * dim, out, rows * dim)) {
      settle();
      grow_zeroed_counters(norm_arrivals_, num_norm_arrivals_, 1);
      pending_norm_ = PendingNorm{x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out};
      return;
    }
    if (prefill_norm_fusion_ && rows > 64 && !profile_->enabled && w.dtype == DType::F32 && w.cols == dim &&
        cuda::add_rms_norm_writes_core(x, y, static_cast<const float*>(w.data), dim, out)) {
      settle();
      pending_norm_ = PendingNorm{x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out};
      return;
    }
    {
      Scope scope(this, "add_rms_norm");
      TACHYON_CHECK(w.dtype == DType::F32 && w.cols == dim, "rms_norm weight must be an uploaded [dim] vector");
      if (cuda::add_rms_norm(x, y, static_cast<const float*>(w.data), rows, dim, eps, weight_offset, out, stream_))
        return;
    }
    Backend::add_rms_norm(x, y, w, rows, dim, eps, weight_offset, out);
  }
  void argmax(const float* x, int64_t rows, int64_t n, int32_t* ids) override {
    Scope scope(this, "argmax");
    if (cuda::lab_skips("argmax")) return;
    cuda::argmax(x, rows, n, ids, stream_);
  }
  void sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, int32_t* ids) override {
    Scope scope(this, "sample_tokens");
    grow_workspace(sample_workspace_, sample_workspace_bytes_, cuda::sample_workspace_bytes(rows, n));
    cuda::sample_tokens(x, rows, n, staged(params, static_cast<size_t>(rows)), sample_workspace_, ids, stream_);
  }
  void top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) override {
    Scope scope(this, "top_two");
    cuda::top_two(x, rows, n, out, stream_);
  }
  void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) override {
    Scope scope(this, "write_kv");
    cuda::write_kv(k, v, rows, device_meta(meta, rows), kv.k, kv.v, kv.block_size, kv.num_kv_heads * kv.head_dim,
                   stream_);
  }
  void qkv_norm_rope_write_kv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                              const AttentionMeta& meta, float* q, float* k, float* v) override {
    if (cuda::lab_skips("qkv_norm_rope_write_kv")) return;
    if (rows > 0) {
      Scope scope(this, "qkv_norm_rope_write_kv");
      const cuda::DeviceAttentionMeta dmeta = device_meta(meta, rows);
      cuda::QkPrologue dp;
      if (device_prologue(p, kv, meta, dmeta, rows, dp) &&
          cuda::qkv_norm_rope_write_kv(qkv, q, rows, dp, dmeta, kv.k, kv.v, kv.block_size, stream_))
        return;
    }
    Backend::qkv_norm_rope_write_kv(qkv, rows, p, kv, meta, q, k, v);
  }
  // Decode steps of two or more rows (every row the only one of its sequence, no tree rows) run
  // the prologue inside the decode attention: one kernel and one launch boundary less per layer.
  // H200, Qwen3-8B shape (bench/NOTES-cuda.md "Session 26"): device time per step -0.6% at
  // batch 8, +0.1% at batch 4, but +0.7% at batch 1, where the separate prologue stays.
  void attention_from_qkv(const float* qkv, int64_t rows, const QkvPrologue& p, const PagedKv& kv,
                          const AttentionMeta& meta, const AttentionParams& params, float* q, float* k, float* v,
                          float* out) override {
    static const bool fuse = !env_turned_off("TACHYON_DECODE_PROLOGUE");  // A/B runs
    if (fuse && rows >= 2 && !cuda::lab_skips("qkv_norm_rope_write_kv") && !cuda::lab_skips("attention") &&
        one_row_per_sequence(meta, rows)) {
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
  void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                 const AttentionParams& p, float* out) override {
    if (rows == 0 || cuda::lab_skips("attention")) return;
    Scope scope(this, "attention");
    const cuda::AttentionShape shape = attention_shape(kv, p);
    std::vector<cuda::QueryTile>& tiles = query_tiles_;
    cuda::make_query_tiles(meta.row_seq, meta.tree_base, rows,
                           cuda::query_tile_rows(shape.num_heads / shape.num_kv_heads, shape.head_dim), tiles,
                           decode_rows_);
    const cuda::DeviceAttentionMeta dmeta = device_meta(meta, rows);
    if (!tiles.empty())
      cuda::attention(q, dmeta, staged(tiles.data(), tiles.size()), static_cast<int>(tiles.size()), kv.k, kv.v,
                      shape, out, stream_);
    if (!decode_rows_.empty()) decode_attention(q, nullptr, kv, meta, shape, dmeta, out);
  }

  // ---- MoE / MLA / linear-attention ops
  void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids,
                 float* weights) override {
    Scope scope(this, "moe_route");
    scope.direct();
    cuda::moe_route(logits, rows, p, ids, weights, stream_);
  }
  void moe_experts(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                   const MoeExperts& e, float* out) override {
    Scope scope(this, "moe_experts");
    scope.direct();
    moe_->run(x, rows, ids, weights, top_k, e, out);
  }
  // One group per head: the head's rows of w are n-tiles [h·n/8, (h+1)·n/8) of the packed matrix.
  void head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs, const Weight& w,
                   float* out, int64_t ors, int64_t ohs) override {
    if (rows == 0) return;
    Scope scope(this, "head_matmul", w.rows, w.cols, rows);
    TACHYON_CHECK(w.layout == WeightLayout::MmaFragments, "head_matmul weights must come from upload_weight");
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
    p.w = w.data, p.w_group_stride = (n / 8) * (cuda::round_up(w.cols, cuda::kMmaColPad) / 32) * 512;  // bytes
    p.n = n, p.k = w.cols, p.out = out, p.out_row_stride = ors, p.out_group_stride = ohs;
    const auto* tiles = static_cast<const cuda::GroupTile*>(
        staged(head_tiles_.data(), head_tiles_.size()));
    cuda::grouped_matmul(p, tiles, nullptr, static_cast<int64_t>(head_tiles_.size()), stream_);
  }
  void copy_strided(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                    int64_t dst_stride) override {
    Scope scope(this, "copy_strided");
    cuda::copy_strided(src, src_stride, rows, width, dst, dst_stride, stream_);
  }
  void gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride, int64_t group,
                     GateFn fn) override {
    Scope scope(this, "gate_multiply");
    cuda::gate_multiply(x, rows, dim, gate, gate_stride, group, fn, stream_);
  }
  void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const Weight& w, const RecurrentMeta& meta,
                          float* state, int64_t state_stride, float* out) override {
    Scope scope(this, "causal_conv1d_silu");
    scope.direct();
    TACHYON_CHECK(w.layout == WeightLayout::MmaFragments && w.rows == channels,
                  "causal_conv1d_silu weight must be an uploaded [channels, kernel] matrix");
    cuda::causal_conv1d_silu(x, channels, w.data, w.cols, device_meta(meta), state, state_stride, out, stream_);
  }
  void gated_delta_rule(const float* qkv, int64_t qkv_stride, const float* ba, int64_t rows,
                        const DeltaRuleParams& p, const RecurrentMeta& meta, float* state, int64_t state_stride,
                        float* out) override {
    Scope scope(this, "gated_delta_rule");
    scope.direct();
    cuda::gated_delta_rule(qkv, qkv_stride, ba, p, device_meta(meta), state, state_stride, out, stream_);
  }

 OpProfile& profile() { return *profile_; }
  cuda::StepGraphs& graphs() { return *graphs_; }
  cudaStream_t stream() const { return stream_; }

 private:
  // A device scratch buffer of at least `need` bytes. Grow-only, geometrically: a steady decode
  // loop never reallocates (a reallocation synchronises the stream).
  void grow_workspace(void*& buffer, size_t& bytes, size_t need) {
    if (need <= bytes) return;
    if (buffer) deallocate(buffer);
    bytes = std::max(need, bytes * 3 / 2);
    buffer = allocate(bytes);
  }
  // add_rms_norm at decode rows waits here (pending_norm_) for the op after it: a matmul of its
  // output on the streaming kernel takes it into its staging (matmul_stream.cuh: one launch and
  // one kernel boundary fewer per norm, the same bits); anything else launches it first
  // (settle: every Scope, flush and copy). TACHYON_FUSED_NORM_ROWS: the most rows fused (A/B
  // runs; at most kStreamMaxRows, 0: never). Default 1: every CTA normalises every row, and the
  // CTA that stages last writes them back, which from 4 rows on costs more than the launch it
  // saves (H200, one call at 939775a: batch 1 +5%, batch 4 -1.4%, batch 8 -12%; NOTES-cuda.md
  // "Session 13").
  static constexpr int kFusedNormRows = 1;
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
  static int fused_norm_rows_setting() {
    const char* value = std::getenv("TACHYON_FUSED_NORM_ROWS");
    const int rows = value ? std::atoi(value) : kFusedNormRows;
    return std::clamp(rows, 0, cuda::kStreamMaxRows);
  }
  void settle() {
    if (!pending_norm_) return;
    const PendingNorm p = *pending_norm_;
    pending_norm_.reset();
    Scope scope(this, "add_rms_norm");
    TACHYON_CHECK(cuda::add_rms_norm(p.x, p.y, p.w, p.rows, p.dim, p.eps, p.weight_offset, p.out, stream_),
                  "a pending add_rms_norm lost its wide path");
  }
  bool matmul_after_pending_norm(const float* x, int64_t rows, const Weight& w, const float* bias, float* out) {
    const PendingNorm p = *pending_norm_;
    if (p.rows > 64) return matmul_after_prefill_norm(x, rows, w, bias, out);
    const int64_t n = rows * p.dim, out_n = rows * w.rows;
    if (x != p.out || rows != p.rows || w.layout != WeightLayout::MmaFragments || w.cols != p.dim ||
        !cuda::matmul_streams(rows, w.rows, w.cols) || !cuda::stream_matmul_holds_x(rows, w.cols) || out_n == 0 ||
        overlaps(out, out_n, p.x, n) || overlaps(out, out_n, p.y, n) || overlaps(out, out_n, p.out, n))
      return false;
    pending_norm_.reset();
    Scope scope(this, "add_rms_norm+matmul", w.rows, w.cols, rows);
    cuda::StreamAddNorm norm;
    norm.x = p.x, norm.y = p.y, norm.w = p.w, norm.eps = p.eps, norm.weight_offset = p.weight_offset;
    norm.out = p.out, norm.arrivals = norm_arrivals_;
    cuda::matmul_after_add_norm(norm, rows, w.data, w.rows, w.cols, bias, out, stream_);
    ++fused_norms_;
    return true;
  }

  // A pending norm at prefill rows whose output `x` is a prefill matmul's input (k = its dim): taken,
  // to write that input itself (norm_into_core), so the matmul skips its conversion.
  std::optional<PendingNorm> take_prefill_norm(const float* x, int64_t rows, int64_t k) {
    if (!pending_norm_ || pending_norm_->rows <= 64 || x != pending_norm_->out || rows != pending_norm_->rows ||
        k != pending_norm_->dim)
      return std::nullopt;
    const auto p = pending_norm_;
    pending_norm_.reset();
    return p;
  }
  // The norm, writing out and its rows in the wgmma kernel's core-matrix order at the workspace's start.
  void norm_into_core(const PendingNorm& p) {
    cuda::add_rms_norm_core(p.x, p.y, p.w, p.rows, p.dim, p.eps, p.weight_offset, p.out, workspace_,
                            cuda::matmul_core_rows(p.rows), stream_);
    ++fused_prefill_norms_;
  }
  bool matmul_after_prefill_norm(const float* x, int64_t rows, const Weight& w, const float* bias, float* out) {
    const void* w_core = core_copy(rows, w);
    if (w.layout != WeightLayout::MmaFragments || !cuda::matmul_takes_core_input(rows, w.cols, w_core != nullptr))
      return false;
    const auto p = take_prefill_norm(x, rows, w.cols);
    if (!p) return false;
    prepare_matmul(rows, w);
    Scope scope(this, "add_rms_norm+matmul", w.rows, w.cols, rows);
    norm_into_core(*p);
    cuda::matmul_core_input(workspace_, rows, w.cols, w_core, w.rows, bias, out, stream_);
    return true;
  }

  // The matmul workspace and split-K counters for w at `rows`.
  void prepare_matmul(int64_t rows, const Weight& w) {
    grow_workspace(workspace_, workspace_bytes_, cuda::matmul_workspace_bytes(rows, w.rows, w.cols));
    grow_zeroed_counters(counters_, num_counters_, cuda::matmul_counter_count(w.rows));
  }
  // w's core-matrix copy when the prefill (wgmma) kernel would use it, else null.
  const void* core_copy(int64_t rows, const Weight& w) const {
    if (rows <= 64) return nullptr;
    const auto it = core_copies_.find(w.data);
    return it != core_copies_.end() ? it->second : nullptr;
  }

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

  static float load_host(const Weight& w, int64_t i) {
    switch (w.dtype) {
      case DType::F32: return static_cast<const float*>(w.data)[i];
      case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
      default: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    }
  }

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
  void grow_zeroed_counters(unsigned*& counters, size_t& count, size_t need) {
    if (need <= count) return;
    if (counters) deallocate(counters);
    count = std::max(need, count * 2);
    counters = static_cast<unsigned*>(allocate(count * sizeof(unsigned)));
    flush();  // before the zeroing (issued directly)
    TACHYON_CUDA_CHECK(cudaMemsetAsync(counters, 0, count * sizeof(unsigned), stream_));
  }
  // Issues the recorded ops (graph or direct) before anything that leaves the recording.
  void flush() {
    settle();
    graphs_->flush();
  }

  // The prologue's arguments in device memory, its host arrays staged: call it inside the op's
  // Scope (staged outside, they go to the mirror, whose addresses change the step's graph key).
  // Positions that are the attention meta's are not staged twice (dmeta holds them). False, with
  // nothing staged, for shapes the fused kernels do not cover.
  bool device_prologue(const QkvPrologue& p, const PagedKv& kv, const AttentionMeta& meta,
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
  // Every row the only one of its sequence (rows of a sequence are consecutive), no tree rows.
  static bool one_row_per_sequence(const AttentionMeta& meta, int64_t rows) {
    if (meta.tree_base) return false;
    for (int64_t r = 1; r < rows; ++r)
      if (meta.row_seq[r] == meta.row_seq[r - 1]) return false;
    return true;
  }
  static cuda::AttentionShape attention_shape(const PagedKv& kv, const AttentionParams& p) {
    TACHYON_CHECK(kv.head_dim <= 256 && kv.head_dim % 8 == 0,
                  "the CUDA attention supports head_dim a multiple of 8 up to 256, got {}", kv.head_dim);
    TACHYON_CHECK(p.num_heads % kv.num_kv_heads == 0, "num_heads must be a multiple of num_kv_heads");
    return {static_cast<int>(p.num_heads), static_cast<int>(kv.num_kv_heads), static_cast<int>(kv.head_dim),
            kv.block_size, p.scale, p.softcap, static_cast<int>(p.sliding_window), 0,
            p.sinks};  // device memory: an uploaded weight
  }
  // The split-KV decode attention of decode_rows_ (with `prologue`, q is the fused projection's
  // output: cuda::attention_decode).
  void decode_attention(const float* q, const cuda::QkPrologue* prologue, const PagedKv& kv, const AttentionMeta& meta,
                        const cuda::AttentionShape& shape, const cuda::DeviceAttentionMeta& dmeta, float* out) {
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
                           static_cast<int>(decode_rows_.size()), chunks, kv.k, kv.v, shape,
                           static_cast<float*>(attn_workspace_), attn_counters_, out, stream_);
  }

  cuda::DeviceAttentionMeta device_meta(const AttentionMeta& meta, int64_t rows) {
    const int32_t num_seqs = rows > 0 ? meta.row_seq[rows - 1] + 1 : 0;
    return {staged(meta.positions, rows), staged(meta.row_seq, rows),
            staged(meta.block_tables, static_cast<size_t>(meta.block_table_offsets[num_seqs])),
            staged(meta.block_table_offsets, static_cast<size_t>(num_seqs) + 1),
            meta.tree_base ? staged(meta.tree_base, rows) : nullptr,
            meta.tree_base ? staged(meta.tree_path, static_cast<size_t>(rows) * kMaxTreeDepth) : nullptr};
  }

  cuda::DeviceRecurrentMeta device_meta(const RecurrentMeta& meta) {
    const int64_t rows = meta.num_seqs > 0 ? meta.seq_row_begin[meta.num_seqs] : 0;
    return {meta.num_seqs, staged(meta.seq_row_begin, static_cast<size_t>(meta.num_seqs) + 1),
            staged(meta.seq_state_slot, static_cast<size_t>(meta.num_seqs)),
            staged(meta.row_snapshot_slot, static_cast<size_t>(rows))};
  }

  // A [1, k] weight (uploaded as an f32 vector, e.g. Qwen3-Next's shared_expert_gate) used as
  // a matrix: packed into fragments on first use, once per weight.
  const Weight& packed_row(const Weight& v) {
    auto it = packed_rows_.find(v.data);
    if (it != packed_rows_.end()) return it->second;
    TACHYON_CHECK(v.dtype == DType::F32, "a one-row matmul weight must be an uploaded f32 vector");
    void* packed = allocate(cuda::packed_weight_bytes(1, v.cols));
    cuda::pack_weight(v.data, DType::F32, 1, v.cols, packed, stream_);
    owned_.push_back(packed);
    Weight w = v;
    w.data = packed;
    w.dtype = DType::BF16;
    w.layout = WeightLayout::MmaFragments;
    return packed_rows_.emplace(v.data, w).first->second;
  }

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
  std::unique_ptr<OpProfile> profile_;
  unsigned* counters_ = nullptr;  // split-K matmul: one zeroed counter per column group
  size_t num_counters_ = 0;
  unsigned* attn_counters_ = nullptr;  // decode attention: one zeroed counter per (row, KV head)
  size_t num_attn_counters_ = 0;
  std::optional<PendingNorm> pending_norm_;
  const int fused_norm_rows_ = fused_norm_rows_setting();
  uint64_t fused_norms_ = 0;  // launches of the fused path (tests)
  // The gated MLP with the activation in the gate_up GEMM's epilogue (TACHYON_GATED_MLP=0: its
  // two matmuls, for A/B runs and tests); the calls that took it.
  const bool gated_mlp_fusion_ = !cuda::env_turned_off("TACHYON_GATED_MLP");
  uint64_t fused_gated_mlps_ = 0;
  // add_rms_norm at prefill rows writing the next prefill matmul's input (TACHYON_FUSED_PREFILL_NORM=0:
  // the norm, then the matmul's conversion, for A/B runs and tests); the norms that did.
  const bool prefill_norm_fusion_ = !cuda::env_turned_off("TACHYON_FUSED_PREFILL_NORM");
  uint64_t fused_prefill_norms_ = 0;
  unsigned* norm_arrivals_ = nullptr;  // the fused norm's CTA count (matmul_stream.cuh), left zeroed
  size_t num_norm_arrivals_ = 0;
  std::vector<void*> owned_;
  void* staging_ = nullptr;  // row-major weight on its way to being packed
  size_t staging_bytes_ = 0;
  void* workspace_ = nullptr;  // A fragments of the matmuls with more than 16 rows
  size_t workspace_bytes_ = 0;
  void* copy_workspace_ = nullptr;  // copy_on_device_many: the sources, gathered
  size_t copy_workspace_bytes_ = 0;
  void* sample_workspace_ = nullptr;  // sample_tokens: each row's candidates
  size_t sample_workspace_bytes_ = 0;
  std::vector<cuda::CopyDesc> copy_descs_;
  void* attn_workspace_ = nullptr;  // split-KV partial results of decode attention
  size_t attn_workspace_bytes_ = 0;
  std::vector<cuda::QueryTile> query_tiles_;  // attention's plan, reused: no allocation per call
  std::vector<int32_t> decode_rows_;
  GraphPolicy graph_policy_ = GraphPolicy::RepeatingSteps;  // see the constructor
  double host_read_flush_seconds_ = 0, host_read_wait_seconds_ = 0;  // copy_to_host: issuing, then waiting
};

}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

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
