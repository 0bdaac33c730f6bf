// The run-time choice of kernel family (device_arch.h): the device's properties and the PTX version
// of the code loaded for it (arch_probe.cu).
#include "kernels/cuda/device_arch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "base/error.h"
#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {
int loaded_ptx_version();  // arch_probe.cu
}

namespace tachyon::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;
struct Entry {
  std::atomic<bool> ready{false};
  DeviceArch arch;
};
std::array<Entry, kMaxDevices> g_entries;
std::mutex g_mutex;
int g_forced_arch = 0;  // under g_mutex

DeviceArch probe(int device, int forced) {
  cudaDeviceProp prop{};
  TACHYON_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceArch a;
  a.compute_capability = prop.major * 10 + prop.minor;
  a.code_arch = loaded_ptx_version();
  a.forced_arch = forced;
  a.sms = prop.multiProcessorCount;
  a.smem_per_block = prop.sharedMemPerBlockOptin;
  a.hopper = forced == 0 && a.compute_capability >= 90 && a.code_arch >= 90;
  // wgmma is sm_90a's alone: compute capability 9.0 with the sm_90a code (the only sm_90 entry
  // TACHYON_CUDA_ARCHS accepts).
  a.wgmma = a.hopper && a.compute_capability == 90 && a.code_arch == 90;
  if (forced != 0) a.smem_per_block = std::min(a.smem_per_block, pre_hopper_smem_per_block(forced));
  return a;
}

}  // namespace

size_t pre_hopper_smem_per_block(int arch) {
  switch (arch) {
    case 80: return 163 * 1024;
    case 86:
    case 89: return 99 * 1024;
    default: throw Error("CUDA arch {}: expected 80, 86 or 89 (the pre-Hopper GPUs the kernels serve)", arch);
  }
}

const DeviceArch& device_arch() {
  int device = 0;
  TACHYON_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) fail_unsupported("CUDA device index", device);
  Entry& e = g_entries[static_cast<size_t>(device)];
  if (!e.ready.load(std::memory_order_acquire)) {
    std::lock_guard lock(g_mutex);
    if (!e.ready.load(std::memory_order_relaxed)) {
      e.arch = probe(device, g_forced_arch);
      e.ready.store(true, std::memory_order_release);
    }
  }
  return e.arch;
}

void force_device_arch(int arch) {
  if (arch != 0) pre_hopper_smem_per_block(arch);  // throws on an arch it does not know
  std::lock_guard lock(g_mutex);
  if (arch == g_forced_arch) return;
  g_forced_arch = arch;
  for (Entry& e : g_entries) e.ready.store(false, std::memory_order_release);
}

}  // namespace tachyon::kernels::cuda
