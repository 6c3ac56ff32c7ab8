#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: the wire decoder and codecs, the
# reduce-scatter's messages, and the
# checkpoint / IDX / CIFAR-10 / text file readers) with clang-14 into
# build-fuzz and runs each for a bounded time, failing on any finding (crash, sanitizer report,
# property violation, timeout, too much memory).
#
# Usage: bash scripts/fuzz.sh [target...]      (default: all targets)
# Environment:
#   FUZZ_SECONDS      seconds per target (default 60)
#   FUZZ_BUILD_DIR    build folder (default <repo>/build-fuzz)
#   FUZZ_JOBS         build parallelism (default 2)
#   FUZZ_SAVE_REGRESSIONS=1  copy crash inputs into fuzz/regressions/<target>/
#
# The corpus libFuzzer grows is kept in $FUZZ_BUILD_DIR/corpus/<target> (the
# checked-in seeds in fuzz/corpus/<target> and the regression inputs are read
# only). Crash inputs land in $FUZZ_BUILD_DIR/artifacts/<target>/; reproduce one
# with  $FUZZ_BUILD_DIR/fuzz/<target> FILE  (or the <target>_replay program of a
# normal build), and keep it as a regression test by copying it into
# fuzz/regressions/<target>/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECS=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-2}
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(fuzz_decode fuzz_roundtrip fuzz_slices fuzz_checkpoint fuzz_idx fuzz_cifar fuzz_text)
fi

CXX_BIN=${FUZZ_CXX:-clang++-14}
C_BIN=${FUZZ_CC:-clang-14}
if ! command -v "$CXX_BIN" >/dev/null; then
  echo "fuzz.sh: $CXX_BIN not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

# Only the fuzz targets are built: the rest of the project (torch, MPI,
# Python, tests) is switched off so the clang configure stays small.
cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$C_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DADACOMP_FUZZ=ON -DADACOMP_BUILD_TESTS=OFF -DADACOMP_BUILD_BENCH=OFF \
  -DADACOMP_WITH_TORCH=OFF -DADACOMP_WITH_PYTHON=OFF -DADACOMP_WITH_MPI=OFF >/dev/null
cmake --build "$BUILD" --target "${TARGETS[@]}" -j"$JOBS"

# Per-target input size bound: decode inputs are frames (16 KiB covers
# thousands of elements of every codec and streams of several frames);
# roundtrip inputs are settings plus gradient bytes (a generator continues
# after the input, so 4 KiB is plenty); a CIFAR-10 record is 3073 bytes, so
# 8 KiB holds two; checkpoints, IDX and text files are fine in 4 KiB.
max_len_of() {
  case "$1" in
    fuzz_decode) echo 16384 ;;
    fuzz_cifar) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

status=0
summary=()
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  art="$BUILD/artifacts/$t"
  log="$BUILD/$t.log"
  mkdir -p "$work" "$art"
  seeds=("$ROOT/fuzz/corpus/$t")
  [ -d "$ROOT/fuzz/regressions/$t" ] && seeds+=("$ROOT/fuzz/regressions/$t")
  echo "== $t: ${SECS}s"
  set +e
  # -malloc_limit_mb: one allocation above 64 MiB is a finding (the decoder
  # must never size memory from an unchecked header; legitimate allocations
  # here are at most a few MiB; the file readers' buffers are sized by what
  # the input holds, never by a header field). -rss_limit_mb bounds the
  # whole process.
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=0 \
    "$BUILD/fuzz/$t" -max_total_time="$SECS" -max_len="$(max_len_of "$t")" \
    -rss_limit_mb=2048 -malloc_limit_mb=64 -timeout=20 -use_value_profile=1 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  if [ $rc -ne 0 ]; then
    status=1
    echo "!! $t FAILED (exit $rc); log: $log"
    grep -E 'ERROR|FUZZ_CHECK|runtime error|SUMMARY|Test unit written|artifact' "$log" | head -20
    if [ "${FUZZ_SAVE_REGRESSIONS:-0}" = 1 ]; then
      mkdir -p "$ROOT/fuzz/regressions/$t"
      cp -v "$art"/* "$ROOT/fuzz/regressions/$t/" || true
    fi
  fi
  summary+=("$t: ${execs:-?} executions in ${SECS}s, coverage ${cov:-?}, exit $rc")
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit $status
