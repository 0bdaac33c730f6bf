#include "kernels/cuda/device_mirror.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/grow_buffer.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/quant_pack.h"

namespace tachyon::kernels::cuda {

const void* DeviceMirror::get(const void* host, size_t bytes) {
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
  s.host.clear();  // matches nothing until its new content is on the device
  grow_buffer(
      s.device, s.capacity, bytes, std::max<size_t>(bytes, 2 * s.capacity),
      [&](void* old) {
        TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
        TACHYON_CUDA_CHECK(cudaFree(old));
      },
      [](size_t n) { return cuda_malloc(n); });
  s.host.assign(static_cast<const std::byte*>(host), static_cast<const std::byte*>(host) + bytes);
  // Stream-ordered after every kernel that read this slot's previous content.
  TACHYON_CUDA_CHECK(cudaMemcpyAsync(s.device, s.host.data(), bytes, cudaMemcpyHostToDevice, stream_));
  return s.device;
}

// ---- CudaBackend: weights, buffers and copies

void* CudaBackend::allocate(size_t bytes) { return cuda_malloc(std::max<size_t>(bytes, 1)); }

std::optional<Backend::DeviceMemory> CudaBackend::device_memory() {
  synchronize();  // frees and workspace growth issued so far are accounted for
  DeviceMemory m;
  TACHYON_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

void CudaBackend::deallocate(void* ptr) {
  if (!ptr) return;
  flush();  // recorded ops may still use it
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
  TACHYON_CUDA_CHECK(cudaFree(ptr));
}

Weight CudaBackend::upload_weight(const Weight& host) {
  flush();
  TACHYON_CHECK(host.layout == WeightLayout::RowMajor, "weights arrive row-major");
  if (cuda::is_quant_upload(host)) return upload_quant_weight(host);
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
  grow_buffer(
      staging_, staging_bytes_, src_bytes, src_bytes, [](void* old) { TACHYON_CUDA_CHECK(cudaFree(old)); },
      [&](size_t n) { return allocate(n); });
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

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
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

Backend::HostRead CudaBackend::copy_to_host_later(void* dst, const void* src, size_t bytes) {
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

void CudaBackend::wait_host_read(HostRead read) {
  const auto t0 = std::chrono::steady_clock::now();
  reads_->wait(read.id);
  host_read_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
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

void CudaBackend::copy_on_device_many(std::span<const DeviceCopy> copies) {
  // 4-byte aligned copies (a quantized KV token's code and param records, kv_token_spans) in two
  // launches; others one by one.
  size_t total = 0;
  bool aligned = true;
  for (const DeviceCopy& c : copies) {
    total += (c.bytes + 15) / 16 * 16;
    aligned &= (reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) | c.bytes) % 4 == 0;
  }
  if (!aligned || copies.size() > 65535) return Backend::copy_on_device_many(copies);
  if (copies.empty()) return;
  Scope scope(this, "copy_on_device_many");
  grow_workspace(copy_workspace_, copy_workspace_bytes_, total);
  copy_descs_.clear();
  int64_t offset = 0;
  for (const DeviceCopy& c : copies) {
    const int64_t count = static_cast<int64_t>(c.bytes / 4);
    copy_descs_.push_back({static_cast<uint32_t*>(c.dst), static_cast<const uint32_t*>(c.src), offset, count});
    offset += (count + 3) / 4 * 4;
  }
  cuda::copy_many(staged(copy_descs_.data(), copy_descs_.size()), static_cast<int64_t>(copy_descs_.size()),
                  static_cast<uint32_t*>(copy_workspace_), stream_);
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  settle();
  copy_async(dst, src, bytes, cudaMemcpyDeviceToDevice);
}

void CudaBackend::copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (graphs_->enabled && !profile_->enabled) {
    thread_local std::string key;  // reused, as in `launch`: no allocation per recorded copy
    key.clear();
    cuda::append_key(key, dst, src, bytes, kind);
    graphs_->record(key, [=](cudaStream_t s) { TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s)); });
    return;
  }
  TACHYON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
}

uint64_t CudaBackend::warmup_events() const {
  const auto& c = graphs_->counters();
  return c.captures + c.capture_failures + c.first_sightings;
}

void CudaBackend::set_repeating_step(bool repeating) {
  if (graph_policy_ != GraphPolicy::RepeatingSteps) return;
  // A tensor-parallel rank adds its partial sums through the host (Backend::all_reduce_sum),
  // which a graph cannot record: its steps are issued directly.
  if (group_size() > 1) repeating = false;
  flush();  // what was recorded under the old setting goes first
  graphs_->enabled = repeating;
}

void CudaBackend::bind_thread() { TACHYON_CUDA_CHECK(cudaSetDevice(device_)); }

void CudaBackend::set_graph_policy(GraphPolicy policy) {
  synchronize();
  graph_policy_ = policy;
  graphs_->enabled = policy == GraphPolicy::Always;
}

void CudaBackend::synchronize() {
  flush();
  TACHYON_CUDA_CHECK(cudaStreamSynchronize(stream_));
  graphs_->reset();
}

void CudaBackend::grow_workspace(void*& buffer, size_t& bytes, size_t need) {
  grow_buffer(
      buffer, bytes, need, std::max(need, bytes * 3 / 2), [&](void* old) { deallocate(old); },
      [&](size_t n) { return allocate(n); });
}

float CudaBackend::load_host(const Weight& w, int64_t i) {
  switch (w.dtype) {
    case DType::F32: return static_cast<const float*>(w.data)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
    default: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
  }
}

void CudaBackend::grow_zeroed_counters(unsigned*& counters, size_t& count, size_t need) {
  if (need <= count) return;
  grow_buffer(
      counters, count, need, std::max(need, count * 2), [&](unsigned* old) { deallocate(old); },
      [&](size_t n) { return static_cast<unsigned*>(allocate(n * sizeof(unsigned))); });
  flush();  // before the zeroing (issued directly)
  TACHYON_CUDA_CHECK(cudaMemsetAsync(counters, 0, count * sizeof(unsigned), stream_));
}

void CudaBackend::flush() {
  settle();
  graphs_->flush();
}

cuda::DeviceAttentionMeta CudaBackend::device_meta(const AttentionMeta& meta, int64_t rows) {
  const int32_t num_seqs = rows > 0 ? meta.row_seq[rows - 1] + 1 : 0;
  return {staged(meta.positions, rows), staged(meta.row_seq, rows),
          staged(meta.block_tables, static_cast<size_t>(meta.block_table_offsets[num_seqs])),
          staged(meta.block_table_offsets, static_cast<size_t>(num_seqs) + 1),
          meta.tree_base ? staged(meta.tree_base, rows) : nullptr,
          meta.tree_base ? staged(meta.tree_path, static_cast<size_t>(rows) * kMaxTreeDepth) : nullptr};
}

cuda::DeviceRecurrentMeta CudaBackend::device_meta(const RecurrentMeta& meta) {
  const int64_t rows = meta.num_seqs > 0 ? meta.seq_row_begin[meta.num_seqs] : 0;
  return {meta.num_seqs, staged(meta.seq_row_begin, static_cast<size_t>(meta.num_seqs) + 1),
          staged(meta.seq_state_slot, static_cast<size_t>(meta.num_seqs)),
          staged(meta.row_snapshot_slot, static_cast<size_t>(rows))};
}

const Weight& CudaBackend::packed_row(const Weight& v) {
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

}  // namespace tachyon::kernels::cuda
