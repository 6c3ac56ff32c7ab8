#!/usr/bin/env bash
# Builds the code that runs on several threads with ThreadSanitizer (into
# build-tsan) and runs its tests there; a data race fails the run.
#
#   - one tensor over threads: AdaComp Compress with CodecConfig::threads
#     (and its first compression after Mark(), each worker copying its own
#     bins), DecodeAccumulateAll / DecodeAverageAll with DecodeOptions::threads
#     (adacomp_core_test, the tests whose names say threads or AccumulateAll);
#   - the in-process communicator, whose learners are threads
#     (adacomp_comm_inprocess_test, all of it).
#
# LibTorch, MPI and Python are left out (not built with TSan; the trainer's
# threads are the in-process communicator's, tested here).
#
# Usage: bash scripts/tsan.sh
# Environment: TSAN_BUILD_DIR (default <repo>/build-tsan), JOBS (default nproc).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/side_build.sh"
BUILD=${TSAN_BUILD_DIR:-$ROOT/build-tsan}

side_build "$BUILD" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DADACOMP_SANITIZE=thread \
  -DADACOMP_WITH_TORCH=OFF -DADACOMP_WITH_MPI=OFF -DADACOMP_WITH_PYTHON=OFF \
  -DADACOMP_BUILD_BENCH=OFF -DADACOMP_BUILD_TESTS=ON \
  -- --target adacomp_core_test adacomp_comm_inprocess_test

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
start=$(date +%s)
"$BUILD/src/core/adacomp_core_test" \
  --gtest_filter='DecodeAccumulateAll*:AdaCompTest.*Threads*:SimdTest.Divide*:MarkTest.LargeTensorsInChunksAndThreads:MarkTest.AdaCompRefusesANonFiniteGradientAfterMark'
"$BUILD/src/comm/adacomp_comm_inprocess_test"
echo "tsan.sh: no data race in the threaded tests ($(( $(date +%s) - start ))s)"
