#!/usr/bin/env bash
# Builds the project once more with AddressSanitizer + UndefinedBehaviorSanitizer
# (into build-asan) and runs the test suite there; any sanitizer report fails
# the run (the process aborts, the test fails, this script exits non-zero).
#
# Usage: bash scripts/sanitize.sh [extra ctest arguments]
# Environment: ASAN_BUILD_DIR (default <repo>/build-asan), JOBS (default nproc).
#
# What is left out, and why:
#  - LibTorch and the Python module (-DADACOMP_WITH_TORCH=OFF,
#    -DADACOMP_WITH_PYTHON=OFF): libtorch is not built with ASan, its
#    translation units take minutes to compile instrumented, its tests would
#    take far longer than the CI budget under ASan, and a Python extension
#    needs the ASan runtime preloaded into the interpreter. The torch-free
#    parts of the trainer (data readers, checkpoints) are still built and run.
#  - Benchmarks (-DADACOMP_BUILD_BENCH=OFF): not tests.
#  - The install/find_package consumer tests (adacomp_install_consumer and
#    readme_cpp_example, the README's C++ example): they build a separate
#    project against the installed, here instrumented, static libraries
#    without the sanitizer runtime, so they cannot link; they test packaging
#    and the README, which the normal build covers.
#  - experiments.rerun: the exchange-bytes experiment rerun through its config
#    and its report compared byte for byte; under ASan the instrumented
#    byte simulation to P = 1024 takes past the 10-minute limit, and the
#    counts themselves are tested by adacomp_exchange_test here.
#  - Leak detection for the MPI tests (label "mpi"): they run under ASan and
#    UBSan like the rest, but with detect_leaks=0, because OpenMPI's unloaded
#    components leave leak reports that cannot be suppressed (see pass 2
#    below). Every other test runs with detect_leaks=1.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/side_build.sh"
BUILD=${ASAN_BUILD_DIR:-$ROOT/build-asan}

# -O1 keeps the instrumented tests fast enough; assertions stay on (no NDEBUG).
side_build "$BUILD" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DADACOMP_SANITIZE=address,undefined \
  -DADACOMP_WITH_TORCH=OFF -DADACOMP_WITH_PYTHON=OFF -DADACOMP_BUILD_BENCH=OFF \
  -DADACOMP_BUILD_TESTS=ON

export ASAN_OPTIONS_BASE="abort_on_error=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

start=$(date +%s)
status=0
# Pass 1: everything but the MPI tests, with leak detection.
ASAN_OPTIONS="detect_leaks=1:$ASAN_OPTIONS_BASE" \
  ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 600 -LE mpi \
    -E '^(adacomp_install_consumer|readme_cpp_example|experiments\.rerun)$' "$@" || status=1
# Pass 2: the MPI tests (label "mpi"), memory errors still fatal but leak
# detection off. OpenMPI loads its components with dlopen and unloads them at
# exit; the ~110 KB they keep until then are reported by LeakSanitizer with
# frames in "<unknown module>", so suppressions by library name cannot match
# them (tried: leak:libopen-pal.so, leak:mca_, ... did not apply).
ASAN_OPTIONS="detect_leaks=0:$ASAN_OPTIONS_BASE" \
  ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 600 -L mpi "$@" || status=1
if [ $status -ne 0 ]; then
  echo "sanitize.sh: FAILED (see the reports above) after $(( $(date +%s) - start ))s" >&2
  exit 1
fi
echo "sanitize.sh: all tests passed under ASan+UBSan in $(( $(date +%s) - start ))s"
