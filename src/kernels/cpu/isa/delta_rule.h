// ISA-specific inner loops of the gated delta rule (kernels/ops.h, DeltaRuleParams): one value
// head of one sequence over a piece of consecutive rows, either token by token (recurrent) or
// in chunkwise-parallel form (one chunk). The caller
// (cpu/linear_attention_ops.cpp) cuts each sequence's rows into pieces and picks the form.
//
// The portable and AVX2 builds compile the same loops (isa/delta_rule_body.h): every output
// element is one in-order chain of explicit fmas, so both give the same bits.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tachyon::kernels::cpu {

// Rows of one chunk. GPUs (flash-linear-attention, HF) use 64; on the CPU 16 is fastest
// (bench/kernels/delta_rule_bench: the state is already read once per 16 rows, and the chunk's
// O(C²) terms grow past that) and equals the KV block size, where snapshots are taken.
constexpr int64_t kDeltaChunkMax = 16;

struct DeltaPiece {
  const DeltaRuleParams* params;
  const float* qkv;             // row 0 of the piece; q, k, v columns as in Backend::gated_delta_rule
  int64_t qkv_stride;
  const float* ba;              // row 0 of the piece, [n, 2·Hv] (b first)
  int64_t n;                    // rows
  int64_t head;                 // value head h
  float* S;                     // [dk, dv] this head's working state: in at the piece start, out at its end
  float* out;                   // row 0's output of this head; rows are Hv·dv apart
  const int32_t* snapshot_slot; // [n] state slot to copy this head's state into after each row, or -1
  float* state;                 // slot 0 of the state array (snapshot slot s is at state + s·state_stride)
  int64_t state_stride;
};

using DeltaPieceFn = void (*)(const DeltaPiece& piece);

struct DeltaRuleKernels {
  DeltaPieceFn recurrent;  // any n
  DeltaPieceFn chunked;    // any n; the driver gives it whole chunks of kDeltaChunkMax rows or fewer
};
const DeltaRuleKernels& delta_rule_kernels();  // follows isa_kernels() (TACHYON_ISA forces portable)

void delta_recurrent_portable(const DeltaPiece& piece);
void delta_chunked_portable(const DeltaPiece& piece);
#if defined(__x86_64__)
void delta_recurrent_avx2(const DeltaPiece& piece);
void delta_chunked_avx2(const DeltaPiece& piece);
#endif

}  // namespace tachyon::kernels::cpu
