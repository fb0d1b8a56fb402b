# shellcheck shell=bash
# pgbouncer: PgBouncer 1.18 (Debian's) on ${DBLOCK_PGBOUNCER_PORT:-54349} in front of the
#   `postgresql` service's database, in pool_mode = transaction with 20 server connections:
#   how a large share of PostgreSQL deployments connect. `env` prints
#   DBLOCK_TEST_PGBOUNCER_URL=postgresql://dblock:dblock@127.0.0.1:54349/dblock?pooler=transaction&listen_port=54329
#   (dblock's parameters: through a transaction pooler, the release listener on the server itself).
# Start `postgresql` too: PgBouncer connects to it when a client first needs a server session.

pgb_port=${DBLOCK_PGBOUNCER_PORT:-54349}
pgb_dir="$state/pgbouncer"
ports_pgbouncer() { echo "$pgb_port"; }

pgb_pid() {  # the pid of our live pgbouncer, else nothing
  local pid stat
  pid=$(head -n 1 "$pgb_dir/pgbouncer.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  [[ "$stat" == *"(pgbouncer) "[!Z]* ]] && echo "$pid"
  return 0
}
pgb_answers() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$pgb_port" 2>/dev/null 9>&-; }

running_pgbouncer() { [ -n "$(pgb_pid)" ]; }
env_pgbouncer() {
  printf 'export DBLOCK_TEST_PGBOUNCER_URL=%q\n' \
    "postgresql://dblock:dblock@127.0.0.1:$pgb_port/dblock?pooler=transaction&listen_port=$pg_port"
}
start_pgbouncer() {
  local t0 pid i off
  t0=$(now)
  command -v pgbouncer >/dev/null || die "pgbouncer: not installed (scripts/deps test installs it)"
  pid=$(pgb_pid)
  if [ -n "$pid" ]; then
    pgb_answers || die "pgbouncer: already running (pid $pid) but not answering on 127.0.0.1:$pgb_port"
    return 0
  fi
  mkdir -p "$pgb_dir"
  # Written at every start. The password file holds the test role's password in the clear:
  # PgBouncer then answers the client's SCRAM exchange and makes its own to the server.
  # 20 server connections of the server's 200; clients beyond them queue in PgBouncer.
  printf '"dblock" "dblock"\n' >"$pgb_dir/userlist.txt"
  cat >"$pgb_dir/pgbouncer.ini" <<EOF
; Written by scripts/services at every start; edits are lost.
[databases]
dblock = host=127.0.0.1 port=$pg_port dbname=dblock
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pgb_port
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $pgb_dir/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_db_connections = 20
max_client_conn = 900
pidfile = $pgb_dir/pgbouncer.pid
logfile = $pgb_dir/pgbouncer.log
log_connections = 0
log_disconnections = 0
EOF
  chmod 600 "$pgb_dir/userlist.txt"
  [ "$is_root" = 0 ] || chown -R postgres: "$pgb_dir"
  rm -f "$pgb_dir/pgbouncer.pid"
  off=$(file_size "$pgb_dir/pgbouncer.log")
  # It refuses to run as root: -u drops to the postgres user, as the server does.
  local as=()
  [ "$is_root" = 0 ] || as=(-u postgres)
  (cd "$pgb_dir" && exec setsid pgbouncer "${as[@]}" "$pgb_dir/pgbouncer.ini" </dev/null \
      >>"$pgb_dir/stdout.log" 2>&1 9>&-) &
  for (( i = 0; i < 100; i++ )); do
    [ -n "$(pgb_pid)" ] && pgb_answers && break
    sleep 0.05
  done
  if [ "$i" -ge 100 ]; then
    note "pgbouncer: did not answer on 127.0.0.1:$pgb_port"
    log_tail "$pgb_dir/pgbouncer.log" "$off"
    log_tail "$pgb_dir/stdout.log"
    exit 1
  fi
  note "pgbouncer: ready in $(since "$t0") at postgresql://dblock:****@127.0.0.1:$pgb_port/dblock (transaction pooling)"
}
stop_pgbouncer() {
  local pid i
  pid=$(pgb_pid)
  if [ -z "$pid" ]; then
    note "pgbouncer: not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true  # immediate shutdown: clients are cut off
  for (( i = 0; i < 100; i++ )); do
    [ -n "$(pgb_pid)" ] || break
    sleep 0.05
  done
  [ -z "$(pgb_pid)" ] || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pgb_dir/pgbouncer.pid"
  note "pgbouncer: stopped"
}
