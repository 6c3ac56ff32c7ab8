#!/usr/bin/env bash
# Builds the codec and the exchange with ADACOMP_NO_SIMD (the scalar twins
# of every vector kernel alone, as on a CPU without SSE2/AVX2; src/core/cpu.h)
# into build-nosimd and runs their tests there. The tests that compare a
# vector kernel with its scalar twin report SKIPPED in this build.
#
# Usage: bash scripts/nosimd.sh
# Environment: NOSIMD_BUILD_DIR (default <repo>/build-nosimd), JOBS (default nproc).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/side_build.sh"
BUILD=${NOSIMD_BUILD_DIR:-$ROOT/build-nosimd}
start=$(date +%s)

side_build "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS=-DADACOMP_NO_SIMD \
  -DADACOMP_WITH_TORCH=OFF -DADACOMP_WITH_MPI=OFF -DADACOMP_WITH_PYTHON=OFF \
  -DADACOMP_BUILD_BENCH=OFF -DADACOMP_BUILD_TESTS=ON \
  -- --target adacomp_core_test adacomp_exchange_test

"$BUILD/src/core/adacomp_core_test" --gtest_brief=1
"$BUILD/src/exchange/adacomp_exchange_test" --gtest_brief=1
echo "nosimd.sh: the scalar-only build passed its tests after $(( $(date +%s) - start )) s"
