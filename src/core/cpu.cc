// The CPU feature checks of core/cpu.h.
#include "core/cpu.h"

namespace adacomp::internal {

#if ADACOMP_X86_SIMD
bool CpuHasAvx2() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  return have;
}
bool CpuHasBmi2() {
  static const bool have = __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  return have;
}
bool CpuHasSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#else
bool CpuHasAvx2() { return false; }
bool CpuHasBmi2() { return false; }
bool CpuHasSse42() { return false; }
#endif

}  // namespace adacomp::internal
