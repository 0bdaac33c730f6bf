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
#include <memory>
#include <string>

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
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void copy_to_device(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void synchronize() {}

  // out[r, :] = table[ids[r], :] * scale
  virtual void embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) = 0;
  // out = x / sqrt(mean(x²) + eps) * (weight_offset + w), per row of `dim` (x may equal out)
  virtual void rms_norm(const float* x, const Weight& w, int64_t rows, int64_t dim, float eps, float weight_offset,
                        float* out) = 0;
  // out[r, n] = Σ_k x[r, k] · w[n, k] (+ bias[n])
  virtual void matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) = 0;
  // In place on x [rows, heads, head_dim]: rotate the first table.rotary_dim dims of each head.
  virtual void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
                    const int32_t* positions) = 0;
  // out[r, i] = act(gate_up[r, i]) * gate_up[r, dim + i]   (gate and up concatenated per row)
  virtual void gated_activation(const float* gate_up, int64_t rows, int64_t dim, Activation act, float* out) = 0;
  // dst[i, :] = src[rows[i], :] for i < n (row width `width`)
  virtual void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst) = 0;
  // x += y (n elements)
  virtual void add(float* x, const float* y, int64_t n) = 0;
  // Writes k, v [rows, num_kv_heads, head_dim] into each row's slot of the paged cache.
  virtual void write_kv(const float* k, const float* v, int64_t rows, const PagedKv& kv, const AttentionMeta& meta) = 0;
  // out [rows, num_heads, head_dim] = softmax(q·Kᵀ·scale + mask) · V over each row's sequence,
  // keys at positions ≤ the row's position (and inside the sliding window).
  virtual void attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                         const AttentionParams& params, float* out) = 0;
};

// "cpu" (AVX2/FMA/F16C when the CPU has them, else portable) or "reference" (the scalar
// oracle every other backend is tested against).
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace tachyon::kernels
