// CPU features that __builtin_cpu_supports cannot name on every compiler the project builds with.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>

namespace tachyon::kernels::cpu {

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c"
// (the sanitizer and fuzz builds are clang's).
inline bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

}  // namespace tachyon::kernels::cpu
#endif
