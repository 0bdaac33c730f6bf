// MoE on the device: routing, the expert grouped matmul and the per-row combine, with no
// host round trip (the routing decides on the device which rows meet which expert).
//
//   route:    one warp per row picks the top-k experts and their weights (ops.h MoeRouting).
//   plan:     one CTA counts rows per expert, assigns each (row, slot) an entry in
//             expert-major order and cuts the entries into tiles of <= 16 of one expert.
//   gate_up:  grouped matmul over the tiles with the activation fused: h [entries, I].
//   down:     grouped matmul: y [entries, hidden] (down bias included).
//   combine:  out[r] = Σ over the row's slots in ascending expert id of w · y[entry].
// Decode-sized calls (<= 8 rows, <= 64 slots) stream the routed experts instead (run_streamed): no
// plan, and gate_up and down as gathered streaming matmuls (matmul_stream.cuh), with the same bits.
// Each entry's outputs follow the canonical matmul order, so a row's result does not depend
// on the other rows of the call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/ops.h"

namespace tachyon::kernels::cuda {

// logits [rows, num_experts] -> ids, weights [rows, top_k] (device arrays).
void moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids, float* weights,
               cudaStream_t stream);

// How many MoeRunner::run calls took the streamed experts path, process-wide (tests).
uint64_t moe_streamed_calls();

// The experts' part of a MoE layer, with its own grow-only device workspace (a steady decode
// loop allocates nothing) and the device tables of each layer's expert weight pointers.
class MoeRunner {
 public:
  explicit MoeRunner(cudaStream_t stream) : stream_(stream) {}
  ~MoeRunner();
  MoeRunner(const MoeRunner&) = delete;
  MoeRunner& operator=(const MoeRunner&) = delete;

  // out [rows, hidden] = Σ_k weights[r, k] · Expert_{ids[r, k]}(x[r]); ids and weights are
  // device arrays [rows, top_k].
  void run(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
           const MoeExperts& e, float* out);

 private:
  struct Tables {  // device arrays of [num_experts] pointers
    const void* const* gate_up = nullptr;
    const void* const* down = nullptr;
    const float* const* gate_up_bias = nullptr;
    const float* const* down_bias = nullptr;
  };
  const Tables& tables(const MoeExperts& e);
  // Decode-sized calls of bias-free experts (<= 8 rows, <= 64 routed slots, on Hopper): the routed
  // experts' weights stream through the dense streaming kernel (matmul_stream.cuh, StreamGather),
  // gate_up for the slots' rows, the gated activation, then down for each slot's own row, 8 slots
  // per launch (an expert two slots share streams twice).
  bool streams(int64_t rows, int64_t slots, const Tables& tab, const MoeExperts& e) const;
  void run_streamed(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                    const MoeExperts& e, const Tables& tab, float* out);
  void* grow(size_t index, size_t bytes);
  void* grow_zeroed(size_t index, size_t bytes);  // grow, zero-filled whenever it was reallocated

  cudaStream_t stream_;
  std::map<std::vector<const void*>, Tables> tables_;  // by the experts' weight pointers
  std::vector<void*> table_memory_;
  std::vector<std::pair<void*, size_t>> buffers_;  // grow-only workspaces
};

}  // namespace tachyon::kernels::cuda
