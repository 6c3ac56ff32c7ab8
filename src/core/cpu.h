// The CPU features adacomp's kernels use, in one place (internal to
// adacomp_core). Every SIMD kernel is compiled with a function-level target
// attribute (never the whole build), and is called only when the CPU has
// the feature, so the library runs on any x86-64 (and anywhere else with
// its scalar twins alone).
//
// One naming pattern for every kernel X:
//   X         the dispatcher callers use; picks one of the twins per call
//             (or, for a kernel called through a pointer, BestX() returns it)
//   XScalar   the plain definition, always built; tests compare the twins
//   XAvx2     the AVX2 twin, ADACOMP_TARGET_AVX2, declared only under
//             ADACOMP_X86_SIMD
// (the BMI2 bit writer and the SSE4.2 CRC follow the same shape with their
// own feature). Thread safety: the feature checks are computed once,
// thread-safely, and are then plain reads.
#pragma once

// 1 where the x86-64 kernels are built: an x86-64 target and no
// ADACOMP_NO_SIMD (define it to build and test the scalar twins alone).
#if defined(__x86_64__) && !defined(ADACOMP_NO_SIMD)
#define ADACOMP_X86_SIMD 1
#define ADACOMP_TARGET_AVX2 __attribute__((target("avx2,popcnt")))
#define ADACOMP_TARGET_BMI2 __attribute__((target("bmi,bmi2")))
#define ADACOMP_TARGET_SSE42 __attribute__((target("sse4.2")))
#else
#define ADACOMP_X86_SIMD 0
#endif

namespace adacomp::internal {

// Whether the CPU runs each family of kernels (false without ADACOMP_X86_SIMD).
bool CpuHasAvx2();   // AVX2 and POPCNT
bool CpuHasBmi2();   // BMI1 and BMI2
bool CpuHasSse42();  // SSE4.2 (the CRC32 instruction)

}  // namespace adacomp::internal
