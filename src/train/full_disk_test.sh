#!/usr/bin/env bash
# A disk that fills up while checkpointing (issue 15, item 5): `adacomp train`
# with --checkpoint-dir on a 16 MiB tmpfs that holds one checkpoint of this
# run (10.3 MB) but not two. The run must stop with exit status 1 and one
# error line naming the directory and the bytes needed; the first checkpoint
# must be intact, nothing may be left under a .tmp or a final name for the
# failed one, and resuming from the intact checkpoint (copied to a roomy
# directory) must end with the uninterrupted run's weights digest.
# Needs root to mount a tmpfs; otherwise it says so and is skipped (exit 77).
# Usage: full_disk_test.sh PATH/TO/adacomp
set -u
ADACOMP="$1"
TMP="$(mktemp -d)"
SMALL="$TMP/small"
mkdir -p "$SMALL"
cleanup() {
  mountpoint -q "$SMALL" && umount "$SMALL"
  rm -rf "$TMP"
}
trap cleanup EXIT
if ! mount -t tmpfs -o size=16m tmpfs "$SMALL" 2>"$TMP/mount.err"; then
  echo "SKIP: cannot mount a tmpfs here ($(head -c 200 "$TMP/mount.err")); needs root"
  exit 77
fi
fail=0
common=(--steps 12 --train-limit 1024 --test-limit 256 --checkpoint-every 4 --quiet)

"$ADACOMP" train "${common[@]}" --summary-out "$TMP/whole.json" >"$TMP/whole.out" 2>&1 ||
  { echo "FAIL: the uninterrupted run failed"; cat "$TMP/whole.out"; exit 1; }

"$ADACOMP" train "${common[@]}" --checkpoint-dir "$SMALL" >"$TMP/out" 2>"$TMP/err"
rc=$?
echo "full disk run: exit $rc; stderr:"; cat "$TMP/err"; ls -la "$SMALL"
if [ "$rc" != 1 ]; then echo "FAIL: expected exit status 1, got $rc"; fail=1; fi
if [ "$(grep -c 'error:' "$TMP/err")" != 1 ]; then echo "FAIL: expected one error line"; fail=1; fi
if ! grep -q "$SMALL: .*bytes needed, [0-9]* bytes free" "$TMP/err"; then
  echo "FAIL: the error does not name the directory and the bytes needed"; fail=1
fi
if [ "$(ls "$SMALL")" != "ckpt-0000000004.ckpt" ]; then
  echo "FAIL: expected only the step-4 checkpoint in $SMALL"; fail=1
fi

mkdir -p "$TMP/roomy"
cp "$SMALL"/ckpt-0000000004.ckpt "$TMP/roomy/"
"$ADACOMP" train "${common[@]}" --checkpoint-dir "$TMP/roomy" --resume \
  --summary-out "$TMP/resumed.json" >"$TMP/resumed.out" 2>&1 ||
  { echo "FAIL: resuming from the intact checkpoint failed"; cat "$TMP/resumed.out"; fail=1; }
digest() { grep -o '"weights_sha256": *"[0-9a-f]*"' "$1" | grep -o '[0-9a-f]\{64\}'; }
if [ -f "$TMP/resumed.json" ]; then
  grep -q '"resumed_from_step": 4' "$TMP/resumed.json" ||
    { echo "FAIL: the run did not resume from step 4"; fail=1; }
  a=$(digest "$TMP/whole.json"); b=$(digest "$TMP/resumed.json")
  echo "uninterrupted $a"; echo "resumed       $b"
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: digests differ"; fail=1; }
fi
[ "$fail" = 0 ] && echo "PASS"
exit $fail
