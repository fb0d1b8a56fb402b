# shellcheck shell=bash
# etcd: etcd 3.4 single node on ${DBLOCK_ETCD_PORT:-23799} (its peer port the next one):
#   etcd://127.0.0.1:23799/dblock, and DBLOCK_TEST_ETCD_RESTART, a command that restarts this
#   very server (DBLOCK_ETCD_SERVER picks another etcd).
# A single-member etcd 3.4 cluster (Debian's etcd-server). Heartbeat 50 ms and election
# timeout 500 ms, so that the server's minimum lease TTL (1.5 election timeouts, rounded up to
# whole seconds: 2 s with etcd's defaults) is 1 s and short test TTLs map to 1 s leases. Data
# (keys, leases, revisions) survive a restart. etcd-tls.sh runs a second one the same way.

etcd_port=${DBLOCK_ETCD_PORT:-23799}
etcd_bin=${DBLOCK_ETCD_SERVER:-/usr/bin/etcd}
etcd_dir="$state/etcd"
etcd_url="etcd://127.0.0.1:$etcd_port/dblock"
ports_etcd() { echo "$etcd_port"; }
peer_ports_etcd() { echo $((etcd_port + 1)); }
etcd_alive() {  # etcd_alive PID DIR: a live (not zombie) etcd serving DIR's data
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "$stat" == *"(etcd) "[!Z]* ]] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$2/data"
}
etcd_pid() {  # etcd_pid DIR
  local pid
  pid=$(head -n 1 "$1/etcd.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] && etcd_alive "$pid" "$1" && echo "$pid"
  return 0
}
etcd_ready() {  # GET /health answers {"health":"true"} once the member has a leader
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
            printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && cat <&3' _ "$etcd_port" \
          2>/dev/null 9>&-) || return 1
  [[ "$reply" == *'"health":"true"'* ]]
}
running_etcd() { [ -n "$(etcd_pid "$etcd_dir")" ]; }
env_etcd() {
  printf 'export DBLOCK_TEST_ETCD_URL=%q\n' "$etcd_url"
  printf 'export DBLOCK_TEST_ETCD_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_ETCD_PORT=$etcd_port $(printf %q "$self") restart etcd"
}
# etcd_start NAME DIR PORT SCHEME READY URL [SERVER ARGS...]: starts one member serving clients
# on SCHEME://127.0.0.1:PORT (its peers on PORT+1, plain) unless it runs, and waits until the
# command READY succeeds.
etcd_start() {
  local name=$1 dir=$2 port=$3 scheme=$4 ready=$5 url=$6 t0 pid i off peer
  shift 6
  t0=$(now)
  [ -x "$etcd_bin" ] || die "$name: no server at $etcd_bin (install etcd-server with scripts/deps test)"
  [[ "$port" =~ ^[0-9]+$ ]] || die "$name: port $port is not a number"
  peer=$((port + 1))
  pid=$(etcd_pid "$dir")
  if [ -n "$pid" ]; then
    "$ready" || die "$name: already running (pid $pid) but not healthy on 127.0.0.1:$port"
    note "$name: already running (pid $pid) at $url"
    return 0
  fi
  mkdir -p "$dir"
  rm -f "$dir/etcd.pid"
  off=$(file_size "$dir/server.log")
  # --initial-cluster-state new is ignored once the data dir holds a member: a restart rejoins.
  (cd "$dir" && exec setsid "$etcd_bin" --name dblock --data-dir "$dir/data" \
      --listen-client-urls "$scheme://127.0.0.1:$port" --advertise-client-urls "$scheme://127.0.0.1:$port" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "dblock=http://127.0.0.1:$peer" --initial-cluster-state new \
      --heartbeat-interval 50 --election-timeout 500 --logger zap --log-outputs stderr "$@" \
      </dev/null >>"$dir/server.log" 2>&1 9>&-) &
  pid=$!
  echo "$pid" >"$dir/etcd.pid"
  for (( i = 0; i < 300; i++ )); do
    if ! etcd_alive "$pid" "$dir" && [ "$i" -gt 5 ]; then
      note "$name: exited while starting"; log_tail "$dir/server.log" "$off"; exit 1
    fi
    "$ready" && break
    sleep 0.1
  done
  if [ "$i" -ge 300 ]; then
    note "$name: not healthy on 127.0.0.1:$port"; log_tail "$dir/server.log" "$off"; exit 1
  fi
  note "$name: ready in $(since "$t0") (pid $pid) at $url"
}
etcd_stop() {  # etcd_stop NAME DIR
  local pid i
  pid=$(etcd_pid "$2")
  if [ -z "$pid" ]; then
    rm -f "$2/etcd.pid"
    note "$1: not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < 200; i++ )); do
    etcd_alive "$pid" "$2" || break
    sleep 0.05
  done
  if etcd_alive "$pid" "$2"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$2/etcd.pid"
  note "$1: stopped"
}
start_etcd() { etcd_start etcd "$etcd_dir" "$etcd_port" http etcd_ready "$etcd_url"; }
stop_etcd() { etcd_stop etcd "$etcd_dir"; }
