# shellcheck shell=bash
# etcd: etcd 3.4 single node on ${DBLOCK_ETCD_PORT:-23799} (its peer port the next one):
#   etcd://127.0.0.1:23799/dblock, and DBLOCK_TEST_ETCD_RESTART, a command that restarts this
#   very server (DBLOCK_ETCD_SERVER picks another etcd).
# A single-member etcd 3.4 cluster (Debian's etcd-server). Heartbeat 50 ms and election
# timeout 500 ms, so that the server's minimum lease TTL (1.5 election timeouts, rounded up to
# whole seconds: 2 s with etcd's defaults) is 1 s and short test TTLs map to 1 s leases. Data
# (keys, leases, revisions) survive a restart.

etcd_port=${DBLOCK_ETCD_PORT:-23799}
etcd_bin=${DBLOCK_ETCD_SERVER:-/usr/bin/etcd}
etcd_dir="$state/etcd"
etcd_url="etcd://127.0.0.1:$etcd_port/dblock"
ports_etcd() { echo "$etcd_port"; }
peer_ports_etcd() { echo $((etcd_port + 1)); }
etcd_alive() {  # etcd_alive PID: a live (not zombie) etcd serving our data dir
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "$stat" == *"(etcd) "[!Z]* ]] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$etcd_dir/data"
}
etcd_pid() {
  local pid
  pid=$(head -n 1 "$etcd_dir/etcd.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] && etcd_alive "$pid" && echo "$pid"
  return 0
}
etcd_ready() {  # GET /health answers {"health":"true"} once the member has a leader
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
            printf "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && cat <&3' _ "$etcd_port" \
          2>/dev/null 9>&-) || return 1
  [[ "$reply" == *'"health":"true"'* ]]
}
running_etcd() { [ -n "$(etcd_pid)" ]; }
env_etcd() {
  printf 'export DBLOCK_TEST_ETCD_URL=%q\n' "$etcd_url"
  printf 'export DBLOCK_TEST_ETCD_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_ETCD_PORT=$etcd_port $(printf %q "$self") restart etcd"
}
start_etcd() {
  local t0 pid i off peer
  t0=$(now)
  [ -x "$etcd_bin" ] || die "etcd: no server at $etcd_bin (install etcd-server with scripts/deps test)"
  [[ "$etcd_port" =~ ^[0-9]+$ ]] || die "etcd: DBLOCK_ETCD_PORT=$etcd_port is not a port number"
  peer=$(peer_ports_etcd)
  pid=$(etcd_pid)
  if [ -n "$pid" ]; then
    etcd_ready || die "etcd: already running (pid $pid) but not healthy on 127.0.0.1:$etcd_port"
    note "etcd: already running (pid $pid) at $etcd_url"
    return 0
  fi
  mkdir -p "$etcd_dir"
  rm -f "$etcd_dir/etcd.pid"
  off=$(file_size "$etcd_dir/server.log")
  # --initial-cluster-state new is ignored once the data dir holds a member: a restart rejoins.
  (cd "$etcd_dir" && exec setsid "$etcd_bin" --name dblock --data-dir "$etcd_dir/data" \
      --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "dblock=http://127.0.0.1:$peer" --initial-cluster-state new \
      --heartbeat-interval 50 --election-timeout 500 --logger zap --log-outputs stderr \
      </dev/null >>"$etcd_dir/server.log" 2>&1 9>&-) &
  pid=$!
  echo "$pid" >"$etcd_dir/etcd.pid"
  for (( i = 0; i < 300; i++ )); do
    if ! etcd_alive "$pid" && [ "$i" -gt 5 ]; then
      note "etcd: exited while starting"; log_tail "$etcd_dir/server.log" "$off"; exit 1
    fi
    etcd_ready && break
    sleep 0.1
  done
  if [ "$i" -ge 300 ]; then
    note "etcd: not healthy on 127.0.0.1:$etcd_port"; log_tail "$etcd_dir/server.log" "$off"; exit 1
  fi
  note "etcd: ready in $(since "$t0") (pid $pid) at $etcd_url"
}
stop_etcd() {
  local pid i
  pid=$(etcd_pid)
  if [ -z "$pid" ]; then
    rm -f "$etcd_dir/etcd.pid"
    note "etcd: not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < 200; i++ )); do
    etcd_alive "$pid" || break
    sleep 0.05
  done
  if etcd_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$etcd_dir/etcd.pid"
  note "etcd: stopped"
}
