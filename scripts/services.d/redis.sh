# shellcheck shell=bash
# redis: Redis 7 on ${DBLOCK_REDIS_PORT:-63790}: redis://127.0.0.1:63790, and
#   DBLOCK_TEST_REDIS_RESTART, a command that restarts this very server (DBLOCK_REDIS_SERVER
#   picks another redis-server).
# A redis-server process (Debian's redis-server; the distribution's own instance is not used).
# It keeps an append-only file synced every second, so a restart keeps its keys (held leases
# and the fence counters); SHUTDOWN writes it out completely. The rd_* functions here start and
# stop every Redis node of scripts/services: redlock.sh's and redis-sentinel.sh's too.

rd_server=${DBLOCK_REDIS_SERVER:-/usr/bin/redis-server}
rd_port=${DBLOCK_REDIS_PORT:-63790}
ports_redis() { echo "$rd_port"; }

rd_alive() {  # rd_alive PID: a live (not zombie) redis-server
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "$stat" == *"(redis-server) "[!Z]* ]]
}
rd_pid() {  # rd_pid DIR: the pid of the live server of DIR, else nothing
  local pid
  pid=$(head -n 1 "$1/redis.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] && rd_alive "$pid" && echo "$pid"
  return 0
}
# A TLS node's start and stop set this: redis-cli's TLS options, for PING and SHUTDOWN.
rd_cli_tls=()
rd_ping() {  # rd_ping PORT: PONG over TCP, with bash's /dev/tcp (no client needed), or redis-cli over TLS
  local reply
  if [ ${#rd_cli_tls[@]} -gt 0 ]; then
    reply=$(timeout 2 redis-cli -h 127.0.0.1 -p "$1" "${rd_cli_tls[@]}" ping 2>/dev/null 9>&-) || return 1
    [[ "$reply" == "PONG"* ]]
    return
  fi
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "PING\r\n" >&3 && head -c 5 <&3' _ "$1" \
          2>/dev/null 9>&-) || return 1
  [[ "$reply" == "+PONG"* ]]
}
rd_start() {  # rd_start LABEL DIR PORT [SERVER OPTION...]: the options come last, so they win
  local label=$1 dir=$2 port=$3 t0 pid i off
  shift 3
  t0=$(now)
  [ -x "$rd_server" ] || die "$label: no server at $rd_server (install redis-server with scripts/deps test)"
  [[ "$port" =~ ^[0-9]+$ ]] || die "$label: port $port is not a number"
  pid=$(rd_pid "$dir")
  if [ -n "$pid" ]; then
    rd_ping "$port" || die "$label: already running (pid $pid) but not answering on 127.0.0.1:$port"
    return 0
  fi
  mkdir -p "$dir"
  rm -f "$dir/redis.pid"
  off=$(file_size "$dir/server.log")
  # No config file: every setting is here. Protected mode off: it binds to 127.0.0.1 only.
  # 4096 databases: each test takes one of its own (the redis backends ignore --table).
  # appendfsync everysec, not always: the tests' fences do not rely on the last second of
  # writes (the clock floor, docs/ARCHITECTURE.md), and fsync per grant would slow them.
  (cd "$dir" && exec setsid "$rd_server" --bind 127.0.0.1 --port "$port" --dir "$dir" \
      --pidfile "$dir/redis.pid" --logfile "$dir/server.log" --daemonize no --protected-mode no \
      --save '' --appendonly yes --appendfsync everysec --maxclients 1000 --databases 4096 "$@" \
      </dev/null >>"$dir/server.log" 2>&1 9>&-) &
  for (( i = 0; i < 100; i++ )); do
    rd_ping "$port" && break
    sleep 0.05
  done
  if [ "$i" -ge 100 ]; then
    note "$label: did not answer on 127.0.0.1:$port"
    log_tail "$dir/server.log" "$off"
    exit 1
  fi
  note "$label: ready in $(since "$t0") at redis://127.0.0.1:$port"
}
rd_stop() {  # rd_stop LABEL DIR PORT: SHUTDOWN (writes the append-only file), then wait
  local label=$1 dir=$2 port=$3 pid i how
  pid=$(rd_pid "$dir")
  if [ -z "$pid" ]; then
    note "$label: not running"
    return 0
  fi
  if [ ${#rd_cli_tls[@]} -gt 0 ]; then
    timeout 5 redis-cli -h 127.0.0.1 -p "$port" "${rd_cli_tls[@]}" shutdown >/dev/null 2>&1 9>&- || true
  else
    timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "SHUTDOWN\r\n" >&3 && cat <&3' _ "$port" \
      >/dev/null 2>&1 9>&- || true
  fi
  for (( i = 0; i < 200; i++ )); do
    rd_alive "$pid" || break
    [ "$i" != 40 ] || kill -TERM "$pid" 2>/dev/null || true
    sleep 0.05
  done
  how=""
  [ "$i" -le 40 ] || how=" (SHUTDOWN took over 2 s: SIGTERM)"
  if rd_alive "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    how=" (killed after 10 s: the last second of writes may be lost)"
  fi
  rm -f "$dir/redis.pid"
  note "$label: stopped$how"
}

running_redis() { [ -n "$(rd_pid "$state/redis")" ]; }
env_redis() {
  printf 'export DBLOCK_TEST_REDIS_URL=%q\n' "redis://127.0.0.1:$rd_port"
  printf 'export DBLOCK_TEST_REDIS_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_REDIS_PORT=$rd_port $(printf %q "$self") restart redis"
}
start_redis() { rd_start redis "$state/redis" "$rd_port"; }
stop_redis() { rd_stop redis "$state/redis" "$rd_port"; }
