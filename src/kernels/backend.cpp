#include "kernels/backend.h"

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"

namespace tachyon::kernels {

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "reference") return std::make_unique<ReferenceBackend>();
  throw Error("unknown device '{}' (this build supports: cpu, reference)", name);
}

}  // namespace tachyon::kernels
