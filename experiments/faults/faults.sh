#!/usr/bin/env bash
# Network faults on the namespace cluster (scripts/cluster.sh;
# docs/distributed.md): the same `adacomp train` under mpirun across P hosts,
# once on clean links and once with each fault, comparing the weights digest
# and the wall time.
#
#   loss PCT      PCT % of the packets every host receives dropped (nftables)
#   flap SECONDS  host 1's link down for SECONDS after the first steps, then up
#   straggler     host P-1's link 10 times slower than the others' (tc tbf)
#
# Usage: experiments/faults/faults.sh [--hosts P] [--rate R] [--steps N] [--codec C]
#                          [--out DIR] FAULT [ARG] [FAULT [ARG] ...]
#   e.g. experiments/faults/faults.sh loss 1 loss 5 flap 5 straggler
# Writes DIR/<fault>.json (the trainer's summary) and DIR/<fault>.log and
# prints one line per run: fault, exit status, wall seconds, digest, whether
# it equals the clean run's. Root only (exit 77 otherwise, as cluster.sh).
# Every run is bounded (--timeout of cluster.sh); the cluster is removed at
# the end, also on failure or interruption.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER="$ROOT/scripts/cluster.sh"
ADACOMP="${ADACOMP:-$ROOT/build/tools/adacomp/adacomp}"
HOSTS=4 RATE=100mbit STEPS=100 CODEC=adacomp OUT="$ROOT/results/faults"
NAME=acf
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) HOSTS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --codec) CODEC=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { sed -n '2,19p' "$0"; exit 2; }
[ -x "$ADACOMP" ] || { echo "faults.sh: $ADACOMP not found (bash scripts/build.sh)"; exit 1; }
mkdir -p "$OUT"
export CLUSTER_NAME=$NAME
trap '"$CLUSTER" down >/dev/null 2>&1' EXIT INT TERM

train=("$ADACOMP" train --codec "$CODEC" --batch-size 128 --train-limit 25600 --test-limit 1000
       --steps "$STEPS" --log-every 10 --seed 1)

digest() { grep -o '"weights_sha256": *"[0-9a-f]*"' "$1" 2>/dev/null | grep -o '[0-9a-f]\{64\}'; }

# bits/s of "100mbit" etc. (the forms cluster.sh takes)
bps() {
  local r="${1,,}" m=1
  case "$r" in *gbit) m=1000000000; r=${r%gbit} ;; *mbit) m=1000000; r=${r%mbit} ;;
    *kbit) m=1000; r=${r%kbit} ;; *bit) r=${r%bit} ;; esac
  awk -v a="$r" -v m="$m" 'BEGIN { printf "%d", a * m }'
}

# run NAME [cluster up options...]: up, train (with $during in the background), down.
run() {
  local name=$1; shift
  "$CLUSTER" down >/dev/null 2>&1
  "$CLUSTER" up "$HOSTS" --rate "$RATE" "$@" >"$OUT/$name.log" 2>&1 || {
    local rc=$?; cat "$OUT/$name.log"; exit "$rc"; }
  if [ -n "${setup:-}" ]; then eval "$setup" >>"$OUT/$name.log" 2>&1; fi
  local t0 t1 rc bg=""
  t0=$(date +%s.%N)
  if [ -n "${during:-}" ]; then (eval "$during") >>"$OUT/$name.log" 2>&1 & bg=$!; fi
  "$CLUSTER" run --mpi --timeout 900 -- "${train[@]}" --summary-out "$OUT/$name.json" \
    >>"$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  [ -n "$bg" ] && wait "$bg"
  "$CLUSTER" status >>"$OUT/$name.log" 2>&1
  # Packets the loss rules dropped, all hosts.
  local drops=0 n i
  for ((i = 0; i < HOSTS; i++)); do
    n=$(ip netns exec "${NAME}$i" nft list ruleset 2>/dev/null |
      grep -o 'counter packets [0-9]*' | awk '{ s += $3 } END { print s + 0 }')
    drops=$((drops + ${n:-0}))
  done
  "$CLUSTER" down >/dev/null 2>&1
  local secs d same
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  d=$(digest "$OUT/$name.json")
  same=$([ -n "$d" ] && [ "$d" = "${CLEAN_DIGEST:-}" ] && echo yes || echo no)
  [ "$name" = clean ] && same="(the reference)"
  printf '%-10s exit %-3s %7s s  %8s packets dropped  digest %s  same as clean: %s\n' \
    "$name" "$rc" "$secs" "$drops" "${d:-(none)}" "$same"
  setup="" during=""
}

setup="" during=""
run clean
CLEAN_DIGEST=$(digest "$OUT/clean.json")
[ -n "$CLEAN_DIGEST" ] || { echo "faults.sh: the clean run failed; see $OUT/clean.log"; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    loss)
      pct=$2; shift 2
      run "loss$pct" --loss "$pct" ;;
    flap)
      secs=$2; shift 2
      # Host 1's veth down once the run is under way (10 s after the start:
      # mpirun and the data load come first), up again SECONDS later.
      during="sleep 10; ip -n ${NAME}1 link set eth0 down; echo \"link down \$(date +%T)\";
              sleep $secs; ip -n ${NAME}1 link set eth0 up; echo \"link up \$(date +%T)\""
      run "flap$secs" ;;
    straggler)
      shift
      last=$((HOSTS - 1))
      slow=$(( $(bps "$RATE") / 10 ))
      # Both directions of the last host's link, as cluster.sh shapes them.
      burst=$(( slow / 8000 > 15140 ? slow / 8000 : 15140 ))
      setup="tc -n ${NAME}$last qdisc replace dev eth0 root tbf rate ${slow}bit burst $burst latency 50ms &&
             tc -n ${NAME}-br qdisc replace dev p$last root tbf rate ${slow}bit burst $burst latency 50ms"
      run straggler ;;
    *) echo "faults.sh: unknown fault '$1'"; exit 2 ;;
  esac
done
