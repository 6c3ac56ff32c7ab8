#!/usr/bin/env bash
# scripts/cluster.sh end to end: a 2-host cluster (network namespaces, a
# bridge, veth pairs, 100 Mbit/s tbf both ways) runs 20 steps of `adacomp
# train` under mpirun, one rank per host over TCP; the weights digest equals
# the in-process run's (--learners 2); the bytes counted on the hosts'
# interfaces are at least the frame bytes the trainer reports; nothing of the
# cluster appears in the root namespace; `run --each` gives every host its
# RANK and fails when one host fails; `down` leaves no namespace, veth or
# bridge behind. Exit 77 (ctest SKIP_RETURN_CODE) where namespaces cannot
# be made or the data set is missing.
# Usage: cluster_test.sh PATH/TO/cluster.sh PATH/TO/adacomp
set -u
CLUSTER="$1"
ADACOMP="$2"
PREFIX=c
source "$(dirname "$0")/common.sh"  # skip check, NAME, TMP, c, cleanup, fail=0
common=(--batch-size 32 --train-limit 512 --test-limit 200 -q --steps 20)

root_links() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }
our_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}([0-9]+|-br)\$"; }
root_links >"$TMP/links_before"

c up 2 --rate 100mbit >"$TMP/up" 2>&1
rc=$?
if [ "$rc" = 77 ]; then
  echo "skip: $(cat "$TMP/up")"; exit 77
elif [ "$rc" != 0 ]; then
  echo "FAIL: cluster.sh up 2 --rate 100mbit (exit $rc)"; cat "$TMP/up"; exit 1
fi
echo "ok: $(cat "$TMP/up")"

# Nothing in the root namespace: no new interface, no 10.213 address.
root_links >"$TMP/links_up"
if ! cmp -s "$TMP/links_before" "$TMP/links_up"; then
  echo "FAIL: the root namespace's interfaces changed while the cluster is up:"
  diff "$TMP/links_before" "$TMP/links_up"; fail=1
elif ip -o addr show | grep -q ' 10\.213\.'; then
  echo "FAIL: a cluster address is in the root namespace"; fail=1
else
  echo "ok: the root namespace has no cluster interface or address"
fi
# Shaped both ways: tbf 100 Mbit/s on each host's eth0 and on its bridge port.
c status >"$TMP/status" 2>&1
n=$(grep -c 'tbf rate 100Mbit' "$TMP/status")
[ "$n" = 4 ] || { echo "FAIL: want 4 tbf 100Mbit qdiscs (2 hosts x 2 directions), got $n"; cat "$TMP/status"; fail=1; }

# One command per host: RANK/WORLD_SIZE/MASTER_ADDR, and failure propagates.
c run --each --timeout 20 -- sh -c 'echo "$RANK/$WORLD_SIZE $MASTER_ADDR $CLUSTER_HOST_ADDR $(hostname)"' \
  >"$TMP/each" 2>&1
if [ "$(sort "$TMP/each" | tr '\n' ,)" != "0/2 10.213.0.1 10.213.0.1 ${NAME}0,1/2 10.213.0.1 10.213.0.2 ${NAME}1," ]; then
  echo "FAIL: run --each:"; cat "$TMP/each"; fail=1
elif c run --each --timeout 20 -- sh -c '[ "$RANK" != 1 ]' >/dev/null 2>&1; then
  echo "FAIL: run --each returned 0 although host 1 failed"; fail=1
else
  echo "ok: run --each: one command per host with its rank; a failing host fails the run"
fi

# 20 steps in-process, then the same across the cluster under mpirun.
digest() { grep -o '"weights_sha256": "[0-9a-f]*"' "$1" 2>/dev/null | head -1 | grep -o '[0-9a-f]\{64\}'; }
timeout -k 5 120 "$ADACOMP" train "${common[@]}" --learners 2 --summary-out "$TMP/in.json" \
  >/dev/null 2>"$TMP/err" || { echo "FAIL: in-process run"; cat "$TMP/err"; fail=1; }
c counters >"$TMP/c0" 2>&1
start=$(date +%s.%N)
T=150 c run --mpi --timeout 120 -- "$ADACOMP" train "${common[@]}" --summary-out "$TMP/mpi.json" \
  >"$TMP/out" 2>"$TMP/err" || { echo "FAIL: mpirun across the cluster"; cat "$TMP/out" "$TMP/err"; fail=1; }
end=$(date +%s.%N)
c counters >"$TMP/c1" 2>&1
a=$(digest "$TMP/in.json"); b=$(digest "$TMP/mpi.json")
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: in-process $a, mpirun across 2 hosts $b"; fail=1
else
  echo "ok: 20 steps across 2 hosts at 100 Mbit/s over TCP ($(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.1f", e - s}') s) end with the in-process digest ($a)"
fi

# The interfaces carried at least the frames: every frame leaves its
# learner's host once and enters the other host once.
frames=$(grep -o '"bytes_sent": [0-9]*' "$TMP/mpi.json" 2>/dev/null | grep -o '[0-9]*$')
read -r rx tx < <(paste "$TMP/c0" "$TMP/c1" | awk 'NR > 1 { r += $9 - $3; t += $10 - $4 } END { print r + 0, t + 0 }')
if [ -z "$frames" ] || [ "$frames" -le 0 ]; then
  echo "FAIL: no bytes_sent in the summary"; fail=1
elif [ "$tx" -lt "$frames" ] || [ "$rx" -lt "$frames" ]; then
  echo "FAIL: the interfaces sent $tx and received $rx bytes, fewer than the $frames frame bytes"
  cat "$TMP/c0" "$TMP/c1"; fail=1
else
  echo "ok: interfaces sent $tx / received $rx bytes >= $frames frame bytes ($(awk -v t="$tx" -v f="$frames" 'BEGIN{printf "%.2f", t / f}')x)"
fi

# down removes every namespace, veth and bridge, and is idempotent.
c down >"$TMP/down" 2>&1 || { echo "FAIL: down"; cat "$TMP/down"; fail=1; }
c down >>"$TMP/down" 2>&1 || { echo "FAIL: a second down"; cat "$TMP/down"; fail=1; }
root_links >"$TMP/links_after"
left=$(our_ns | tr '\n' ' ')
if [ -n "$left" ]; then
  echo "FAIL: namespaces left after down: $left"; fail=1
elif ! cmp -s "$TMP/links_before" "$TMP/links_after"; then
  echo "FAIL: the root namespace's interfaces differ after down:"; diff "$TMP/links_before" "$TMP/links_after"; fail=1
elif [ -e "/run/adacomp-cluster/$NAME" ]; then
  echo "FAIL: /run/adacomp-cluster/$NAME left after down"; fail=1
else
  echo "ok: down (twice) left no namespace, veth, bridge or state"
fi
exit $fail
