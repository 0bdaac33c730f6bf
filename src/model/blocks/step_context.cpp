#include "model/blocks/step_context.h"

#include <algorithm>

#include "base/error.h"
#include "base/grow_buffer.h"

namespace tachyon::model {

Workspace::~Workspace() {
  for (float* b : buffers_)
    if (b) backend_.deallocate(b);
}

float* Workspace::get(Slot slot, int64_t num_floats) {
  // A device out of memory (a long prompt) throws from the allocation: the slot is left empty,
  // not holding the released buffer that the next step would write and the destructor free again.
  const auto need = static_cast<size_t>(std::max<int64_t>(num_floats, 0));
  return grow_buffer(
      buffers_[slot], sizes_[slot], need, std::max(need, sizes_[slot] * 3 / 2),
      [&](float* old) { backend_.deallocate(old); },
      [&](size_t n) { return static_cast<float*>(backend_.allocate(n * sizeof(float))); });
}

StepContext::StepContext(kernels::Backend& b, const Batch& batch_, const kv::KvCache& kv)
    : backend(b), batch(batch_), rows(batch_.num_rows()) {
  TACHYON_CHECK(batch.positions.size() == batch.tokens.size() && batch.row_seq.size() == batch.tokens.size(),
                "batch arrays disagree in length");
  TACHYON_CHECK(batch.decode_rows.empty() || batch.decode_rows.size() == batch.tokens.size(),
                "batch decode_rows has {} entries for {} rows", batch.decode_rows.size(), batch.tokens.size());
  TACHYON_CHECK(batch.rope_positions.empty() || batch.rope_positions.size() == batch.tokens.size(),
                "batch rope_positions has {} entries for {} rows", batch.rope_positions.size(), batch.tokens.size());
  if (batch.attention_probe) {
    const AttentionProbe& probe = *batch.attention_probe;
    TACHYON_CHECK(batch.seqs.size() == 1 && rows > 0 && batch.positions[0] == 0,
                  "an attention probe needs one sequence's rows from position 0");
    TACHYON_CHECK(probe.query_rows > 0 && probe.query_rows <= rows, "attention probe: {} query rows of {}",
                  probe.query_rows, rows);
    TACHYON_CHECK(batch.tree_base.empty(), "an attention probe cannot read a draft tree");
    TACHYON_CHECK(probe.layers >= 0 && probe.read_window >= 0 && probe.first_layer >= 0 &&
                      (probe.layers == 0 || probe.first_layer < probe.layers),
                  "attention probe: layers {} from layer {}, read window {}", probe.layers, probe.first_layer,
                  probe.read_window);
    TACHYON_CHECK(probe.layers == 0 || (batch.logit_rows.empty() && batch.hidden_rows.empty()),
                  "an attention probe that stops after {} layers leaves no logits or hidden states to return",
                  probe.layers);
  }
  block_table_offsets.push_back(0);
  for (kv::SeqId seq : batch.seqs) {
    const auto& table = kv.block_table(seq);
    block_tables.insert(block_tables.end(), table.begin(), table.end());
    block_table_offsets.push_back(static_cast<int32_t>(block_tables.size()));
  }
  seq_row_begin.assign(batch.seqs.size() + 1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = batch.row_seq[r];
    TACHYON_CHECK(s >= 0 && s < static_cast<int32_t>(batch.seqs.size()), "row {} names sequence {}", r, s);
    TACHYON_CHECK(r == 0 || batch.row_seq[r - 1] <= s, "rows of a sequence must be contiguous");
    TACHYON_CHECK(batch.positions[r] >= 0 && batch.positions[r] < kv.num_tokens(batch.seqs[s]),
                  "row {} has position {} but sequence {} has KV reserved for {} tokens", r, batch.positions[r],
                  batch.seqs[s], kv.num_tokens(batch.seqs[s]));
    seq_row_begin[s + 1] = static_cast<int32_t>(r + 1);
  }
  for (size_t s = 1; s < seq_row_begin.size(); ++s) seq_row_begin[s] = std::max(seq_row_begin[s], seq_row_begin[s - 1]);
  if (kv.has_state()) {
    for (kv::SeqId seq : batch.seqs) seq_state_slot.push_back(kv.state_slot(seq));
    row_snapshot_slot.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      row_snapshot_slot[r] = kv.row_state_slot(batch.seqs[batch.row_seq[r]], batch.positions[r]);
    recurrent.num_seqs = static_cast<int64_t>(batch.seqs.size());
    recurrent.seq_row_begin = seq_row_begin.data();
    recurrent.seq_state_slot = seq_state_slot.data();
    recurrent.row_snapshot_slot = row_snapshot_slot.data();
    for (size_t s = 0; s + 1 < seq_row_begin.size(); ++s)
      seq_first_position.push_back(seq_row_begin[s] < seq_row_begin[s + 1] ? batch.positions[seq_row_begin[s]] : 0);
    recurrent.seq_first_position = seq_first_position.data();
    recurrent.resume_align = kv.layout().block_size * std::max(1, kv.layout().state_snapshot_interval);
  }
  if (!batch.tree_base.empty()) {
    TACHYON_CHECK(!kv.has_state(), "draft trees need attention-only models (recurrent state follows one branch)");
    TACHYON_CHECK(batch.tree_base.size() == batch.tokens.size() &&
                      batch.tree_path.size() == batch.tokens.size() * kernels::kMaxTreeDepth,
                  "batch tree arrays disagree in length");
    meta.tree_base = batch.tree_base.data();
    meta.tree_path = batch.tree_path.data();
  }
  meta.positions = batch.positions.data();
  meta.row_seq = batch.row_seq.data();
  meta.block_tables = block_tables.data();
  meta.block_table_offsets = block_table_offsets.data();
  if (kv.layout().splits_sliding()) {
    // Same lengths as the full tables: the offsets are shared.
    for (kv::SeqId seq : batch.seqs) {
      const auto& table = kv.sliding_block_table(seq);
      sliding_block_tables.insert(sliding_block_tables.end(), table.begin(), table.end());
    }
    const int32_t window = kv.layout().max_window();
    for (int64_t r = 0; r < rows; ++r) {  // no row may reach back into a released block
      const kv::SeqId seq = batch.seqs[batch.row_seq[r]];
      const int32_t first_key = std::max(0, batch.positions[r] - window + 1);
      TACHYON_CHECK(first_key >= kv.first_sliding_position(seq),
                    "row {} at position {} of sequence {} reads sliding-window keys from {}, released up to {}", r,
                    batch.positions[r], seq, first_key, kv.first_sliding_position(seq));
    }
    sliding_meta = meta;
    sliding_meta.block_tables = sliding_block_tables.data();
  }
}

}  // namespace tachyon::model
