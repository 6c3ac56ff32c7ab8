#!/usr/bin/env bash
# A cluster of P hosts on one machine: network namespaces joined by a bridge
# through veth pairs, every host's link rate-limited with tc tbf in both
# directions, optional random loss with nftables; runs mpirun (one rank per
# host, TCP only) or one command per host across it. docs/distributed.md.
#
# Usage: scripts/cluster.sh [--name N] COMMAND ...
#   up P [--rate R] [--loss PCT]   create hosts N0..N(P-1) and the bridge N-br
#   run --mpi [--timeout S] [MPIRUN_OPTION...] -- CMD...
#                                  mpirun across the hosts, one rank per host
#   run --each [--timeout S] [--port PORT] [--logs DIR] -- CMD...
#                                  CMD once in every host (RANK, WORLD_SIZE, ...)
#   counters                       bytes/packets rx/tx of every host's interface
#   status                         what is up: hosts, addresses, shaping, drops
#   down                           remove everything this cluster made (idempotent)
# The cluster's name (default acn; also $CLUSTER_NAME) prefixes every
# namespace, so several clusters can coexist. Exit status 77: this machine
# cannot make namespaces (not root, no ip/tc/nft); 2: usage.
set -uo pipefail

PATH="$PATH:/usr/sbin:/sbin"   # ip, tc, nft live there; a user's PATH may lack it
NAME="${CLUSTER_NAME:-acn}"
if [ "${1:-}" = "--name" ]; then NAME="${2:-}"; shift 2 || true; fi
CMD="${1:-}"; shift || true

IFACE=eth0          # every host's interface (inside its own namespace)
SUBNET=10.213.0     # host i is $SUBNET.(i+1)/24; exists only inside the namespaces
MAX_HOSTS=64
STATE_ROOT=/run/adacomp-cluster
STATE="$STATE_ROOT/$NAME"
BR_NS="$NAME-br"
T_CMD=20            # seconds any one ip/tc/nft command may take

die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { echo "cluster.sh: $*" >&2; echo "usage: cluster.sh [--name N] up P [--rate R] [--loss PCT] | run --mpi|--each [...] -- CMD... | counters | status | down" >&2; exit 2; }
cannot() { echo "cluster.sh: cannot create network namespaces here: $*" >&2; exit 77; }
q() { timeout -k 2 "$T_CMD" "$@"; }   # every system command is time-bounded

# Ending in a letter keeps host names unambiguous: cluster "ab" owns ab0, ab1,
# ...; no other cluster's name can match them.
[[ "$NAME" =~ ^[a-z]([a-z0-9]{0,6}[a-z])?$ ]] || usage "name '$NAME': 1-8 lowercase letters/digits, starting and ending with a letter"

need_root() {
  [ "$(id -u)" = 0 ] || cannot "needs root (run it as root or with sudo)"
  command -v ip >/dev/null 2>&1 || cannot "no 'ip' command (Debian: apt-get install iproute2)"
  command -v tc >/dev/null 2>&1 || cannot "no 'tc' command (Debian: apt-get install iproute2)"
}

# This cluster's namespaces: N0..N63 and N-br, whatever state says.
our_namespaces() {
  q ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}([0-9]+|-br)\$" || true
}

hosts_up() { [ -f "$STATE/hosts" ] && cat "$STATE/hosts"; }   # lines: ns addr

# "100mbit", "1gbit", "2.5Gbit", "500kbit", "1000000bit" -> bits per second
rate_bps() {
  local r="${1,,}"
  [[ "$r" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)$ ]] || return 1
  local mult=1
  case "${BASH_REMATCH[3]}" in kbit) mult=1000;; mbit) mult=1000000;; gbit) mult=1000000000;; esac
  awk -v n="${BASH_REMATCH[1]}" -v m="$mult" 'BEGIN { v = n * m; if (v < 8000) exit 1; printf "%.0f\n", v }'
}

lock() {
  mkdir -p "$STATE_ROOT"
  exec 9>"$STATE_ROOT/$NAME.lock"
  flock -w 60 9 || die "another cluster.sh $NAME command holds the lock for 60 s"
}

do_down() {
  local ns pids n=0 k
  for ns in $(our_namespaces); do
    # End what still runs in the host (ranks of an interrupted run), bounded.
    for k in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(q ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
      [ -z "$pids" ] && break
      if [ "$k" -le 5 ]; then kill -TERM $pids 2>/dev/null; else kill -KILL $pids 2>/dev/null; fi
      sleep 0.2
    done
    q ip netns del "$ns" 2>/dev/null && n=$((n + 1))
  done
  rm -rf "$STATE"
  rm -f "$STATE_ROOT/$NAME.lock"
  rmdir "$STATE_ROOT" 2>/dev/null
  [ -z "$(our_namespaces)" ] || die "down: namespaces left: $(our_namespaces | tr '\n' ' ')"
  echo "cluster $NAME: down ($n namespaces removed)"
}

# tbf on one interface's egress. burst: 1 ms at the rate, at least 10 full
# Ethernet frames (15140 B) so a 1500-byte MTU always fits; latency 50 ms
# bounds the queue (625 kB at 100 Mbit/s). GSO packets larger than the burst
# are segmented by tbf itself.
shape() {  # ns dev bps
  local burst=$(( $3 / 8 / 1000 ))
  [ "$burst" -lt 15140 ] && burst=15140
  q tc -n "$1" qdisc replace dev "$2" root tbf rate "$3"bit burst "$burst" latency 50ms
}

no_ipv6() {  # ns: new interfaces in it start without IPv6
  q ip netns exec "$1" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6' 2>/dev/null || true
}

do_up() {
  local p="${1:-}"; shift || true
  local rate="" loss="" bps=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate="${2:-}"; shift 2 || usage "--rate needs a value";;
      --loss) loss="${2:-}"; shift 2 || usage "--loss needs a value";;
      *) usage "up: unknown option '$1'";;
    esac
  done
  [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le "$MAX_HOSTS" ] || usage "up: P must be 1..$MAX_HOSTS, got '$p'"
  if [ -n "$rate" ]; then bps=$(rate_bps "$rate") || usage "up: --rate '$rate': want e.g. 100mbit, 1gbit, 10gbit (at least 8kbit)"; fi
  if [ -n "$loss" ]; then
    [[ "$loss" =~ ^[0-9]+$ ]] && [ "$loss" -le 99 ] || usage "up: --loss '$loss': want a whole percentage 0..99"
  fi
  need_root
  if [ -n "$loss" ] && [ "$loss" -gt 0 ] && ! command -v nft >/dev/null 2>&1; then
    cannot "--loss needs nftables (Debian: apt-get install nftables)"
  fi
  lock
  [ -z "$(our_namespaces)" ] && [ ! -d "$STATE" ] || die "up: cluster $NAME is already up (cluster.sh --name $NAME down first)"
  # A failure or an interrupt half way removes what was made.
  trap 'echo "cluster.sh: up failed or interrupted; removing cluster $NAME" >&2; do_down >/dev/null 2>&1; exit 1' ERR INT TERM
  q ip netns add "$BR_NS" 2>/dev/null || { trap - ERR INT TERM; cannot "'ip netns add' failed (no CAP_SYS_ADMIN? a container without namespaces?)"; }
  mkdir -p "$STATE"
  # No IPv6 anywhere: no router solicitations or MLD reports in the counters.
  no_ipv6 "$BR_NS"
  q ip -n "$BR_NS" link add br0 type bridge
  q ip -n "$BR_NS" link set br0 up
  : >"$STATE/hosts"; : >"$STATE/hostfile"
  local i ns addr
  for ((i = 0; i < p; i++)); do
    ns="$NAME$i"; addr="$SUBNET.$((i + 1))"
    q ip netns add "$ns"
    no_ipv6 "$ns"
    # Both ends are made inside namespaces: nothing appears in the root one.
    q ip -n "$BR_NS" link add "p$i" type veth peer name "$IFACE" netns "$ns"
    q ip -n "$BR_NS" link set "p$i" master br0
    q ip -n "$BR_NS" link set "p$i" up
    q ip -n "$ns" link set lo up
    q ip -n "$ns" addr add "$addr/24" dev "$IFACE"
    q ip -n "$ns" link set "$IFACE" up
    if [ -n "$bps" ]; then
      shape "$ns" "$IFACE" "$bps"      # host -> bridge
      shape "$BR_NS" "p$i" "$bps"      # bridge -> host
    fi
    if [ -n "$loss" ] && [ "$loss" -gt 0 ]; then
      # Dropped on receipt: a packet between two hosts is lost with PCT %.
      q ip netns exec "$ns" nft -f - <<EOF
table inet adacomp_cluster {
  chain input {
    type filter hook input priority 0; policy accept;
    iifname "$IFACE" numgen random mod 100 < $loss counter drop
  }
}
EOF
    fi
    echo "$ns $addr" >>"$STATE/hosts"
    echo "$addr slots=1" >>"$STATE/hostfile"
  done
  printf 'hosts=%s\nrate=%s\nloss=%s\n' "$p" "${rate:-unshaped}" "${loss:-0}" >"$STATE/config"
  # The rsh agent for mpirun: "agent [opts] HOST CMD..." runs CMD in HOST's
  # namespace (and its own UTS namespace, hostname = the namespace's name).
  cat >"$STATE/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host="\$1"; shift
ns=\$(awk -v h="\$host" '\$1 == h || \$2 == h { print \$1; exit }' "$STATE/hosts")
[ -n "\$ns" ] || { echo "cluster agent: unknown host \$host" >&2; exit 1; }
exec ip netns exec "\$ns" unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$*"' "\$ns" "\$@"
EOF
  chmod +x "$STATE/agent"
  # Check every host reaches host 0 (no ping needed: a TCP connect to a
  # closed port answered "refused" proves the path; bounded to 3 s each).
  for ((i = 1; i < p; i++)); do
    local _try ok=0
    for _try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do  # links come up: <= 5 s
      local said; said=$(timeout -k 1 3 ip netns exec "$NAME$i" bash -c "exec 3<>/dev/tcp/$SUBNET.1/9" 2>&1) || true
      if [[ "$said" == *refused* ]]; then
        ok=1; break
      fi
      sleep 0.25
    done
    [ "$ok" = 1 ] || { echo "cluster.sh: up: host $NAME$i cannot reach $SUBNET.1" >&2; false; }
  done
  trap - ERR INT TERM
  echo "cluster $NAME: up, $p hosts (${NAME}0..${NAME}$((p - 1)), $SUBNET.1-$SUBNET.$p on $IFACE), rate ${rate:-unshaped}, loss ${loss:-0}%"
}

# "tbf rate 100Mbit burst 15137b lat 50ms; sent N bytes, dropped M" from tc -s
qdisc_line() {
  awk 'NR == 1 { sub(/^qdisc /, ""); sub(/ [0-9a-f]+: .*refcnt [0-9]+/, ""); sub(/ +$/, ""); q = $0 }
       / Sent / { s = $2; d = $7; sub(/,/, "", d) }
       END { printf "%s; sent %s bytes, dropped %s\n", q, s, d }'
}

do_status() {
  need_root
  if [ ! -f "$STATE/config" ]; then
    echo "cluster $NAME: not up"
    [ -n "$(our_namespaces)" ] && echo "  stray namespaces: $(our_namespaces | tr '\n' ' ') (cluster.sh --name $NAME down)"
    return 1
  fi
  echo "cluster $NAME: $(tr '\n' ' ' <"$STATE/config")"
  local ns addr i=0
  while read -r ns addr; do
    echo "  $ns $addr: egress $(q tc -s -n "$ns" qdisc show dev "$IFACE" | qdisc_line)"
    echo "  $BR_NS p$i -> $ns: $(q tc -s -n "$BR_NS" qdisc show dev "p$i" | qdisc_line)"
    i=$((i + 1))
  done < <(hosts_up)
}

do_counters() {
  need_root
  [ -f "$STATE/hosts" ] || die "counters: cluster $NAME is not up"
  echo "host addr rx_bytes tx_bytes rx_packets tx_packets"
  local ns addr
  while read -r ns addr; do
    # "ip -s link": the line after "RX:"/"TX:" holds bytes then packets.
    q ip -n "$ns" -s link show dev "$IFACE" | awk -v h="$ns" -v a="$addr" '
      /RX:/ { getline; rb = $1; rp = $2 } /TX:/ { getline; tb = $1; tp = $2 }
      END { print h, a, rb, tb, rp, tp }'
  done < <(hosts_up)
}

RUN_PIDS=()
run_cleanup() {
  local pid
  for pid in "${RUN_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 0.5
  # Whatever they left in the hosts (orted, ranks): by id, bounded.
  local ns p
  while read -r ns _; do
    p=$(q ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -n "$p" ] && kill -KILL $p 2>/dev/null
  done < <(hosts_up)
}

do_run() {
  local mode="${1:-}"; shift || true
  [ "$mode" = --mpi ] || [ "$mode" = --each ] || usage "run: --mpi or --each first"
  local limit=3600 port=29500 logs="" extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      --timeout) limit="${2:-}"; shift 2 || usage "--timeout needs seconds";;
      --port) port="${2:-}"; shift 2 || usage "--port needs a value";;
      --logs) logs="${2:-}"; shift 2 || usage "--logs needs a directory";;
      *) [ "$mode" = --mpi ] || usage "run --each: unknown option '$1'"; extra+=("$1"); shift;;
    esac
  done
  [ "${1:-}" = "--" ] || usage "run: put the command after --"
  shift
  [ $# -gt 0 ] || usage "run: no command after --"
  [[ "$limit" =~ ^[0-9]+$ ]] && [ "$limit" -ge 1 ] || usage "run: --timeout must be whole seconds"
  need_root
  [ -f "$STATE/hosts" ] || die "run: cluster $NAME is not up (cluster.sh --name $NAME up P first)"
  local p; p=$(wc -l <"$STATE/hosts")
  trap 'run_cleanup; exit 130' INT TERM
  if [ "$mode" = --mpi ]; then
    command -v mpirun >/dev/null 2>&1 || die "run --mpi: no mpirun (Debian: apt-get install openmpi-bin)"
    # mpirun itself runs in host 0 (its address is local there); the agent
    # starts orted in the other hosts. TCP between ranks only, on $IFACE.
    timeout -k 10 "$limit" ip netns exec "${NAME}0" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "${NAME}0" \
      mpirun --allow-run-as-root --oversubscribe --bind-to none \
        -np "$p" --hostfile "$STATE/hostfile" --map-by node \
        --mca plm_rsh_agent "$STATE/agent" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl tcp,self --mca btl_tcp_if_include "$IFACE" --mca oob_tcp_if_include "$IFACE" \
        --mca rtc ^hwloc \
        "${extra[@]}" "$@" &
    RUN_PIDS=($!)
    wait "${RUN_PIDS[0]}"; local rc=$?
    trap - INT TERM
    [ "$rc" = 124 ] && echo "cluster.sh: run --mpi: timed out after $limit s" >&2
    return "$rc"
  fi
  [ -z "$logs" ] || mkdir -p "$logs" || die "run: cannot make $logs"
  local ns addr i=0 master; master=$(awk 'NR==1{print $2}' "$STATE/hosts")
  while read -r ns addr; do
    # (Not ">/dev/stdout": reopening it would truncate a file stdout is.)
    (
      if [ -n "$logs" ]; then exec >"$logs/$ns.out" 2>"$logs/$ns.err"; fi
      exec timeout -k 10 "$limit" ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$ns" \
        env RANK="$i" LOCAL_RANK=0 WORLD_SIZE="$p" MASTER_ADDR="$master" MASTER_PORT="$port" \
            CLUSTER_HOST="$ns" CLUSTER_HOST_ADDR="$addr" CLUSTER_IFACE="$IFACE" GLOO_SOCKET_IFNAME="$IFACE" \
            "$@" </dev/null
    ) &
    RUN_PIDS+=($!)
    i=$((i + 1))
  done < <(hosts_up)
  local failed=0 rc
  for ((i = 0; i < ${#RUN_PIDS[@]}; i++)); do
    wait "${RUN_PIDS[$i]}"; rc=$?
    if [ "$rc" != 0 ]; then
      failed=$((failed + 1))
      echo "cluster.sh: run --each: host $NAME$i exited $rc$([ "$rc" = 124 ] && echo " (timed out after $limit s)")" >&2
    fi
  done
  trap - INT TERM
  [ "$failed" = 0 ]
}

case "$CMD" in
  up) do_up "$@";;
  down) need_root; lock; do_down;;
  status) do_status;;
  counters) do_counters;;
  run) do_run "$@";;
  ""|-h|--help|help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; [ -n "$CMD" ];;
  *) usage "unknown command '$CMD'";;
esac
