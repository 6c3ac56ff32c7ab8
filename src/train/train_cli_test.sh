#!/usr/bin/env bash
# End-to-end checks of `adacomp train` as a user runs it: exit status 2 with
# one line for bad options, 1 naming the file for bad data, 0 and a valid
# summary for a short run, and the same weights digest for --threads 1 and 2.
# Usage: train_cli_test.sh PATH/TO/adacomp
set -u
ADACOMP="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0

expect() {  # expect CODE PATTERN -- args...
  local code="$1" pattern="$2"
  shift 3
  "$ADACOMP" train "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL: adacomp train $* exited $got, expected $code"; cat "$TMP/err"; fail=1; return
  fi
  if [ "$code" != 0 ]; then
    if [ "$(wc -l <"$TMP/err")" != 1 ]; then
      echo "FAIL: adacomp train $*: expected a one-line error"; cat "$TMP/err"; fail=1
    fi
    if ! grep -q -- "$pattern" "$TMP/err"; then
      echo "FAIL: adacomp train $*: error lacks '$pattern'"; cat "$TMP/err"; fail=1
    fi
  fi
  echo "ok: exit $got: adacomp train $*"
}

expect 2 "not a multiple of --learners 4" -- --batch-size 30 --learners 4
expect 2 "unknown 'zip'" -- --compressor zip
expect 2 "resnet" -- --model resnet
expect 2 "" -- --epochs 2 --steps 3
expect 2 "--checkpoint-dir" -- --resume
expect 2 "STEP:LEARNER:TENSOR" -- --inject-nan 3
expect 2 "unknown layer type 'gru'" -- --bin-sizes conv=50,gru=10
expect 2 "'conv' is not TYPE=L_T" -- --bin-sizes conv
expect 2 "L_T of fc must be between 1" -- --bin-sizes fc=0
expect 2 "--dense-below must be >= 0" -- --dense-below -3
expect 2 "--lr-warmup-steps must be >= 0" -- --lr-warmup-steps -1
expect 1 "/nonexistent/dir" -- --data-dir /nonexistent/dir --steps 1
expect 2 "--local-optimizer with SGD needs --momentum > 0" -- --local-optimizer --momentum 0
expect 2 "--local-optimizer-types: unknown layer type 'dense'" -- --local-optimizer-types fc,dense
expect 1 "mnist-cnn has no tensor of those layer types" -- --local-optimizer-types lstm --steps 1

# A malformed IDX file is named.
mkdir -p "$TMP/bad"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$TMP/bad/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02' >"$TMP/bad/train-labels-idx1-ubyte"
expect 1 "train-images-idx3-ubyte: truncated" -- --data-dir "$TMP/bad" --steps 1

if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  common=(--steps 4 --batch-size 32 --train-limit 512 --test-limit 200 --log-every 2 -q)
  expect 0 "" -- "${common[@]}" --threads 1 --summary-out "$TMP/s1.json" --metrics-out "$TMP/m.jsonl"
  expect 0 "" -- "${common[@]}" --threads 2 --summary-out "$TMP/s2.json"
  d1=$(grep '"weights_sha256"' "$TMP/s1.json")
  d2=$(grep '"weights_sha256"' "$TMP/s2.json")
  if [ -z "$d1" ] || [ "$d1" != "$d2" ]; then
    echo "FAIL: --threads 1 and 2 give different digests: $d1 / $d2"; fail=1
  fi
  for key in test_accuracy compression_rate end_to_end wall_seconds compress_seconds weights_sha256; do
    grep -q "\"$key\"" "$TMP/s1.json" || { echo "FAIL: summary lacks $key"; fail=1; }
  done
  [ "$(wc -l <"$TMP/m.jsonl")" = 2 ] || { echo "FAIL: expected 2 metrics lines"; fail=1; }
  grep -q "replicas *bit-identical" "$TMP/out" || { echo "FAIL: no summary table"; fail=1; }
  # --momentum-correction is the SGD name of --local-optimizer: the same run.
  expect 0 "" -- "${common[@]}" --local-optimizer --summary-out "$TMP/l1.json"
  expect 0 "" -- "${common[@]}" --momentum-correction --summary-out "$TMP/l2.json"
  l1=$(grep '"weights_sha256"' "$TMP/l1.json")
  l2=$(grep '"weights_sha256"' "$TMP/l2.json")
  if [ -z "$l1" ] || [ "$l1" != "$l2" ] || [ "$l1" = "$d1" ]; then
    echo "FAIL: --local-optimizer ($l1), --momentum-correction ($l2), default ($d1)"; fail=1
  fi
  grep -q '"local_optimizer": true' "$TMP/l1.json" || { echo "FAIL: summary lacks local_optimizer"; fail=1; }
  # --local-optimizer-types implies the local optimizer, for those tensors only.
  expect 0 "" -- "${common[@]}" --local-optimizer-types fc --summary-out "$TMP/l3.json"
  l3=$(grep '"weights_sha256"' "$TMP/l3.json")
  if [ -z "$l3" ] || [ "$l3" = "$l1" ] || [ "$l3" = "$d1" ]; then
    echo "FAIL: --local-optimizer-types fc ($l3) is --local-optimizer ($l1) or the default ($d1)"
    fail=1
  fi
  tr -d ' \n' <"$TMP/l3.json" | grep -q '"local_optimizer_types":\["fc"\]' ||
    { echo "FAIL: summary lacks local_optimizer_types [fc]"; fail=1; }
else
  echo "skip: Fashion-MNIST not installed"
fi
exit $fail
