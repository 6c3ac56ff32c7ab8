#!/usr/bin/env bash
# Runs adacomp_comm_mpi_failure under mpirun and checks how the job ends.
# Usage: mpi_failure_test.sh MPIRUN NP PROGRAM MODE MAX_SECONDS zero|nonzero REGEX...
# MODE is the program's arguments joined by commas (e.g. stop,120,4).
# Passes when mpirun ends within MAX_SECONDS, its exit status is as expected,
# and its output matches every REGEX (grep -E). A hung job is killed after
# MAX_SECONDS + 30 s and fails the test.
set -u
if [ $# -lt 6 ]; then
  echo "usage: $0 MPIRUN NP PROGRAM MODE MAX_SECONDS zero|nonzero REGEX..." >&2
  exit 2
fi
mpirun=$1 np=$2 program=$3 mode=$4 max_seconds=$5 expect=$6
shift 6
out=$(mktemp)
trap 'rm -f "$out"' EXIT

IFS=, read -ra margs <<<"$mode"
start=$(date +%s.%N)
# The same flags as the collective tests (src/comm/CMakeLists.txt).
timeout -k 5 $((max_seconds + 30)) "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
  --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo \
  -np "$np" "$program" "${margs[@]}" >"$out" 2>&1
rc=$?
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')

cat "$out"
echo "mpi_failure_test: mode=$mode np=$np exit=$rc elapsed=${elapsed}s (limit ${max_seconds}s)"
failed=0
if awk -v e="$elapsed" -v m="$max_seconds" 'BEGIN { exit !(e > m) }'; then
  echo "FAIL: the job took ${elapsed}s, more than ${max_seconds}s"
  failed=1
fi
if [ "$expect" = zero ] && [ "$rc" -ne 0 ]; then
  echo "FAIL: expected exit status 0, got $rc"
  failed=1
fi
if [ "$expect" = nonzero ] && [ "$rc" -eq 0 ]; then
  echo "FAIL: expected a non-zero exit status, got 0"
  failed=1
fi
for re in "$@"; do
  if ! grep -Eq -- "$re" "$out"; then
    echo "FAIL: the output does not match /$re/"
    failed=1
  fi
done
exit $failed
