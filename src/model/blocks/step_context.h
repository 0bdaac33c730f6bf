// What every block of one forward pass shares: the backend, the batch, the attention
// metadata derived from the batch and the KV cache, and the grow-only workspace.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/batch.h"

namespace tachyon::model {

// Activation buffers on the backend, reused across steps; they only grow, so a steady
// decode loop allocates nothing.
class Workspace {
 public:
  enum Slot {
    kResidual, kNormed, kQ, kK, kV, kAttn, kProj, kGateUp, kAct, kLogitIn, kLogits, kHidden,
    kTokenIds,  // the step's sampled ids: the next forward may read them (Batch::device_tokens)
    kRouterLogits, kExpertIds, kExpertWeights, kShared, kSharedGate,          // MoE
    kScratch0, kScratch1, kScratch2, kScratch3, kScratch4, kScratch5,         // MLA, linear attention
    kLayerHidden,  // Batch::hidden_layers: named layers' outputs, kept while later layers run
    kNumSlots
  };
  explicit Workspace(kernels::Backend& backend) : backend_(backend) {}
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  float* get(Slot slot, int64_t num_floats);
  int32_t* get_ints(Slot slot, int64_t n) { return reinterpret_cast<int32_t*>(get(slot, n)); }

 private:
  kernels::Backend& backend_;
  std::array<float*, kNumSlots> buffers_{};
  std::array<size_t, kNumSlots> sizes_{};  // floats
};

struct StepContext {
  StepContext(kernels::Backend& backend, const Batch& batch, const kv::KvCache& kv);

  kernels::Backend& backend;
  const Batch& batch;
  int64_t rows;
  kernels::AttentionMeta meta;            // points into the vectors below and into `batch`
  std::vector<int32_t> block_tables;      // every sequence's block table, concatenated
  std::vector<int32_t> block_table_offsets;
  // A KV cache whose sliding layers have blocks of their own (kv::KvLayout::splits_sliding):
  // meta with the sliding group's tables (kv::kNoBlock where a block left every window).
  kernels::AttentionMeta sliding_meta;
  std::vector<int32_t> sliding_block_tables;
  // The attention metadata of KV layer `layer`: its group's block tables.
  const kernels::AttentionMeta& attention_meta(const kv::KvCache& kv, int64_t layer) const {
    return kv.layout().in_sliding_group(layer) ? sliding_meta : meta;
  }
  std::vector<int32_t> seq_row_begin;     // [num_seqs + 1] rows of sequence i: [begin[i], begin[i + 1])
  // Hybrid models: each sequence's working state slot and each row's snapshot slot (a block
  // snapshot or a rollback row, as kv::KvCache::row_state_slot decides).
  kernels::RecurrentMeta recurrent;
  std::vector<int32_t> seq_state_slot, row_snapshot_slot, seq_first_position;
  // This model is one tensor-parallel rank (shard_plan.h): layers add their row-parallel partial
  // sums across the ranks (Backend::all_reduce_sum). Other models on the same backend (an MTP
  // head, a drafter) are whole and leave it false.
  bool all_reduce = false;
};

}  // namespace tachyon::model
