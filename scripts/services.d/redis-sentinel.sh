# shellcheck shell=bash
# redis-sentinel: a Redis 7 primary and one replica (nodes 1 and 2 on
# ${DBLOCK_REDIS_SENTINEL_PORT:-63821} and the next port, append-only like `redis`) watched by
# three Sentinels (the base port + 10, 11 and 12), for the failover tests. Not started by
# default. Debian's redis-server runs a Sentinel itself (`redis-server CONF --sentinel`: the
# redis-sentinel package only adds a symlink and a systemd unit). down-after-milliseconds 2000
# and failover-timeout 1000, so that a failover takes 3-4 s (a Sentinel starts no second
# failover of the same master within twice the failover timeout). Not 1000: the promotion
# closes every client of the promoted replica (CLIENT KILL TYPE normal), the other Sentinels'
# links included, and a Sentinel reconnects at most once a second, so with 1000 ms they found
# the new master down right after the switch and failed over again (4 of 40 failovers). `crash` is one failover:
# SIGKILL of the primary, wait until every Sentinel names the replica and it answers ROLE
# master, then the killed node restarted as its replica, and wait until its link is up and
# every Sentinel sees it as a healthy replica (so that the next failover can promote it).
# The URL names the Sentinels: redis-sentinel://127.0.0.1:63831,127.0.0.1:63832,127.0.0.1:63833/dblock.
# env: DBLOCK_TEST_REDIS_SENTINEL_URL, and DBLOCK_TEST_REDIS_SENTINEL_FAILOVER, the `crash`
# command. Uses redis.sh's rd_server, rd_pid, rd_alive, rd_ping and rd_stop.

rds_base=${DBLOCK_REDIS_SENTINEL_PORT:-63821}
rds_dir="$state/redis-sentinel"
rds_master=dblock
rds_port() { echo $((rds_base + $1 - 1)); }       # node 1-2
rds_sport() { echo $((rds_base + 9 + $1)); }      # sentinel 1-3
ports_redis-sentinel() { echo "$(rds_port 1) $(rds_port 2)"; }  # the data nodes (clients reach them there)
peer_ports_redis-sentinel() { echo "$(rds_sport 1) $(rds_sport 2) $(rds_sport 3)"; }  # the Sentinels
rds_url="redis-sentinel://127.0.0.1:$(rds_sport 1),127.0.0.1:$(rds_sport 2),127.0.0.1:$(rds_sport 3)/$rds_master"
rds_cli() {  # rds_cli PORT ARGS...: one command, its answer as plain lines
  timeout 3 redis-cli --no-auth-warning -h 127.0.0.1 -p "$1" --raw "${@:2}" 2>/dev/null 9>&-
}
rds_role() { rds_cli "$(rds_port "$1")" ROLE | head -n 1; }  # master, slave, or nothing
rds_said() {  # rds_said SENTINEL: the port of the primary that Sentinel names
  rds_cli "$(rds_sport "$1")" SENTINEL get-master-addr-by-name "$rds_master" | sed -n 2p
}
rds_primary() {  # the node that Sentinel 1..3 (the first that answers) names, else the last recorded
  local i p
  for i in 1 2 3; do
    p=$(rds_said "$i")
    [ -n "$p" ] && { echo $((p - rds_base + 1)); return 0; }
  done
  cat "$rds_dir/primary" 2>/dev/null || echo 1
}
rds_fail() {  # rds_fail MESSAGE: with each process's last log lines
  local d
  note "redis-sentinel: $1"
  for d in node1 node2 sentinel1 sentinel2 sentinel3; do log_tail "$rds_dir/$d/server.log"; done
  exit 1
}
rds_launch() {  # rds_launch DIR PORT CONF_TEXT [--sentinel]: writes DIR/redis.conf, starts it, waits for PONG
  local dir=$1 port=$2 i
  mkdir -p "$dir"
  rm -f "$dir/redis.pid"
  # A Sentinel rewrites its file (what it learned: replicas, other Sentinels, epochs), so it
  # must be a file; the nodes get one too, rewritten at every start.
  printf '%s\n' "# Written by scripts/services at every start; edits are lost." \
    "bind 127.0.0.1" "port $port" "dir $dir" "pidfile $dir/redis.pid" "logfile $dir/server.log" \
    "daemonize no" "protected-mode no" "$3" >"$dir/redis.conf"
  (cd "$dir" && exec setsid "$rd_server" "$dir/redis.conf" "${@:4}" </dev/null >>"$dir/server.log" 2>&1 9>&-) &
  for (( i = 0; i < 100; i++ )); do
    rd_ping "$port" && return 0
    sleep 0.05
  done
  rds_fail "$(basename "$dir") did not answer on 127.0.0.1:$port"
}
rds_node() {  # rds_node NODE [PRIMARY]: start a node, as PRIMARY's replica if given
  local n=$1 conf
  # As the plain redis service: appendfsync everysec (the fences do not rely on the last
  # second, ARCHITECTURE "Redis and Redlock"); many databases, one per contract test.
  conf=$(printf '%s\n' "save \"\"" "appendonly yes" "appendfsync everysec" "maxclients 1000" \
           "databases 4096" "repl-diskless-sync no" "repl-ping-replica-period 1")
  [ -z "${2:-}" ] || conf+=$'\n'"replicaof 127.0.0.1 $(rds_port "$2")"
  [ -n "$(rd_pid "$rds_dir/node$n")" ] || rds_launch "$rds_dir/node$n" "$(rds_port "$n")" "$conf"
}
rds_sentinel() {  # rds_sentinel SENTINEL PRIMARY: start a Sentinel watching PRIMARY, quorum 2
  local conf
  conf=$(printf '%s\n' "sentinel monitor $rds_master 127.0.0.1 $(rds_port "$2") 2" \
           "sentinel down-after-milliseconds $rds_master 2000" "sentinel failover-timeout $rds_master 1000" \
           "sentinel parallel-syncs $rds_master 1")
  [ -n "$(rd_pid "$rds_dir/sentinel$1")" ] || rds_launch "$rds_dir/sentinel$1" "$(rds_sport "$1")" "$conf" --sentinel
}
rds_linked() {  # rds_linked NODE: its replication link to its primary is up
  rds_cli "$(rds_port "$1")" INFO replication | grep -q '^master_link_status:up'
}
rds_agreed() {  # rds_agreed PRIMARY REPLICA: every Sentinel names PRIMARY, knows the other two
  # Sentinels, and sees REPLICA as a healthy replica (flags exactly "slave", link ok)
  local i info
  for i in 1 2 3; do
    [ "$(rds_said "$i")" = "$(rds_port "$1")" ] || return 1
    info=$(rds_cli "$(rds_sport "$i")" SENTINEL master "$rds_master" | paste -sd' ') || return 1
    [[ " $info " == *" num-other-sentinels 2 "* ]] || return 1
    info=$(rds_cli "$(rds_sport "$i")" SENTINEL replicas "$rds_master" | paste -sd' ') || return 1
    [[ " $info " == *" port $(rds_port "$2") "* && " $info " == *" flags slave "* &&
       " $info " == *" master-link-status ok "* ]] || return 1
  done
}
rds_wait() {  # rds_wait SECONDS COMMAND...: until it succeeds
  local i
  for (( i = 0; i < $1 * 10; i++ )); do
    "${@:2}" && return 0
    sleep 0.1
  done
  return 1
}
running_redis-sentinel() {
  local d
  for d in node1 node2 sentinel1 sentinel2 sentinel3; do [ -n "$(rd_pid "$rds_dir/$d")" ] || return 1; done
}
env_redis-sentinel() {
  printf 'export DBLOCK_TEST_REDIS_SENTINEL_URL=%q\n' "$rds_url"
  printf 'export DBLOCK_TEST_REDIS_SENTINEL_FAILOVER=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_REDIS_SENTINEL_PORT=$rds_base $(printf %q "$self") crash redis-sentinel"
}
start_redis-sentinel() {
  local t0 primary replica i
  t0=$(now)
  [ -x "$rd_server" ] || die "redis-sentinel: no server at $rd_server (install redis-server with scripts/deps test)"
  command -v redis-cli >/dev/null || die "redis-sentinel: no redis-cli (redis-tools, installed with redis-server)"
  [[ "$rds_base" =~ ^[0-9]+$ ]] || die "redis-sentinel: DBLOCK_REDIS_SENTINEL_PORT=$rds_base is not a port number"
  mkdir -p "$rds_dir"
  # Whichever node was primary last (a failover may have swapped them) starts as primary.
  primary=$(cat "$rds_dir/primary" 2>/dev/null || echo 1)
  replica=$((3 - primary))
  rds_node "$primary"
  rds_node "$replica" "$primary"
  rds_wait 30 rds_linked "$replica" || rds_fail "node $replica does not replicate node $primary"
  echo "$primary" >"$rds_dir/primary"
  for i in 1 2 3; do rds_sentinel "$i" "$primary"; done
  rds_wait 60 rds_agreed "$primary" "$replica" ||
    rds_fail "the Sentinels do not agree on node $primary as primary with node $replica as its replica"
  note "redis-sentinel: ready in $(since "$t0") (primary: node $primary) at $rds_url"
}
stop_redis-sentinel() {
  local i
  # Sentinels first: stopping a node under them would start a failover.
  for i in 3 2 1; do rd_stop "redis-sentinel sentinel $i" "$rds_dir/sentinel$i" "$(rds_sport "$i")" 2>/dev/null; done
  for i in 2 1; do rd_stop "redis-sentinel node $i" "$rds_dir/node$i" "$(rds_port "$i")" 2>/dev/null; done
  rm -f "$rds_dir"/sentinel*/redis.conf  # the next start writes them anew, from the recorded primary
  note "redis-sentinel: stopped"
}
rds_promoted() {  # rds_promoted NODE: every Sentinel names it and it answers ROLE master
  local i
  for i in 1 2 3; do [ "$(rds_said "$i")" = "$(rds_port "$1")" ] || return 1; done
  [ "$(rds_role "$1")" = master ]
}
crash_redis-sentinel() {  # also finishes a failover whose primary the caller killed itself (a test)
  local t0 primary replica pid i
  t0=$(now)
  for i in 1 2 3; do
    [ -n "$(rd_pid "$rds_dir/sentinel$i")" ] || die "redis-sentinel: not running (start it first)"
  done
  primary=$(rds_primary)
  replica=$((3 - primary))
  [ -n "$(rd_pid "$rds_dir/node$replica")" ] || die "redis-sentinel: node $replica, the replica, is not running"
  pid=$(rd_pid "$rds_dir/node$primary")
  if [ -n "$pid" ]; then
    rds_agreed "$primary" "$replica" || rds_wait 30 rds_agreed "$primary" "$replica" ||
      rds_fail "not ready for a failover: the Sentinels do not all see node $primary with healthy replica $replica"
    kill -KILL "$pid" 2>/dev/null || true
    for (( i = 0; i < 100; i++ )); do
      rd_alive "$pid" || break
      sleep 0.05
    done
  fi
  rds_wait 60 rds_promoted "$replica" || rds_fail "node $replica was not promoted"
  echo "$replica" >"$rds_dir/primary"
  note "redis-sentinel: killed primary node $primary; node $replica promoted after $(since "$t0")"
  # Restarted as the new primary's replica: it never serves as a primary with its old data.
  rds_node "$primary" "$replica"
  # A Sentinel that misses the new primary's answers for down-after-milliseconds (a stall of
  # this shared machine) fails over again, back to the restarted node: then the roles settle
  # the other way round, which is said, not failed.
  rds_wait 60 rds_settled || rds_fail "node $primary did not rejoin as node $replica's replica"
  if rds_agreed "$replica" "$primary"; then
    note "redis-sentinel: node $primary replicates node $replica after $(since "$t0")"
  else
    echo "$primary" >"$rds_dir/primary"
    note "redis-sentinel: the Sentinels failed over again, back to node $primary; node $replica replicates it" \
      "after $(since "$t0")"
  fi
}
rds_settled() { rds_agreed 1 2 || rds_agreed 2 1; }  # one primary, its replica healthy, all agree
