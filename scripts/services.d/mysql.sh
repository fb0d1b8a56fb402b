# shellcheck shell=bash
# mysql: MariaDB 10.11 on ${DBLOCK_MYSQL_PORT:-33069}: mysql://dblock:dblock@127.0.0.1:33069/dblock,
#   and DBLOCK_TEST_MYSQL_RESTART, a command that restarts this very server (DBLOCK_MYSQL_SERVER
#   picks another mariadbd). `crash` is a SIGKILL, then a start (crash recovery).
# A MariaDB server (Debian's mariadb-server), started with --no-defaults so that nothing
# in /etc/mysql or ~/.my.cnf applies. As root it runs as the `mysql` OS user (--user=mysql).
# Durable like a production server (innodb_flush_log_at_trx_commit=1, the benchmarks rely on
# it), but small: 64M buffer pool, no performance_schema, no binlog. DBLOCK_SERVICES_FLUSH=off
# at its start: innodb_flush_log_at_trx_commit=2 (the redo log flushed once a second, not at
# each commit; for the benchmarks' flush-off runs, never for the tests).
# mysql-replicated.sh uses my_server, my_admin, my_setup_sql and my_launched_alive from here;
# mysql-tls.sh the whole of it, for a second server (my_use).

my_server=${DBLOCK_MYSQL_SERVER:-/usr/sbin/mariadbd}
my_use() {  # my_use NAME DIR PORT: the server the functions below start, stop and check
  my_name=$1 my_dir=$2 my_port=$3
  my_data="$my_dir/data"
  my_run="$my_dir/run"
  my_sock="$my_run/mysqld.sock"
  my_pidfile="$my_run/mysqld.pid"
  my_tmp="$my_dir/tmp"
  my_log="$my_dir/server.log"
  my_url="mysql://dblock:dblock@127.0.0.1:$my_port/dblock"
  my_opts=()        # more server options
  my_client_tls=()  # the mariadb client's TLS options for the TCP login check
}
my_use mysql "$state/mysql" "${DBLOCK_MYSQL_PORT:-33069}"
ports_mysql() { echo "$my_port"; }
if [ "$is_root" = 1 ]; then
  my_os_user=mysql  # owns the files; the server drops to it with --user
  my_admin=root     # the unix_socket-authenticated MariaDB account scripts/services uses
else
  my_os_user=$(id -un)
  my_admin=$my_os_user
fi

my_fail() {  # my_fail MESSAGE [LOG_OFFSET]
  note "$my_name: $1"
  log_tail "$my_log" "${2:-0}"
  exit 1
}

# Builtins only (read, mapfile), no command: my_pid runs these on every process of the
# machine, and a fork per process took 30-40 s of a restart under the test suite's load.
my_alive() {  # my_alive PID: PID is a live (not zombie) mariadbd serving our data dir
  local stat arg args
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  [[ "$stat" == *"(mariadbd) "[!Z]* || "$stat" == *"(mysqld) "[!Z]* ]] || return 1
  mapfile -d '' args 2>/dev/null <"/proc/$1/cmdline" || return 1
  for arg in "${args[@]}"; do [ "$arg" != "--datadir=$my_data" ] || return 0; done
  return 1
}

my_launched_alive() {  # my_launched_alive PID: still alive (before its exec it is not yet mariadbd)
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  [[ "$stat" != *") Z "* ]]
}

my_pid() {  # the server's pid if one is alive for our data dir, else nothing
  local pid p
  pid=""
  read -r pid 2>/dev/null <"$my_pidfile" || true  # (a last line without its newline is still read)
  if [[ "$pid" =~ ^[0-9]+$ ]] && my_alive "$pid"; then echo "$pid"; return 0; fi
  # No (valid) pid file: the server may be starting or shutting down, or the file was removed.
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    if my_alive "$p"; then echo "$p"; return 0; fi
  done
  return 0
}

my_sql() {  # my_sql SQL: run statements as the admin account over the unix socket
  mariadb --no-defaults --protocol=socket --socket="$my_sock" -u "$my_admin" --connect-timeout=5 \
    --batch --skip-column-names -e "$1" 9>&-
}

my_tcp_ok() {  # the dblock account can log in over TCP and use its database
  mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$my_port" -u dblock -pdblock "${my_client_tls[@]}" \
    --connect-timeout=2 -D dblock -e 'SELECT 1' >/dev/null 2>&1 9>&-
}

my_version() { "$my_server" --version 2>/dev/null | sed -E 's/.* Ver ([0-9]+\.[0-9]+).*/\1/'; }

my_data_valid() {  # a data dir that mariadb-install-db completed, for the same major version
  [ -f "$my_data/dblock-install.ok" ] && [ -d "$my_data/mysql" ] || return 1
  [ "$(cat "$my_data/dblock-install.ok")" = "$(my_version)" ]
}

# The account and database, idempotently (also repairs a half-made earlier run). ALL on *.*
# includes SUPER/CONNECTION ADMIN (KILL of other sessions) and PROCESS: a throwaway server.
my_setup_sql="
CREATE DATABASE IF NOT EXISTS dblock CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE USER IF NOT EXISTS 'dblock'@'127.0.0.1' IDENTIFIED BY 'dblock';
CREATE USER IF NOT EXISTS 'dblock'@'localhost' IDENTIFIED BY 'dblock';
ALTER USER 'dblock'@'127.0.0.1' IDENTIFIED BY 'dblock';
ALTER USER 'dblock'@'localhost' IDENTIFIED BY 'dblock';
GRANT ALL PRIVILEGES ON *.* TO 'dblock'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'dblock'@'localhost' WITH GRANT OPTION;
"

running_mysql() { [ -n "$(my_pid)" ]; }
env_mysql() {  # the URL, and a command (for sh) that restarts this very server
  local extra=""
  [ -z "${DBLOCK_MYSQL_SERVER:-}" ] || extra=" DBLOCK_MYSQL_SERVER=$(printf %q "$my_server")"
  printf 'export DBLOCK_TEST_MYSQL_URL=%q\n' "$my_url"
  printf 'export DBLOCK_TEST_MYSQL_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_MYSQL_PORT=$my_port$extra $(printf %q "$self") restart mysql"
}

start_mysql() {
  local t0 pid out off i c why user_opt=() opts
  t0=$(now)
  [ -x "$my_server" ] ||
    die "mysql: no server at $my_server (install it with scripts/deps test, or set DBLOCK_MYSQL_SERVER)"
  for c in mariadb mariadb-install-db; do
    command -v "$c" >/dev/null ||
      die "mysql: no $c command (install mariadb-server and mariadb-client: scripts/deps test)"
  done
  [ "$is_root" = 0 ] || getent passwd mysql >/dev/null ||
    die "mysql: no 'mysql' OS user to run the server as (install the mariadb-server package)"
  [[ "$my_port" =~ ^[0-9]+$ ]] || die "mysql: DBLOCK_MYSQL_PORT=$my_port is not a port number"
  # A unix socket path holds at most 107 bytes (and mariadbd adds a .lock file next to it).
  [ $(( ${#my_sock} + 5 )) -le 107 ] ||
    die "mysql: socket path $my_sock is too long; set a shorter DBLOCK_SERVICES_DIR"
  [ "$is_root" = 0 ] || user_opt=(--user=mysql)

  pid=$(my_pid)
  if [ -n "$pid" ]; then
    if ! my_tcp_ok; then  # perhaps an earlier start died before making the account
      out=$(my_sql "$my_setup_sql" 2>&1) ||
        my_fail "already running (pid $pid) but the dblock account cannot be made: $out"
      my_tcp_ok || my_fail "already running (pid $pid) but not answering on 127.0.0.1:$my_port"
    fi
    note "$my_name: already running (pid $pid) at $my_url"
    return 0
  fi

  mkdir -p "$state"
  [ "$is_root" = 0 ] || chmod go+x "$state"  # the mysql user must reach its directory
  mkdir -p "$my_dir" "$my_run" "$my_tmp"
  chmod 755 "$my_dir"
  chmod 700 "$my_tmp"
  touch "$my_log"
  if [ "$is_root" = 1 ]; then
    chown -R mysql: "$my_dir"  # also takes over a data dir an ordinary user made
    runuser -u mysql -- test -w "$my_dir" -a -x "$my_dir" ||
      die "mysql: the mysql user cannot write $my_dir; set DBLOCK_SERVICES_DIR (e.g. under /tmp)"
  fi
  # Stale if present: no live server has our data dir.
  rm -f "$my_pidfile" "$my_sock" "$my_sock.lock"

  if [ -d "$my_data" ] && ! my_data_valid; then
    note "$my_name: recreating unusable data dir $my_data"
    rm -rf "$my_data"
  fi
  if [ ! -d "$my_data" ]; then
    # Unknown options go to `mariadbd --bootstrap`; durability does not matter while it runs
    # (a failed install is redone, as dblock-install.ok is written last).
    out=$(cd "$my_dir" && mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$my_data" \
            --auth-root-authentication-method=socket --auth-root-socket-user="$my_admin" \
            --skip-test-db --skip-name-resolve --tmpdir="$my_tmp" \
            --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
            --performance-schema=OFF --skip-log-bin \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_bin 2>&1 9>&-) || {
      note "$my_name: mariadb-install-db failed in $my_data"; printf '%s\n' "$out" | tail -n 25 >&2; exit 1; }
    my_version >"$my_data/dblock-install.ok"
    [ "$is_root" = 0 ] || chown mysql: "$my_data/dblock-install.ok"
  fi

  opts=(--no-defaults "${user_opt[@]}"
    --datadir="$my_data" --socket="$my_sock" --pid-file="$my_pidfile" --log-error="$my_log"
    --tmpdir="$my_tmp"
    --bind-address=127.0.0.1 --port="$my_port" --skip-name-resolve
    --max-connections=600
    --innodb-buffer-pool-size=64M --performance-schema=OFF
    --innodb-flush-log-at-trx-commit="$([ "${DBLOCK_SERVICES_FLUSH:-on}" = off ] && echo 2 || echo 1)"
    --skip-log-bin
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin
    --default-time-zone=+00:00 "${my_opts[@]}")
  off=$(file_size "$my_log")
  # setsid: its own session, so the caller's Ctrl-C or job teardown does not reach it.
  (cd "$my_dir" && exec setsid "$my_server" "${opts[@]}" </dev/null >>"$my_log" 2>&1 9>&-) &
  pid=$!
  for (( i = 0; i < 600; i++ )); do  # 60s: a crash recovery can take a while
    if ! my_launched_alive "$pid"; then
      why=$(tail -c +"$((off + 1))" "$my_log" 2>/dev/null | grep -E '\[ERROR\]' | head -n 1 |
            sed -E 's/.*\[ERROR\] +//') || true
      my_fail "did not start on 127.0.0.1:$my_port: ${why:-see the log}" "$off"
    fi
    my_sql 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.1
  done
  [ "$i" -lt 600 ] || my_fail "started (pid $pid) but its socket $my_sock does not answer" "$off"

  out=$(my_sql "$my_setup_sql" 2>&1) ||
    my_fail "could not create the dblock account and database: $out" "$off"
  [ -z "${my_more_sql:-}" ] || out=$(my_sql "$my_more_sql" 2>&1) ||
    my_fail "could not set its accounts up: $out" "$off"
  for (( i = 0; i < 50; i++ )); do
    my_tcp_ok && break
    sleep 0.1
  done
  [ "$i" -lt 50 ] || my_fail "started but dblock cannot log in on 127.0.0.1:$my_port" "$off"
  note "$my_name: ready in $(since "$t0") (pid $pid) at $my_url"
}

my_threads() {  # my_threads PID SECONDS: the server's threads (state, wait channel, name) to its log
  { echo "scripts/services: pid $1 still running ${2}s after SIGTERM; its threads (count state wchan name):"
    for t in /proc/"$1"/task/*; do
      echo "  $(awk '{print $3}' "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null) $(cat "$t/comm" 2>/dev/null)"
    done | sort | uniq -c; } >>"$my_log" 2>/dev/null
}

stop_mysql() {
  local pid off i
  pid=$(my_pid)
  if [ -z "$pid" ]; then
    rm -f "$my_pidfile"
    note "$my_name: not running"
    return 0
  fi
  off=$(file_size "$my_log")
  # SIGTERM is MariaDB's normal shutdown (InnoDB flushed; no crash recovery at the next start).
  kill -TERM "$pid" 2>/dev/null || true
  # Seen twice in CI under load: "Shutdown complete" logged, and the process still there 55-60 s
  # later (a lease test's 30 s TTL ran out across the restart). Its threads' states and wait
  # channels go to the server log at 10 s and again at 60 s, for the next look.
  for (( i = 0; i < 600; i++ )); do
    my_alive "$pid" || break
    [ "$i" != 100 ] || my_threads "$pid" 10
    sleep 0.1
  done
  if [ "$i" -ge 600 ]; then
    my_threads "$pid" 60
    note "$my_name: pid $pid did not shut down in 60s; killing it (its threads: $my_log)"
    kill -KILL "$pid" 2>/dev/null || true
    for (( i = 0; i < 100; i++ )); do
      my_alive "$pid" || break
      sleep 0.1
    done
    [ "$i" -lt 100 ] || my_fail "could not stop pid $pid" "$off"
  fi
  rm -f "$my_pidfile"
  note "$my_name: stopped"
}

crash_mysql() {  # SIGKILL: InnoDB recovers from its redo log at the next start
  local pid i
  pid=$(my_pid)
  [ -n "$pid" ] || die "$my_name: not running: nothing to crash"
  kill -KILL "$pid" 2>/dev/null || true
  for (( i = 0; i < 100; i++ )); do
    my_alive "$pid" || break
    sleep 0.1
  done
  [ "$i" -lt 100 ] || my_fail "pid $pid survived SIGKILL"
  rm -f "$my_pidfile"
  note "$my_name: crashed (SIGKILL)"
  start_mysql
}
