#!/usr/bin/env bash
# Real partitions (issue 23): a lock holder cut off from its server by dropped packets, not by
# a proxy. The proxy of network_tests.cpp stalls above TCP: the kernels on both sides still
# ACK every byte, so TCP never times out and a new connection is accepted at once. Here the
# holder runs in a network namespace of its own, joined to this machine by a veth pair, and
# the cut is an nftables DROP of every packet on that pair, both ways: retransmissions, SYNs
# and keepalives go unanswered, as on a network that fails.
#
# Usage: partition_test.sh PATH/TO/dblock BACKEND [STRATEGY...]
#   BACKEND postgresql, mysql, redis, redlock, zookeeper or etcd, its server in
#   DBLOCK_TEST_PG_URL, DBLOCK_TEST_MYSQL_URL, DBLOCK_TEST_REDIS_URL, DBLOCK_TEST_REDLOCK_URL
#   (every node cut at once), DBLOCK_TEST_ZK_URL or DBLOCK_TEST_ETCD_URL on 127.0.0.1
#   (scripts/services). Without strategies: PostgreSQL insert, advisory and
#   for-update; MySQL insert, for-update and advisory; the others their only one.
#
# Wiring (everything named after this shell's pid, so parallel runs cannot collide):
#   netns dblock-part-PID; veth dbpPIDh (here, 10.213.A.B+1/30) and dbpPIDn (in the netns,
#   .B+2), the netns's default route via .B+1. The servers stay on 127.0.0.1: the nft table
#   dblock_part_PID DNATs what comes in on dbpPIDh for .B+1 to 127.0.0.1 (route_localnet on
#   dbpPIDh lets a packet from outside reach a loopback address) and SNATs it to 127.0.0.1,
#   so that the servers' host-based logins (PostgreSQL's pg_hba, MariaDB's 'dblock'@'127.0.0.1')
#   take it as local. The cut: a rule dropping everything that arrives on dbpPIDh (the client's
#   packets) and one in the netns dropping everything that arrives on dbpPIDn (the servers'),
#   both before connection tracking. Dropped on arrival, not on departure: a packet dropped on
#   the way out fails the sender's send call (EPERM), which a lost packet never does.
#
# Per strategy: a `dblock run` in the netns holds the lock (TTL 3 s, timeouts 1 s) running a
# command that records its fence; the cut; then it measures and checks
#   (1) how long until the holder declares the lock lost (its command gets SIGTERM);
#   (2) how long until a client on this side, not cut off, is granted the lock, only after
#       (1), with a higher fence: leases at the TTL; session locks when the server closes the
#       cut-off connection (PostgreSQL: the TTL + 2 s, the keepalives dblock sets; MySQL:
#       the server's own TCP keepalive, hours by default, so there it is measured, not bounded);
#   (3) that no call of the cut-off side outlives its timeouts: a new `dblock run` in the
#       netns during the cut fails within its bound, and the holder, stopped, exits (76)
#       within its bound of the release it attempts;
#   (4) after the cut heals, the netns side is granted the lock again, with a higher fence.
# Every time is printed ("partition: ..."), in ms since the cut. Exits 77 (ctest's skip) with
# one line saying why when it cannot make a network namespace here (not root, or the kernel
# refuses); any other failure of its own wiring fails the test.
set -u
DBLOCK=${1:?usage: partition_test.sh PATH/TO/dblock BACKEND [STRATEGY...]}
BACKEND=${2:?usage: partition_test.sh PATH/TO/dblock BACKEND [STRATEGY...]}
shift 2
SKIP=77
TTL_MS=3000 TIMEOUT=1s

skip() { echo "partition: SKIPPED: $*"; exit "$SKIP"; }
die() { echo "partition: FAILED: $*"; exit 1; }
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }

case "$BACKEND" in
  postgresql) url_var=DBLOCK_TEST_PG_URL default_strategies="insert advisory for-update" ;;
  mysql) url_var=DBLOCK_TEST_MYSQL_URL default_strategies="insert for-update advisory" ;;
  redis) url_var=DBLOCK_TEST_REDIS_URL default_strategies="redis" ;;
  redlock) url_var=DBLOCK_TEST_REDLOCK_URL default_strategies="redlock" ;;  # every node cut at once
  zookeeper) url_var=DBLOCK_TEST_ZK_URL default_strategies="zookeeper" ;;
  etcd) url_var=DBLOCK_TEST_ETCD_URL default_strategies="etcd" ;;
  *) die "unknown backend '$BACKEND'" ;;
esac
URL=${!url_var:-}
[ -n "$URL" ] || die "$url_var is not set (scripts/test starts the server)"
[[ "$URL" == *"127.0.0.1:"* ]] ||
  die "$url_var must name its server as 127.0.0.1:PORT (the netns reaches this machine's loopback only)"
STRATEGIES=${*:-$default_strategies}
[ -x "$DBLOCK" ] || die "no dblock command at $DBLOCK"

# What may refuse us is the kernel or our privileges: that is a skip. Missing tools are not.
[ "$(id -u)" -eq 0 ] ||
  skip "making a network namespace needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); run as root"
command -v ip >/dev/null || die "no 'ip' command (Debian package iproute2)"
command -v nft >/dev/null || die "no 'nft' command: scripts/deps test installs nftables"

ID=$$
NS=dblock-part-$ID HV=dbp${ID}h NV=dbp${ID}n NFT=dblock_part_$ID
WORK=$(mktemp -d "/tmp/dblock-part-$ID.XXXXXX")
TABLE=dblock_partition  # lock table of the SQL backends (names are unique per run)

# teardown ID: removes what a run with that id made (any part of it may be missing).
teardown() {
  local ns=dblock-part-$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null)
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null
  nft delete table ip "dblock_part_$1" 2>/dev/null
  ip link delete "dbp${1}h" 2>/dev/null  # its peer goes with it
  ip netns delete "$ns" 2>/dev/null
  rm -rf "/tmp/dblock-part-$1".*
}
cleanup() {
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null; done
  teardown "$ID"  # and $WORK
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
# A run killed outright (ctest's timeout sends SIGKILL) could not tear down: remove what runs
# whose shell is gone left behind. Only our own names, and only of dead pids.
for stale in $(ip netns list 2>/dev/null | sed -n 's/^dblock-part-\([0-9][0-9]*\).*/\1/p'); do
  kill -0 "$stale" 2>/dev/null || teardown "$stale"
done

# The subnet: a /30 of 10.213.0.0/16 from the pid, the next free one if that is taken.
slot=$((ID % 16384))
for ((i = 0; i < 16384; i++)); do
  s=$(((slot + i) % 16384))
  HOST_IP=10.213.$((s / 64)).$((s % 64 * 4 + 1)) NS_IP=10.213.$((s / 64)).$((s % 64 * 4 + 2))
  ip -4 -o addr show | grep -q " $HOST_IP/" || break
done
out=$(ip netns add "$NS" 2>&1) || skip "the kernel refused a network namespace (ip netns add: $out)"
set -e
trap 'echo "partition: FAILED: wiring the netns: $BASH_COMMAND"' ERR
ip link add "$HV" type veth peer name "$NV"
ip link set "$NV" netns "$NS"
ip addr add "$HOST_IP/30" dev "$HV"
ip link set "$HV" up
ip -n "$NS" addr add "$NS_IP/30" dev "$NV"
ip -n "$NS" link set "$NV" up
ip -n "$NS" link set lo up
ip -n "$NS" route add default via "$HOST_IP"
sysctl -q -w "net.ipv4.conf.$HV.route_localnet=1"
nft -f - <<EOF
table ip $NFT {
  chain cut { type filter hook prerouting priority raw; }
  chain to_servers {
    type nat hook prerouting priority dstnat; iifname "$HV" ip daddr $HOST_IP dnat to 127.0.0.1;
  }
  chain as_local { type nat hook input priority 100; iifname "$HV" snat to 127.0.0.1; }
}
EOF
ip netns exec "$NS" nft -f - <<EOF
table ip $NFT {
  chain cut { type filter hook prerouting priority raw; }
}
EOF
set +e
trap - ERR
cut() {
  nft add rule ip "$NFT" cut iifname "$HV" drop &&
    ip netns exec "$NS" nft add rule ip "$NFT" cut iifname "$NV" drop
}
heal() {
  nft flush chain ip "$NFT" cut && ip netns exec "$NS" nft flush chain ip "$NFT" cut
}
NS_URL=${URL//127.0.0.1:/$HOST_IP:}
echo "partition: wiring: netns $NS, $HV $HOST_IP <-> $NV $NS_IP, nft table $NFT; $BACKEND via $NS_URL"

common=(--timeout "$TIMEOUT")
case "$BACKEND" in
  postgresql|mysql)
    common+=(--table "$TABLE")
    "$DBLOCK" migrate --url "$URL" "${common[@]}" >/dev/null || die "dblock migrate failed on $URL"
    ;;
esac
ns_dblock() { ip netns exec "$NS" "$DBLOCK" "$@"; }

failures=0
check() {  # check CONDITION MESSAGE...
  if ! eval "$1"; then
    echo "partition: $BACKEND $strategy: FAILED: ${*:2}"
    failures=$((failures + 1))
  fi
}
wait_file() {  # wait_file PATH SECONDS: 0 once it exists and is not empty
  local end=$(($(now_ms) + $2 * 1000))
  while [ ! -s "$1" ]; do
    [ "$(now_ms)" -lt "$end" ] || return 1
    sleep 0.02
  done
}
alive() { kill -0 "$1" 2>/dev/null; }

# Bounds, in ms, for a 1 s timeout (what docs/RELIABILITY.md, "Network faults", says per
# backend), plus slack for a 2-core machine. call: one call of the cut-off side (a new
# client's connect, a statement). exit: the holder's exit after its command was stopped, which
# may first wait for the renewal under way and then for the release's own round trip.
bounds() {
  case "$BACKEND" in
    # libpq's connect_timeout is 2 s at least; a statement: 1 s + 1 s guard
    postgresql) call_ms=3500 exit_ms=3500 ;;
    mysql) call_ms=13000 exit_ms=13000 ;;      # a read: the statement timeout + 10 s (the longest lock wait)
    redis|redlock) call_ms=2500 exit_ms=3500 ;;
    # A lost lock's node is deleted, retried for up to the session timeout (the TTL), so that a
    # session that outlives a short cut does not keep it; a delete waits up to 2/3 of it.
    zookeeper) call_ms=3000 exit_ms=$((TTL_MS * 5 / 3 + 3000)) ;;
    etcd) call_ms=3500 exit_ms=4500 ;;         # an acquire: two gRPC calls of 1 s
  esac
}
# How long after the cut the server frees a session lock: PostgreSQL, the TTL + 2 s after the
# last packet it received (the keepalives dblock sets on the holder's connection); MariaDB
# and MySQL have no per-connection setting, so the server's global TCP keepalives decide
# (tcp_keepalive_time, hours by default): -1, not bounded, measured and reported only.
session_bound_ms() {
  case "$BACKEND" in
    postgresql) echo $((TTL_MS + 3500)) ;;
    *) echo -1 ;;
  esac
}

scenario() {
  local strategy=$1 name="part-$ID-$1" dir="$WORK/$1" session=0
  mkdir -p "$dir"
  case "$strategy" in for-update|advisory) session=1 ;; esac
  local strat=()
  case "$strategy" in insert|for-update|advisory|optimistic) strat=(--strategy "$strategy") ;; esac
  local call_ms exit_ms; bounds
  local bound=$call_ms

  # The holder, in the netns: records its fence, then runs until dblock stops it; the
  # subshell records when and how dblock exited.
  (
    ns_dblock run --url "$NS_URL" "${common[@]}" "${strat[@]}" --name "$name" --ttl "${TTL_MS}ms" --grace 1s -- \
      bash -c 'echo "$DBLOCK_FENCE" > "$1/holder.fence"
               trap '\''echo "${EPOCHREALTIME/[.,]/}" > "$1/holder.stopped"; exit 0'\'' TERM
               while :; do sleep 0.05; done' holder "$dir" 2>"$dir/holder.err"
    echo "$? $(now_ms)" > "$dir/holder.exit"
  ) &
  local holder=$!
  if ! wait_file "$dir/holder.fence" 20; then
    check false "the holder in the netns did not get the lock within 20 s: $(cat "$dir/holder.err")"
    kill "$holder" 2>/dev/null
    return
  fi
  sleep 1.5  # renewals (every ttl/3) pass while the network is whole
  check "alive $holder" "the holder stopped before the cut: $(cat "$dir/holder.err")"
  local fence1; fence1=$(cat "$dir/holder.fence")

  cut || die "could not add the DROP rules"
  local t0; t0=$(now_ms)
  # The client on this side waits for the lock; a session lock may stay held by the server
  # for as long as it believes the cut-off connection alive, so it waits at most until the
  # cut heals plus a while.
  "$DBLOCK" run --url "$URL" "${common[@]}" "${strat[@]}" --name "$name" --ttl "${TTL_MS}ms" --wait 60s -- \
    bash -c 'echo "${EPOCHREALTIME/[.,]/} $DBLOCK_FENCE" > "$1/other.granted"' other "$dir" 2>"$dir/other.err" &
  local other=$!
  # A new client in the netns during the cut: its connect must time out (no SYN-ACK comes).
  (
    t=$(now_ms)
    timeout -k 1 $((bound / 1000 + 10)) ip netns exec "$NS" "$DBLOCK" run --url "$NS_URL" "${common[@]}" \
      "${strat[@]}" --name "probe-$name" --no-wait -- true 2>"$dir/probe.err"
    echo "$? $(($(now_ms) - t))" > "$dir/probe.done"
  ) &

  # Keep the cut until the holder has exited (its release attempted through the cut), the
  # probe has failed and the other client has the lock. A session lock the server keeps for
  # as long as it believes the connection alive (not bounded here) is shown kept for 3 s
  # after the holder's exit, and the cut then heals. At most 30 s in any case.
  local unbounded=0 exited_at=-1
  [ "$session" = 1 ] && [ "$(session_bound_ms)" -lt 0 ] && unbounded=1
  while [ "$(now_ms)" -lt $((t0 + 30000)) ]; do
    if [ -s "$dir/holder.exit" ] && [ -s "$dir/probe.done" ]; then
      [ -s "$dir/other.granted" ] && break
      [ "$exited_at" -ge 0 ] || exited_at=$(now_ms)
      [ "$unbounded" = 1 ] && [ "$(now_ms)" -ge $((exited_at + 3000)) ] && break
    fi
    sleep 0.02
  done
  heal || die "could not remove the DROP rules"
  local healed=$(($(now_ms) - t0))
  wait_file "$dir/other.granted" 30
  wait_file "$dir/probe.done" 30
  # The holder's exit: its release is attempted through the cut (or after it healed).
  wait_file "$dir/holder.exit" $((exit_ms / 1000 + 5))
  local holder_exit_ms=-1 holder_rc=none
  if [ -s "$dir/holder.exit" ]; then
    read -r holder_rc holder_exit_ms < "$dir/holder.exit"
    holder_exit_ms=$((holder_exit_ms - t0))
  else
    ip netns pids "$NS" | xargs -r kill -9
  fi
  wait "$holder" 2>/dev/null
  wait "$other" 2>/dev/null
  local other_rc=$?

  local stopped_ms=-1 granted_ms=-1 fence2=0 probe_rc=none probe_ms=-1
  [ -s "$dir/holder.stopped" ] && stopped_ms=$(($(cat "$dir/holder.stopped") / 1000 - t0))
  if [ -s "$dir/other.granted" ]; then
    read -r g fence2 < "$dir/other.granted"
    granted_ms=$((g / 1000 - t0))
  fi
  [ -s "$dir/probe.done" ] && read -r probe_rc probe_ms < "$dir/probe.done"
  local release_ms=-1
  [ "$stopped_ms" -ge 0 ] && release_ms=$((holder_exit_ms - stopped_ms))

  # (4) healed: the netns side gets the lock again, with a higher fence.
  local r0 rec rec_rc rec_fence=0
  r0=$(now_ms)
  rec=$(ns_dblock run --url "$NS_URL" "${common[@]}" "${strat[@]}" --name "$name" --ttl "${TTL_MS}ms" --wait 20s -- \
          bash -c 'echo "$DBLOCK_FENCE"' 2>"$dir/recovery.err")
  rec_rc=$?
  local rec_ms=$(($(now_ms) - r0))
  [ "$rec_rc" -eq 0 ] && rec_fence=$rec

  local held=""
  [ "$granted_ms" -ge "$healed" ] && held=" (the server kept it through the cut)"
  echo "partition: $BACKEND $strategy: lost after $stopped_ms ms (ttl $TTL_MS, timeouts $TIMEOUT);" \
       "other client granted after $granted_ms ms$held (fence $fence2 > $fence1, its exit $other_rc);" \
       "new client in the netns during the cut: exit $probe_rc after $probe_ms ms;" \
       "holder exited $release_ms ms after its command stopped (exit $holder_rc); cut healed at $healed ms;" \
       "recovered: granted in the netns $rec_ms ms after the heal (fence $rec_fence > $fence2)"
  # (1) the loss: leases at the TTL after the last renewal; session locks too (the renewal
  #     ping under way fails later, but the deadline does not wait for it).
  check "[ $stopped_ms -ge 0 ]" "the holder never declared the lock lost: $(tail -n 2 "$dir/holder.err")"
  check "[ $stopped_ms -lt $((TTL_MS + 1500)) ]" "lost only after $stopped_ms ms"
  # (2) no overlap: the other client got the lock after the holder's command was stopped,
  #     within the TTL (leases) or the server's bound (session locks), with a higher fence.
  check "[ $granted_ms -ge 0 ]" "the other client never got the lock: $(tail -n 2 "$dir/other.err")"
  # The command's stop is recorded by its SIGTERM trap, a few ms after dblock declared the
  # loss (a signal to dblock's main thread, then one to the command): a lease expires on the
  # server at the TTL after the renewal arrived, only a one-way trip after the holder's own
  # deadline, so the next grant can beat the record by those few ms (Redis did, by 2 ms).
  # That window is what fences are for; beyond 100 ms it would be a loss declared late.
  check "[ $granted_ms -ge $((stopped_ms - 100)) ]" \
        "the other client got the lock at $granted_ms ms, before the holder stopped ($stopped_ms ms)"
  check "[ $fence2 -gt $fence1 ]" "the other client's fence $fence2 is not above the holder's $fence1"
  if [ "$session" = 0 ]; then
    check "[ $granted_ms -lt $((TTL_MS + 1500)) ]" "a lease taken over only after $granted_ms ms"
  elif [ "$unbounded" = 0 ]; then
    check "[ $granted_ms -lt $(session_bound_ms) ]" "a session lock taken over only after $granted_ms ms"
  else
    check "[ $granted_ms -lt $((healed + 30000)) ]" "a session lock taken over $granted_ms ms after the cut"
  fi
  # (3) nothing of the cut-off side hangs.
  check "[ '$probe_rc' = 69 ]" "a new client during the cut did not fail as unavailable (exit $probe_rc):" \
        "$(tail -n 1 "$dir/probe.err")"
  check "[ $probe_ms -lt $call_ms ]" "a new client during the cut took $probe_ms ms to fail (bound $call_ms)"
  check "[ '$holder_rc' = 76 ]" "the holder exited $holder_rc, not 76 (lost): $(tail -n 2 "$dir/holder.err")"
  check "[ $release_ms -ge 0 ] && [ $release_ms -lt $exit_ms ]" \
        "the holder took $release_ms ms to exit after its command stopped (bound $exit_ms)"
  # (4)
  check "[ $rec_rc -eq 0 ]" "no grant in the netns after the heal (exit $rec_rc): $(tail -n 1 "$dir/recovery.err")"
  check "[ $rec_fence -gt $fence2 ]" "the fence after the heal ($rec_fence) is not above $fence2"
}

for strategy in $STRATEGIES; do scenario "$strategy"; done
if [ "$failures" -gt 0 ]; then
  echo "partition: $BACKEND: $failures check(s) failed"
  exit 1
fi
echo "partition: $BACKEND: all checks passed"
