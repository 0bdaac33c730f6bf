// The CUDA backend's runtime switches, in one place. The environment is read once, when a backend
// is made (CudaOptions::from_environment, the default argument of make_cuda_backend); nothing in
// the backend or its kernels reads it afterwards. A caller may also build the struct itself (tests
// compare the fast paths with the plain ones this way).
//
// Environment (docs/server.md, "CUDA runtime switches"):
//   TACHYON_CUDA_GRAPHS=0|1   CUDA graphs for no step / for every step. Unset: the steps the engine
//                             marks as repeating (plain and draft-chain decode) run as graphs.
//                             Same results either way.
//   TACHYON_WGMMA=0           Kill switch for the Hopper (sm_90a) wgmma prefill matmuls: every
//                             matmul runs on the mma.sync kernels, and weights get no second,
//                             core-matrix copy on the device. Same results, slower prefill.
//   TACHYON_CUDA_FUSION=0     Kill switch for the fused paths: add_rms_norm launched alone instead
//                             of deferred into the next matmul (backend.h, "Deferred norm fusion"),
//                             and the gated MLP as two matmuls and an activation. Same results.
//   TACHYON_CUDA_ARCH=80|86|89  Tests only: run the kernels of that pre-Hopper GPU (mma.sync and
//                             cp.async; no TMA, clusters, wgmma or programmatic launch) within its
//                             shared memory per block (163 KB / 99 KB), on whatever GPU this is
//                             (device_arch.h). Same results, slower on Hopper. Process-wide: it
//                             stays for every backend made after (cuda::force_device_arch(0) ends it).
//   TACHYON_GRAPH_TRACE=1     Debug: stderr says why each new step key missed its graph (the first
//                             differing op and bytes; step_graph_trace.h). Results unchanged.
// Any other value of these variables is an error when the backend is made.
//
// Build options, not switches: -DTACHYON_ATTENTION_BF16=ON (bf16 attention operands: an A/B build,
// results change slightly), -DTACHYON_CUDA_SM90A_ONLY=ON (one target), and -DTACHYON_TIMELINE=1 in
// CUDA flags (the per-CTA step timeline of step_timeline.h; lab builds). Kernel variants that wait
// for a device measurement are patches in bench/cuda/lab/, never switches here.
//
//   auto backend = kernels::make_cuda_backend();            // the environment's options
//   kernels::CudaOptions plain;
//   plain.fused_norm_rows = 0;                               // a backend without the decode fusion
//   auto reference = kernels::make_cuda_backend(plain);
#pragma once

namespace tachyon::kernels {

struct CudaOptions {
  enum class Graphs { RepeatingSteps, Always, Never };
  Graphs graphs = Graphs::RepeatingSteps;  // TACHYON_CUDA_GRAPHS
  bool wgmma = true;                       // TACHYON_WGMMA
  bool graph_trace = false;                // TACHYON_GRAPH_TRACE
  int device = 0;                          // which GPU ("cuda:N"; tensor-parallel ranks)
  int arch = 0;                            // TACHYON_CUDA_ARCH: 80, 86 or 89 forces that GPU's kernels; 0: the device's

  // The fusions (TACHYON_CUDA_FUSION=0 turns all three off). Each gives the bits of the unfused ops.
  // The most rows of an add_rms_norm deferred into the streaming decode matmul that reads its output
  // (0: none; at most kStreamMaxRows). 1 by default: from 4 rows on every CTA normalising every row
  // costs more than the launch it saves (H200: batch 1 +5%, batch 4 -1.4%, batch 8 -12% at 8 rows,
  // docs/perf/cuda.md). Tests set 8 to cover the multi-row path.
  int fused_norm_rows = 1;
  // add_rms_norm at prefill rows writing the next wgmma matmul's input in core-matrix order.
  bool prefill_norm_fusion = true;
  // The gated MLP with the activation in the gate_up GEMM's epilogue.
  bool gated_mlp_fusion = true;

  // The options the environment sets (the defaults above where a variable is unset); throws
  // tachyon::Error on a value it does not know.
  static CudaOptions from_environment();
};

}  // namespace tachyon::kernels
