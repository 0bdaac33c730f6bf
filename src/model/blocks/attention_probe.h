// The attention mass a batch's last rows put on each key (Batch::attention_probe): how a
// small model's attention ranks the parts of a long prompt (SpecPrefill, arXiv 2502.02789).
#pragma once

#include "kernels/backend.h"
#include "model/batch.h"

namespace tachyon::model {

struct AttentionOptions;

// q [rows, H, D] and k [rows, KV, D] (backend memory, RoPE applied) of one layer whose rows are
// one sequence from position 0. For each of the probe's last query rows and each head: the
// softmax of q·kᵀ·scale over the keys the row sees (causal, sliding window, softcap), added to
// probe.key_mass. Attention sinks are left out: they take mass from every key alike.
void add_attention_mass(kernels::Backend& backend, const float* q, const float* k, int64_t rows,
                        const AttentionOptions& o, AttentionProbe& probe);

}  // namespace tachyon::model
