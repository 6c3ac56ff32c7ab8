#!/usr/bin/env bash
# `adacomp train` under mpirun (one learner per process) must end with exactly
# the weights of the same run with in-process learners, for AdaComp and dense,
# and resume across the two.
# Usage: train_mpi_test.sh MPIRUN PATH/TO/adacomp
set -u
MPIRUN="$1"
ADACOMP="$2"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: Fashion-MNIST not installed"; exit 0
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
MPI_FLAGS=(--oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader
           --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo)
common=(--learners 2 --batch-size 32 --train-limit 512 --test-limit 200 -q)
fail=0
digest() { grep '"weights_sha256"' "$1" | head -1; }

for codec in adacomp dense; do
  "$ADACOMP" train "${common[@]}" --steps 6 --compressor "$codec" --summary-out "$TMP/in.json" \
    >/dev/null 2>"$TMP/err" || { echo "FAIL: in-process run"; cat "$TMP/err"; fail=1; }
  "$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$ADACOMP" train "${common[@]}" --steps 6 --compressor "$codec" \
    --summary-out "$TMP/mpi.json" >"$TMP/out" 2>"$TMP/err" \
    || { echo "FAIL: mpirun run ($codec)"; cat "$TMP/out" "$TMP/err"; fail=1; }
  a=$(digest "$TMP/in.json"); b=$(digest "$TMP/mpi.json")
  if [ -z "$a" ] || [ "$a" != "$b" ]; then
    echo "FAIL: $codec: in-process $a, MPI $b"; fail=1
  else
    echo "ok: $codec: MPI run equals in-process run ($a)"
  fi
done

# Interrupted under MPI after a checkpoint, resumed in-process: same digest.
"$MPIRUN" "${MPI_FLAGS[@]}" -np 2 "$ADACOMP" train "${common[@]}" --steps 6 --checkpoint-dir "$TMP/ck" \
  --checkpoint-every 3 --stop-after-steps 4 >/dev/null 2>"$TMP/err" \
  || { echo "FAIL: mpirun checkpoint run"; cat "$TMP/err"; fail=1; }
"$ADACOMP" train "${common[@]}" --steps 6 --checkpoint-dir "$TMP/ck" --resume \
  --summary-out "$TMP/res.json" >/dev/null 2>"$TMP/err" \
  || { echo "FAIL: resume"; cat "$TMP/err"; fail=1; }
"$ADACOMP" train "${common[@]}" --steps 6 --summary-out "$TMP/full.json" >/dev/null 2>&1
a=$(digest "$TMP/full.json"); b=$(digest "$TMP/res.json")
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: MPI checkpoint resumed in-process: $b, uninterrupted $a"; fail=1
else
  echo "ok: checkpoint written under MPI resumes in-process to the same digest"
fi
exit $fail
