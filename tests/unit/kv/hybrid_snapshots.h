// The hybrid-model fixture of the KV tier tests: a layout with two recurrent-state layers of 8
// floats whose state is snapshotted at every block end, the snapshots of a sequence's first two
// blocks written with known values, and a block's snapshot read back.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {

inline KvLayout hybrid_snapshot_layout() {
  return KvLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = 4, .num_blocks = 4,
                  .format = kernels::KvFormat::BF16, .num_state_layers = 2, .state_floats = 8, .max_sequences = 2,
                  .state_snapshot_interval = 1, .state_rollback_rows = 1};
}

// Claims rows [0, 8) of s (what a forward over them does), writes the snapshot that the row ending
// each of its two blocks would write (layer l, block b: l·100 + b·10 + i) and commits them.
// Returns the second block's snapshots, layer by layer.
inline std::vector<float> write_hybrid_snapshots(kernels::Backend& backend, KvCache& kv, SeqId s) {
  std::vector<float> second;
  kv.prepare_state(s, 0, 8);
  for (int64_t l = 0; l < 2; ++l)
    for (int b = 0; b < 2; ++b) {
      std::vector<float> st(8);
      for (int i = 0; i < 8; ++i) st[static_cast<size_t>(i)] = static_cast<float>(l * 100 + b * 10 + i);
      const int32_t slot = kv.row_state_slot(s, b * 4 + 3);
      EXPECT_GE(slot, 0);
      if (slot < 0) return {};
      backend.copy_to_device(kv.state(l) + slot * 8, st.data(), st.size() * sizeof(float));
      if (b == 1) second.insert(second.end(), st.begin(), st.end());
    }
  kv.commit_state(s, 0, 8);
  return second;
}

// The snapshot a matched prefix of 8 tokens resumes from (its second block's), layer by layer.
inline std::vector<float> read_resumed_snapshot(kernels::Backend& backend, KvCache& kv, SeqId s) {
  const int32_t slot = kv.snapshot_slot(kv.block_table(s)[1]);
  EXPECT_GE(slot, 0);
  if (slot < 0) return {};
  std::vector<float> got;
  for (int64_t l = 0; l < 2; ++l) {
    std::vector<float> st(8);
    backend.copy_to_host(st.data(), kv.state(l) + slot * 8, st.size() * sizeof(float));
    got.insert(got.end(), st.begin(), st.end());
  }
  return got;
}

}  // namespace tachyon::kv
