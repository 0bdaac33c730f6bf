// Which kernels the current GPU runs, decided at run time (never by compile-time assumptions): by
// the device's compute capability and by the code this binary loaded for it. A compute_80-PTX
// build JIT-compiled on an H100 reports compute capability 9.0 but holds no Hopper instructions
// (its Hopper-only kernels are traps: TACHYON_PRE_HOPPER_DEVICE_CODE, common.cuh), so the loaded
// code's PTX version decides too.
//
// Two families of kernels:
//  - Hopper (sm_90, device and loaded code both): bulk copies (TMA), mbarrier transactions,
//    thread block clusters, programmatic dependent launch; wgmma (sm_90a, compute capability 9.0
//    exactly).
//  - every GPU from sm_80 on: mma.sync and cp.async kernels with the same bits (the canonical
//    order, common.cuh), within the device's shared memory per block (99 KB on sm_86/sm_89, 163
//    KB on sm_80, 227 KB on Hopper).
// CudaOptions::arch (TACHYON_CUDA_ARCH=80|86|89, tests only) makes a Hopper device take the
// pre-Hopper kernels with that GPU's shared-memory limit.
#pragma once

#include <cstddef>

namespace tachyon::kernels::cuda {

struct DeviceArch {
  int compute_capability = 0;  // 10 · major + minor (80, 86, 89, 90, ...)
  int code_arch = 0;           // the PTX version of the loaded kernels (80 for compute_80 PTX, 90 for sm_90a)
  int forced_arch = 0;         // CudaOptions::arch, 0 where not forced
  bool hopper = false;         // the sm_90 kernels: TMA, mbarrier transactions, clusters, programmatic launch
  bool wgmma = false;          // the sm_90a wgmma kernels
  size_t smem_per_block = 0;   // opt-in dynamic shared memory per CTA, bytes (the forced arch's where forced)
  int sms = 0;                 // streaming multiprocessors
};

// The current device's (cudaGetDevice), determined once per device and per forced arch.
const DeviceArch& device_arch();
// Tests: every device runs the kernels of GPU `arch` (80, 86 or 89) from now on, within that GPU's
// shared memory per block; 0 returns to each device's own. Process-wide: a backend made with
// CudaOptions::arch sets it, and it stays until this is called with 0.
void force_device_arch(int arch);
// Opt-in shared memory per block of an sm_`arch` GPU (80: 163 KB, 86/89: 99 KB); throws for others.
size_t pre_hopper_smem_per_block(int arch);

}  // namespace tachyon::kernels::cuda
