#!/usr/bin/env bash
# Failure under mpirun (issue 4): when a rank dies or a frame fails to decode,
# the whole `adacomp train` job must end within MAX_S seconds with a non-zero
# status and a message naming the rank and the cause, and the last checkpoint
# must stay usable.
#  1. rank 1 of 2 is SIGKILLed at step 5 (checkpoints every 2 steps): the job
#     ends, mpirun names rank 1 and signal 9; the run then resumes under MPI
#     from the step-4 checkpoint to the uninterrupted run's digest.
#  2. rank 0 of 4 (the checkpoint writer) is SIGKILLed at step 3, right after
#     writing the step-3 checkpoint: the job ends; that checkpoint resumes.
#  3. rank 2 of 4 flips one byte of its message at step 3: every rank fails
#     to decode it and the job ends with "Corruption: learner 2's frame ...".
#  4. the same corruption with 2 in-process learners: exit status 1, message.
#  5. rank 1 of 2 cannot read the data: the job ends naming rank 1 and why.
#  6. rank 1 of 2 freezes (SIGSTOP): the heartbeat names it within its limit
#     though collectives may wait 600 s; the run resumes to the same digest.
#  7. rank 1 of 2 is slow (9 s steps, heartbeat limit 4 s): not taken for dead.
#  8. the ranks are given different --mpi-heartbeat values: refused at start-up.
# The hooks (--test-kill-rank, --test-corrupt-frame) print the wall-clock time
# at which they act; the test reports how long the job took to stop after it.
# Usage: train_mpi_failure_test.sh MPIRUN PATH/TO/adacomp [MAX_S]
set -u
MPIRUN="$1"
ADACOMP="$2"
MAX_S="${3:-30}"
source "$(dirname "$0")/mpi_test_common.sh"  # skip check, $TMP, MPI_FLAGS
common=(--batch-size 32 --train-limit 512 --test-limit 200 -q --steps 8)
fail=0
last_rc=0
digest() { grep -o '"weights_sha256": "[0-9a-f]*"' "$1" 2>/dev/null | head -1 | grep -o '[0-9a-f]\{64\}'; }
now() { date +%s.%N; }
# Seconds from the hook's "(t=...)" line in $1 to the time $2.
since_hook() {
  local t
  t=$(grep -o 'test hook: .*(t=[0-9.]*)' "$1" | head -1 | sed 's/.*(t=\([0-9.]*\))/\1/')
  if [ -z "$t" ]; then echo "?"; return; fi
  awk -v a="$t" -v b="$2" 'BEGIN { printf "%.2f", b - a }'
}

# run_failing NAME NP ARGS...: an mpirun job that must fail within MAX_S s.
# Leaves the combined output in $TMP/NAME.out.
run_failing() {
  local name=$1 np=$2
  shift 2
  local start end rc
  start=$(now)
  # A hang is cut off at MAX_S + 30 s and fails the test below.
  timeout -k 5 $((MAX_S + 30)) "$MPIRUN" "${MPI_FLAGS[@]}" -np "$np" "$ADACOMP" train "$@" \
    >"$TMP/$name.out" 2>&1
  rc=$?
  last_rc=$rc
  end=$(now)
  local total after
  total=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  after=$(since_hook "$TMP/$name.out" "$end")
  echo "$name: exit status $rc, job ${total}s in all, stopped ${after}s after the hook acted"
  if [ "$rc" -eq 0 ]; then
    echo "FAIL: $name: the job succeeded"; fail=1
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 -a "${total%.*}" -ge "$MAX_S" ]; then
    echo "FAIL: $name: the job hung (cut off by timeout)"; fail=1
  fi
  if [ "$after" = "?" ]; then
    echo "FAIL: $name: the test hook did not act"; fail=1
  elif awk -v e="$after" -v m="$MAX_S" 'BEGIN { exit !(e > m) }'; then
    echo "FAIL: $name: the job took ${after}s to stop, more than ${MAX_S}s"; fail=1
  fi
}

# expect NAME REGEX: the output of NAME matches REGEX (grep -E).
expect() {
  if ! grep -Eq -- "$2" "$TMP/$1.out"; then
    echo "FAIL: $1: the output does not match /$2/"; fail=1
    sed 's/^/  | /' "$TMP/$1.out"
  fi
}

# resume_under_mpi NAME CKDIR STEP WHAT: 2 ranks resume from CKDIR, which must
# pick the step-STEP checkpoint and end with the uninterrupted run's digest.
resume_under_mpi() {
  local name=$1 dir=$2 step=$3 what=$4
  timeout -k 5 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$ADACOMP" train "${common[@]}" \
    --checkpoint-dir "$dir" --resume --summary-out "$TMP/$name.res.json" >"$TMP/$name.res.out" 2>&1 \
    || { echo "FAIL: $name: resuming under mpirun failed"; cat "$TMP/$name.res.out"; fail=1; }
  local a b
  a=$(digest "$TMP/full2.json"); b=$(digest "$TMP/$name.res.json")
  if [ -z "$a" ] || [ "$a" != "$b" ] || ! grep -q "\"resumed_from_step\": $step" "$TMP/$name.res.json"; then
    echo "FAIL: $name: resumed from step $step under MPI: $b; uninterrupted: $a"; fail=1
  else
    echo "ok: $name: $what; the step-$step checkpoint resumes under MPI to the uninterrupted digest"
  fi
}

# The uninterrupted run, for the resumed runs' digests.
timeout -k 5 120 "$ADACOMP" train "${common[@]}" --learners 2 --summary-out "$TMP/full2.json" \
  >/dev/null 2>&1
timeout -k 5 120 "$ADACOMP" train "${common[@]}" --learners 4 --summary-out "$TMP/full4.json" \
  >/dev/null 2>&1

# 1. A non-writer rank dies.
run_failing kill1 2 "${common[@]}" --checkpoint-dir "$TMP/ck1" --checkpoint-every 2 \
  --test-kill-rank 1:5
expect kill1 'rank 1 .*(signal 9|Killed)'
ls "$TMP/ck1"/ckpt-0000000004.ckpt >/dev/null 2>&1 \
  || { echo "FAIL: kill1: no step-4 checkpoint"; ls -la "$TMP/ck1"; fail=1; }
ls "$TMP/ck1" | grep -v '^ckpt-[0-9]*\.ckpt$' | grep -q . \
  && { echo "FAIL: kill1: stray files in the checkpoint directory"; ls -la "$TMP/ck1"; fail=1; }
resume_under_mpi kill1 "$TMP/ck1" 4 "rank 1 killed"

# 2. The writer (rank 0) dies right after writing a checkpoint.
run_failing kill0 4 "${common[@]}" --checkpoint-dir "$TMP/ck0" --checkpoint-every 3 \
  --test-kill-rank 0:3
expect kill0 'rank 0 .*(signal 9|Killed)'
timeout -k 5 120 "$ADACOMP" train "${common[@]}" --learners 4 --checkpoint-dir "$TMP/ck0" \
  --resume --summary-out "$TMP/res0.json" >"$TMP/res0.out" 2>&1 \
  || { echo "FAIL: kill0: resuming in-process failed"; cat "$TMP/res0.out"; fail=1; }
a=$(digest "$TMP/full4.json"); b=$(digest "$TMP/res0.json")
if [ -z "$a" ] || [ "$a" != "$b" ] || ! grep -q '"resumed_from_step": 3' "$TMP/res0.json"; then
  echo "FAIL: kill0: resumed from step 3 in-process: $b; uninterrupted: $a"; fail=1
else
  echo "ok: kill0: rank 0 killed; the step-3 checkpoint resumes in-process to the uninterrupted digest"
fi

# 3. A frame fails to decode on every rank.
run_failing corrupt 4 "${common[@]}" --test-corrupt-frame 2:3
expect corrupt "rank [0-3] of 4 aborts the MPI job: Corruption: learner 2's frame for tensor [0-9]+ .*checksum mismatch"
# MPI_Abort(comm, 1) makes mpirun exit 1. OpenMPI's own "MPI_ABORT was
# invoked" banner is not checked: when the four ranks abort at once its
# daemon can garble the aggregated help text ("Data unpack would read past
# end of buffer") and print no banner at all; our line above is the contract.
if [ "$last_rc" -ne 1 ]; then
  echo "FAIL: corrupt: mpirun exited $last_rc, not the abort code 1"; fail=1
fi
grep -q 'test hook: learner 2 flips one byte' "$TMP/corrupt.out" \
  && ! grep -q '== adacomp train summary ==' "$TMP/corrupt.out" \
  && echo "ok: corrupt: the job stopped, naming learner 2 and the Corruption"

# 4. The same in-process.
timeout -k 5 120 "$ADACOMP" train "${common[@]}" --learners 2 --test-corrupt-frame 1:3 \
  >"$TMP/corrupt_in.out" 2>&1
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "FAIL: corrupt_in: exit status $rc, want 1"; fail=1
fi
expect corrupt_in "error: learner 1's frame for tensor [0-9]+ .*checksum mismatch"
[ "$rc" -eq 1 ] && echo "ok: corrupt_in: in-process learners stop with exit status 1 naming learner 1"

# 5. One rank cannot read its data (a host without the data set): it says so,
#    and the job ends naming it. Rank 1's leaving and rank 0's waiting in the
#    first broadcast meet in one header exchange, after which both know that
#    rank 1 left; whichever aborts first, mpirun then ends the other, so
#    either rank's abort line may be the one printed (both name rank 1).
start=$(now)
timeout -k 5 $((MAX_S + 30)) "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 bash -c \
  'd=/usr/share/datasets/fashion-mnist; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && d="$0/no-data"; exec "$@" --data-dir "$d"' \
  "$TMP" "$ADACOMP" train "${common[@]}" >"$TMP/nodata.out" 2>&1
rc=$?
took=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
echo "nodata: exit status $rc, job ${took}s in all"
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "${took%.*}" -ge "$MAX_S" ]; then
  echo "FAIL: nodata: the job did not fail promptly"; fail=1
fi
expect nodata "rank 1 of 2: .*no-data"
expect nodata 'rank [01] of 2 aborts the MPI job: .*rank 1 left the job'

# 6. A rank freezes (SIGSTOP: its heartbeat stops too) while collectives may
#    wait 600 s: the heartbeat (4 s here) names it and the job ends; the
#    last checkpoint resumes to the uninterrupted digest.
run_failing stop1 2 "${common[@]}" --checkpoint-dir "$TMP/ck6" --checkpoint-every 2 \
  --mpi-heartbeat 4 --mpi-timeout 600 --test-stop-rank 1:5
expect stop1 'rank 0 of 2 aborts the MPI job: Unavailable: .*rank 1 \(host [^)]+\) sent no heartbeat for [0-9.]+ s \(limit 4 s\)'
resume_under_mpi stop1 "$TMP/ck6" 4 "a frozen rank 1 named by the heartbeat"

# 7. A slow rank (9 s steps, over twice the 4 s heartbeat limit) keeps
#    beating: it is waited for, not taken for dead.
short=("${common[@]/#8/2}")  # --steps 2
timeout -k 5 120 "$ADACOMP" train "${short[@]}" --learners 2 \
  --summary-out "$TMP/full2s.json" >/dev/null 2>&1
start=$(now)
timeout -k 5 120 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$ADACOMP" train "${short[@]}" \
  --mpi-heartbeat 4 --test-slow-rank 1:9000 --summary-out "$TMP/slow.json" >"$TMP/slow.out" 2>&1
rc=$?
took=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
a=$(digest "$TMP/full2s.json"); b=$(digest "$TMP/slow.json")
if [ "$rc" -ne 0 ] || [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: slow: exit status $rc after ${took}s, digest $b, want $a"; sed 's/^/  | /' "$TMP/slow.out"
  fail=1
else
  echo "ok: slow: two 9 s steps on rank 1 (heartbeat limit 4 s) finished in ${took}s with the in-process digest"
fi

# 8. Ranks given different heartbeat limits: every rank refuses at start-up,
#    saying so, instead of one taking the other for dead later.
timeout -k 5 60 "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 bash -c \
  'h=20; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && h=5; exec "$@" --mpi-heartbeat "$h"' \
  "$TMP" "$ADACOMP" train "${short[@]}" >"$TMP/beats.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
  echo "FAIL: beats: exit status $rc, want a prompt failure"; fail=1
fi
expect beats "heartbeat limits differ \(from 5 to 20 s\)"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo "ok: beats: different --mpi-heartbeat values are refused at start-up"

[ "$fail" = 0 ] && echo "all failure checks passed"
exit $fail
