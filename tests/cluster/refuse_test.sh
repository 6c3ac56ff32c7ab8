#!/usr/bin/env bash
# scripts/cluster.sh refuses with one clear line and exit 77 when it cannot
# create namespaces: here, run as a user other than root (as root, the test
# drops to nobody with setpriv). Bad arguments exit 2 before touching anything.
# Usage: refuse_test.sh PATH/TO/cluster.sh
set -u
CLUSTER="$1"
fail=0
as_user() {
  if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null 2>&1 || { echo "skip: root without setpriv"; exit 77; }
    timeout -k 2 20 setpriv --reuid=65534 --regid=65534 --clear-groups bash "$CLUSTER" --name ctrefuse "$@"
  else
    timeout -k 2 20 bash "$CLUSTER" --name ctrefuse "$@"
  fi
}
for cmd in "up 2" "down" "status" "run --mpi -- true"; do
  # shellcheck disable=SC2086
  out=$(as_user $cmd 2>&1); rc=$?
  lines=$(printf '%s\n' "$out" | grep -c .)
  if [ "$rc" != 77 ] || [ "$lines" != 1 ] || [[ "$out" != *"needs root"* ]]; then
    echo "FAIL: '$cmd' as non-root: exit $rc, $lines lines: $out"; fail=1
  else
    echo "ok: '$cmd' as non-root: exit 77, '$out'"
  fi
done
for args in "--name ab1 status" "up 0" "up 2 --rate fast" "up 2 --loss 150" "run --bogus" "frobnicate"; do
  # shellcheck disable=SC2086
  out=$(timeout -k 2 20 bash "$CLUSTER" $args 2>&1); rc=$?
  if [ "$rc" != 2 ]; then echo "FAIL: '$args': exit $rc (want 2): $out"; fail=1
  else echo "ok: '$args': exit 2 ($(printf '%s\n' "$out" | head -1))"; fi
done
exit $fail
