// RoPE frequency tables from config.json's rope parameters, computed the way transformers
// does (`ROPE_INIT_FUNCTIONS`): default, linear, dynamic (NTK), llama3, yarn.
#pragma once

#include <cstdint>

#include "io/config.h"
#include "kernels/ops.h"

namespace tachyon::model {

// Which dimensions of a head RoPE rotates together: (i, i + rotary_dim/2) (the llama
// family's rotate_half) or adjacent pairs (2i, 2i + 1) (DeepSeek's rope_interleave).
enum class RopeLayout { RotateHalf, Interleaved };

// The table for `head_dim` (rotary_dim = head_dim · partial_rotary_factor).
// `max_position_embeddings` is the config's, used by yarn/dynamic when the rope parameters
// lack original_max_position_embeddings. For "dynamic", `seq_len` is the length the
// forward covers (max position + 1): beyond the original context the base grows with it.
kernels::RopeTable make_rope_table(const io::RopeParams& params, int64_t head_dim, int64_t max_position_embeddings,
                                   int64_t seq_len = 0);

// Whether the table depends on the sequence length (then it is rebuilt per forward).
inline bool rope_depends_on_length(const io::RopeParams& params) { return params.rope_type == "dynamic"; }

}  // namespace tachyon::model
