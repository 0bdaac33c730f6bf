#include "kernels/cuda/cuda_options.h"

#include <cstdlib>
#include <string_view>

#include "base/error.h"

namespace tachyon::kernels {
namespace {

// A 0/1 variable: `fallback` where unset.
bool read_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (!value) return fallback;
  const std::string_view v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  throw Error("{}='{}': expected 0 or 1 (src/kernels/cuda/cuda_options.h)", name, v);
}

}  // namespace

CudaOptions CudaOptions::from_environment() {
  CudaOptions o;
  if (std::getenv("TACHYON_CUDA_GRAPHS"))
    o.graphs = read_flag("TACHYON_CUDA_GRAPHS", false) ? Graphs::Always : Graphs::Never;
  o.wgmma = read_flag("TACHYON_WGMMA", o.wgmma);
  o.graph_trace = read_flag("TACHYON_GRAPH_TRACE", o.graph_trace);
  if (const char* arch = std::getenv("TACHYON_CUDA_ARCH")) {
    const std::string_view v(arch);
    if (v == "80") o.arch = 80;
    else if (v == "86") o.arch = 86;
    else if (v == "89") o.arch = 89;
    else throw Error("TACHYON_CUDA_ARCH='{}': expected 80, 86 or 89 (src/kernels/cuda/cuda_options.h)", v);
  }
  if (!read_flag("TACHYON_CUDA_FUSION", true)) {
    o.fused_norm_rows = 0;
    o.prefill_norm_fusion = false;
    o.gated_mlp_fusion = false;
  }
  return o;
}

}  // namespace tachyon::kernels
