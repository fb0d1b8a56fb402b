# shellcheck shell=bash
# zookeeper-ensemble: three ZooKeeper 3.8 servers in one ensemble (a quorum is two), each in its
# own JVM and data dir, for the failover tests: client ports ${DBLOCK_ZK_ENSEMBLE_PORT:-21821} and
# the next two, quorum ports 10 above them, election ports 20 above. Not started by default.
# `crash` kills the leader (SIGKILL), waits until the other two have elected another, and
# starts the killed one again as a follower: one leader failover per call.
# The URL names all three: zookeeper://127.0.0.1:21821,127.0.0.1:21822,127.0.0.1:21823/dblock.
# env: DBLOCK_TEST_ZK_ENSEMBLE_URL, and DBLOCK_TEST_ZK_ENSEMBLE_FAILOVER, the `crash` command.
# Uses zookeeper.sh's zk_alive, zk_mode and zk_launch.

zke_base=${DBLOCK_ZK_ENSEMBLE_PORT:-21821}
zke_dir="$state/zookeeper-ensemble"
zke_url="zookeeper://127.0.0.1:$zke_base,127.0.0.1:$((zke_base + 1)),127.0.0.1:$((zke_base + 2))/dblock"
zke_pid() {  # zke_pid NODE (1-3)
  local pid
  pid=$(head -n 1 "$zke_dir/node$1/zk.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] && zk_alive "$pid" "$zke_dir/node$1/zoo.cfg" && echo "$pid"
  return 0
}
zke_mode() { zk_mode $((zke_base + $1 - 1)); }
zke_qport() { echo $((zke_base + 9 + $1)); }   # node 1-3's quorum port
zke_eport() { echo $((zke_base + 19 + $1)); }  # node 1-3's election port
ports_zookeeper-ensemble() { echo "$zke_base $((zke_base + 1)) $((zke_base + 2))"; }
peer_ports_zookeeper-ensemble() { echo "$(zke_qport 1) $(zke_qport 2) $(zke_qport 3) $(zke_eport 1) $(zke_eport 2) $(zke_eport 3)"; }
zke_leader() {  # the node that says it leads, if any
  local i
  for i in 1 2 3; do [ "$(zke_mode "$i")" = leader ] && { echo "$i"; return 0; }; done
  return 0
}
zke_serving() {  # zke_serving NODE...: each serves as leader or follower, and one leads
  local n mode
  for n in "$@"; do
    mode=$(zke_mode "$n")
    [ "$mode" = leader ] || [ "$mode" = follower ] || return 1
  done
  [ -n "$(zke_leader)" ]
}
zke_wait() {  # zke_wait NODE...: zke_serving within 60 s
  local i
  for (( i = 0; i < 600; i++ )); do
    zke_serving "$@" && return 0
    sleep 0.1
  done
  return 1
}
zke_start_node() {  # zke_start_node NODE: unless it runs
  local n=$1 d="$zke_dir/node$1" i
  [ -n "$(zke_pid "$n")" ] && return 0
  mkdir -p "$d/data"
  echo "$n" >"$d/data/myid"
  rm -f "$d/zk.pid"
  {
    echo "# Written by scripts/services at every start; edits are lost."
    printf '%s\n' "tickTime=250" "initLimit=20" "syncLimit=8" "minSessionTimeout=500" "maxSessionTimeout=60000" \
      "dataDir=$d/data" "clientPort=$((zke_base + n - 1))" "clientPortAddress=127.0.0.1" "maxClientCnxns=0" \
      "admin.enableServer=false" "4lw.commands.whitelist=srvr,ruok,cons,stat"
    for i in 1 2 3; do
      echo "server.$i=127.0.0.1:$(zke_qport "$i"):$(zke_eport "$i")"
    done
  } >"$d/zoo.cfg"
  zk_launch "$d" >/dev/null
}
zke_stop_node() {  # zke_stop_node NODE SIGNAL
  local pid i
  pid=$(zke_pid "$1")
  [ -n "$pid" ] || return 0
  kill -"$2" "$pid" 2>/dev/null || true
  for (( i = 0; i < 200; i++ )); do
    zk_alive "$pid" "$zke_dir/node$1/zoo.cfg" || break
    sleep 0.05
  done
  if zk_alive "$pid" "$zke_dir/node$1/zoo.cfg"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$zke_dir/node$1/zk.pid"
}
zke_fail() {  # zke_fail MESSAGE: with each node's last log lines
  local i
  note "zookeeper-ensemble: $1"
  for i in 1 2 3; do log_tail "$zke_dir/node$i/server.log"; done
  exit 1
}
running_zookeeper-ensemble() { [ -n "$(zke_pid 1)" ] && [ -n "$(zke_pid 2)" ] && [ -n "$(zke_pid 3)" ]; }
env_zookeeper-ensemble() {
  printf 'export DBLOCK_TEST_ZK_ENSEMBLE_URL=%q\n' "$zke_url"
  printf 'export DBLOCK_TEST_ZK_ENSEMBLE_FAILOVER=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_ZK_ENSEMBLE_PORT=$zke_base $(printf %q "$self") crash zookeeper-ensemble"
}
start_zookeeper-ensemble() {
  local t0 i
  t0=$(now)
  [ -r /usr/share/java/zookeeper.jar ] ||
    die "zookeeper-ensemble: no /usr/share/java/zookeeper.jar (install libzookeeper-java with scripts/deps test)"
  [[ "$zke_base" =~ ^[0-9]+$ ]] || die "zookeeper-ensemble: DBLOCK_ZK_ENSEMBLE_PORT=$zke_base is not a port number"
  for i in 1 2 3; do zke_start_node "$i"; done
  zke_wait 1 2 3 || zke_fail "did not form a quorum of three on 127.0.0.1:$zke_base-$((zke_base + 2))"
  note "zookeeper-ensemble: ready in $(since "$t0") (leader: node $(zke_leader)) at $zke_url"
}
stop_zookeeper-ensemble() {
  local i
  for i in 3 2 1; do zke_stop_node "$i" TERM; done
  note "zookeeper-ensemble: stopped"
}
crash_zookeeper-ensemble() {
  local t0 leader others=() i
  t0=$(now)
  running_zookeeper-ensemble || die "zookeeper-ensemble: not running (start it first)"
  zke_wait 1 2 3 || zke_fail "no leader to kill"
  leader=$(zke_leader)
  for i in 1 2 3; do [ "$i" = "$leader" ] || others+=("$i"); done
  zke_stop_node "$leader" KILL
  zke_wait "${others[@]}" || zke_fail "the two left elected no leader"
  note "zookeeper-ensemble: killed leader node $leader; node $(zke_leader) leads after $(since "$t0")"
  zke_start_node "$leader"
  zke_wait 1 2 3 || zke_fail "node $leader did not rejoin"
  note "zookeeper-ensemble: node $leader rejoined after $(since "$t0")"
}
