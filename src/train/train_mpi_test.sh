#!/usr/bin/env bash
# `adacomp train` under mpirun (one learner per process) must end with exactly
# the weights of the same run with in-process learners, for P = 2 and P = 4,
# for AdaComp and dense; rank 0 alone writes the metrics (with the per-step
# time split) and the summary; and a checkpoint written under MPI resumes
# in-process to the uninterrupted run's digest.
# Usage: train_mpi_test.sh MPIRUN PATH/TO/adacomp
set -u
MPIRUN="$1"
ADACOMP="$2"
source "$(dirname "$0")/mpi_test_common.sh"  # skip check, $TMP, MPI_FLAGS
common=(--batch-size 32 --train-limit 512 --test-limit 200 -q)
fail=0
digest() { grep -o '"weights_sha256": "[0-9a-f]*"' "$1" 2>/dev/null | head -1 | grep -o '[0-9a-f]\{64\}'; }
# Every run is bounded: a hung job fails the test instead of stalling CI.
mpi() { timeout -k 5 120 "$MPIRUN" "${MPI_FLAGS[@]}" "$@"; }
inproc() { timeout -k 5 120 "$ADACOMP" "$@"; }

for np in 2 4; do
  for codec in adacomp dense; do
    extra=()
    if [ "$codec" = adacomp ]; then
      extra=(--log-every 2 --metrics-out "$TMP/m$np.jsonl")
    fi
    inproc train "${common[@]}" --learners "$np" --steps 6 --codec "$codec" \
      --summary-out "$TMP/in.json" >/dev/null 2>"$TMP/err" \
      || { echo "FAIL: in-process run (P=$np, $codec)"; cat "$TMP/err"; fail=1; }
    rm -f "$TMP/mpi.json"
    mpi -np "$np" "$ADACOMP" train "${common[@]}" --steps 6 --codec "$codec" "${extra[@]}" \
      --summary-out "$TMP/mpi.json" >"$TMP/out" 2>"$TMP/err" \
      || { echo "FAIL: mpirun -np $np run ($codec)"; cat "$TMP/out" "$TMP/err"; fail=1; }
    a=$(digest "$TMP/in.json"); b=$(digest "$TMP/mpi.json")
    if [ -z "$a" ] || [ "$a" != "$b" ]; then
      echo "FAIL: P=$np $codec: in-process $a, MPI $b"; fail=1
    else
      echo "ok: P=$np $codec: MPI run equals in-process run ($a)"
    fi
    if [ "$codec" != adacomp ]; then continue; fi

    # Rank 0 alone writes: one summary table, one metrics line per logged
    # step (steps 2, 4, 6), each with the five-phase time split.
    n=$(grep -c '== adacomp train summary ==' "$TMP/out")
    [ "$n" = 1 ] || { echo "FAIL: P=$np: $n summary tables on stdout (want 1)"; fail=1; }
    grep -Eq 'per learner +compute [0-9.]+ s, compress [0-9.]+ s, communicate [0-9.]+ s, decompress [0-9.]+ s, update [0-9.]+ s' \
      "$TMP/out" || { echo "FAIL: P=$np: no per-phase timing in the summary table"; fail=1; }
    for key in compute compress communicate decompress update; do
      grep -Eq "\"${key}_seconds\": [0-9]" "$TMP/mpi.json" \
        || { echo "FAIL: P=$np: ${key}_seconds missing from --summary-out"; fail=1; }
    done
    lines=$(wc -l <"$TMP/m$np.jsonl" 2>/dev/null || echo 0)
    steps=$(grep -o '"step":[0-9]*,"time"' "$TMP/m$np.jsonl" 2>/dev/null | tr -dc '0-9\n' | paste -sd, -)
    timed=$(grep -cE '"time":\{"communicate":[0-9.e-]+,"compress":[0-9.e-]+,"compute":[0-9.e-]+,"decompress":[0-9.e-]+,"step":[0-9.e-]+,"update":[0-9.e-]+\}' \
      "$TMP/m$np.jsonl" 2>/dev/null)
    if [ "$lines" != 3 ] || [ "$steps" != "2,4,6" ] || [ "$timed" != 3 ]; then
      echo "FAIL: P=$np: --metrics-out has $lines lines (steps $steps, $timed with the time split); want 3 (2,4,6)"
      cat "$TMP/m$np.jsonl"; fail=1
    else
      echo "ok: P=$np: rank 0 alone wrote the metrics (steps $steps) with compute/compress/communicate/decompress/update times"
    fi
  done
done

# --codec auto under MPI: with one timed step a probe, steps 1-2 are dense and
# 3-4 AdaComp whatever the times (the choice comes at step 5), so 4 steps
# must end on the in-process run's weights, and both say so.
auto=(--batch-size 32 --train-limit 512 --test-limit 200 --steps 4 --codec auto
      --auto-probe-steps 1)
inproc train "${auto[@]}" --learners 2 --summary-out "$TMP/auto_in.json" >/dev/null 2>"$TMP/err" \
  || { echo "FAIL: in-process --codec auto run"; cat "$TMP/err"; fail=1; }
mpi -np 2 "$ADACOMP" train "${auto[@]}" --summary-out "$TMP/auto_mpi.json" >"$TMP/out" 2>"$TMP/err" \
  || { echo "FAIL: mpirun --codec auto run"; cat "$TMP/out" "$TMP/err"; fail=1; }
a=$(digest "$TMP/auto_in.json"); b=$(digest "$TMP/auto_mpi.json")
counts() { tr -d ' \n' <"$1" | grep -o '"auto":{[^}]*}' | grep -o '"[a-z_]*_steps":[0-9]*' | sort | paste -sd, -; }
ca=$(counts "$TMP/auto_in.json"); cb=$(counts "$TMP/auto_mpi.json")
if [ -z "$a" ] || [ "$a" != "$b" ] || [ "$ca" != '"codec_steps":2,"dense_steps":2' ] || [ "$ca" != "$cb" ]; then
  echo "FAIL: --codec auto: in-process $a ($ca), MPI $b ($cb); want equal, 2 dense and 2 codec steps"
  fail=1
else
  echo "ok: --codec auto: MPI run equals in-process run ($a; $ca)"
fi

# A bin-size ramp and the reduce-scatter exchange under MPI (3 ranks): the
# same weights as the in-process all-gather with the same ramp.
sched=(--batch-size 48 --train-limit 512 --test-limit 200 -q --steps 6 --ramp-steps 4 --ramp-start 4
       --ramp-stages 2)
inproc train --learners 3 "${sched[@]}" --summary-out "$TMP/rs_in.json" \
  >/dev/null 2>"$TMP/err" || { echo "FAIL: in-process ramp run"; cat "$TMP/err"; fail=1; }
rm -f "$TMP/rs_mpi.json"
mpi -np 3 "$ADACOMP" train "${sched[@]}" --exchange reduce-scatter \
  --summary-out "$TMP/rs_mpi.json" >"$TMP/out" 2>"$TMP/err" \
  || { echo "FAIL: mpirun reduce-scatter ramp run"; cat "$TMP/out" "$TMP/err"; fail=1; }
a=$(digest "$TMP/rs_in.json"); b=$(digest "$TMP/rs_mpi.json")
if [ -z "$a" ] || [ "$a" != "$b" ] || ! grep -q '"exchange": "reduce-scatter"' "$TMP/rs_mpi.json"; then
  echo "FAIL: ramp + reduce-scatter under MPI $b, in-process all-gather $a"; fail=1
else
  echo "ok: ramp + reduce-scatter under MPI equals the in-process all-gather ($a)"
fi

# The non-finite-gradient policy is the same under MPI: learner 1's gradient
# of tensor 3 is made NaN at step 3 (0-based 2); the step is skipped on every
# rank, a warning names it, and the weights equal the in-process run's.
inproc train "${common[@]}" --learners 2 --steps 6 --inject-nan 2:1:3 \
  --summary-out "$TMP/nan_in.json" >/dev/null 2>"$TMP/nan_in.err" \
  || { echo "FAIL: in-process NaN run"; cat "$TMP/nan_in.err"; fail=1; }
rm -f "$TMP/nan_mpi.json"
mpi -np 2 "$ADACOMP" train "${common[@]}" --steps 6 --inject-nan 2:1:3 \
  --summary-out "$TMP/nan_mpi.json" >"$TMP/out" 2>"$TMP/nan_mpi.err" \
  || { echo "FAIL: mpirun NaN run"; cat "$TMP/out" "$TMP/nan_mpi.err"; fail=1; }
a=$(digest "$TMP/nan_in.json"); b=$(digest "$TMP/nan_mpi.json")
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: NaN step: in-process $a, MPI $b"; fail=1
elif ! grep -q '"skipped_steps": 1' "$TMP/nan_mpi.json"; then
  echo "FAIL: NaN step: the MPI summary does not report 1 skipped step"; grep skipped "$TMP/nan_mpi.json"; fail=1
elif ! grep -q 'non-finite gradient' "$TMP/nan_mpi.err" "$TMP/out"; then
  echo "FAIL: NaN step: no warning under MPI"; cat "$TMP/nan_mpi.err"; fail=1
else
  echo "ok: a non-finite gradient skips the step under MPI exactly as in-process ($a)"
fi

# Interrupted under MPI after a checkpoint, resumed in-process: same digest.
mpi -np 2 "$ADACOMP" train "${common[@]}" --steps 6 --checkpoint-dir "$TMP/ck" \
  --checkpoint-every 3 --stop-after-steps 4 >/dev/null 2>"$TMP/err" \
  || { echo "FAIL: mpirun checkpoint run"; cat "$TMP/err"; fail=1; }
inproc train "${common[@]}" --learners 2 --steps 6 --checkpoint-dir "$TMP/ck" --resume \
  --summary-out "$TMP/res.json" >/dev/null 2>"$TMP/err" \
  || { echo "FAIL: resume"; cat "$TMP/err"; fail=1; }
inproc train "${common[@]}" --learners 2 --steps 6 --summary-out "$TMP/full.json" >/dev/null 2>&1
a=$(digest "$TMP/full.json"); b=$(digest "$TMP/res.json")
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: MPI checkpoint resumed in-process: $b, uninterrupted $a"; fail=1
elif ! grep -q '"resumed_from_step": 3' "$TMP/res.json"; then
  echo "FAIL: the resumed run did not start from the step-3 checkpoint"; fail=1
else
  echo "ok: checkpoint written under MPI resumes in-process to the same digest"
fi
exit $fail
