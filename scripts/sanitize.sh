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
#  - MPI tests run, with the leak reports of the OpenMPI libraries suppressed
#    (their one-time global allocations at init are reported as leaks at exit;
#    see the suppressions written below). Leaks in our own code still fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${ASAN_BUILD_DIR:-$ROOT/build-asan}
JOBS=${JOBS:-$(nproc)}
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi

# -O1 keeps the instrumented tests fast enough; assertions stay on (no NDEBUG).
cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DADACOMP_SANITIZE=address,undefined \
  -DADACOMP_WITH_TORCH=OFF -DADACOMP_WITH_PYTHON=OFF -DADACOMP_BUILD_BENCH=OFF \
  -DADACOMP_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS"

SUPP="$BUILD/lsan.supp"
cat >"$SUPP" <<'EOF'
# OpenMPI / PMIx / hwloc / libevent keep global state allocated until exit.
leak:libmpi.so
leak:libopen-pal.so
leak:libopen-rte.so
leak:libpmix.so
leak:libhwloc.so
leak:libevent
leak:mca_
EOF

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$SUPP:print_suppressions=0"

start=$(date +%s)
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 600 "$@"
echo "sanitize.sh: all tests passed under ASan+UBSan in $(( $(date +%s) - start ))s"
