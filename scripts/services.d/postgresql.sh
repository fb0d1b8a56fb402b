# shellcheck shell=bash
# postgresql: PostgreSQL 15 on ${DBLOCK_PG_PORT:-54329} (DBLOCK_PG_BINDIR picks another server):
#   postgresql://dblock:dblock@127.0.0.1:54329/dblock, and DBLOCK_TEST_PG_RESTART, a command
#   that restarts this very server. `crash` is an immediate stop (no checkpoint, as in a crash),
#   then a start (crash recovery). DBLOCK_SERVICES_FLUSH=off at its start: fsync = off (commits
#   do not wait for the disk; for the benchmarks' flush-off runs, never for the tests).
# postgresql-replicated.sh and postgresql-async.sh use pg_bin from here; postgresql-tls.sh
# the whole of it, for a second server (pg_use).

pg_bin=${DBLOCK_PG_BINDIR:-/usr/lib/postgresql/15/bin}
pg_use() {  # pg_use NAME DIR PORT: the server the functions below start, stop and check
  pg_name=$1 pg_dir=$2 pg_port=$3
  pg_data="$pg_dir/data"
  pg_sock="$pg_dir/run"
  pg_log="$pg_dir/server.log"
  pg_url="postgresql://dblock:dblock@127.0.0.1:$pg_port/dblock"
  pg_conf=""  # more lines for its postgresql.conf
  pg_hba=""   # its pg_hba.conf, instead of initdb's
}
pg_use postgresql "$state/postgresql" "${DBLOCK_PG_PORT:-54329}"
ports_postgresql() { echo "$pg_port"; }

as_pg() {  # run a command as the OS user owning the server (initdb and postgres refuse root)
  if [ "$is_root" = 1 ]; then
    (cd "$pg_dir" && runuser -u postgres -- "$@") 9>&-
  else
    (cd "$pg_dir" && "$@") 9>&-
  fi
}

pg_fail() {  # pg_fail MESSAGE [LOG_OFFSET]
  note "$pg_name: $1"
  log_tail "$pg_log" "${2:-0}"
  exit 1
}

pg_pid() {  # the postmaster's pid if one is alive for our data dir, else nothing
  local pid stat
  pid=$(head -n 1 "$pg_data/postmaster.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  # /proc/PID/stat is "PID (COMM) STATE ..."; a zombie (nobody reaped it) is not running.
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  [[ "$stat" == *"(postgres) "[!Z]* ]] && echo "$pid"
  return 0
}

running_postgresql() { [ -n "$(pg_pid)" ]; }
env_postgresql() {  # the URL, and a command (for sh) that restarts this very server
  printf 'export DBLOCK_TEST_PG_URL=%q\n' "$pg_url"
  printf 'export DBLOCK_TEST_PG_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_PG_PORT=$pg_port $(printf %q "$self") restart postgresql"
}

pg_data_valid() {  # an initialized cluster of the same major version, with a readable pg_control
  [ -f "$pg_data/dblock-initdb.ok" ] && [ -f "$pg_data/PG_VERSION" ] || return 1
  [ "$(cat "$pg_data/PG_VERSION")" = "$("$pg_bin/postgres" --version 2>/dev/null |
        sed -E 's/^[^0-9]*([0-9]+).*/\1/')" ] || return 1
  as_pg "$pg_bin/pg_controldata" -D "$pg_data" >/dev/null 2>&1
}

start_postgresql() {
  local t0 pid out off why
  t0=$(now)
  [ -x "$pg_bin/postgres" ] ||
    die "postgresql: no server in $pg_bin (install it with scripts/deps test, or set DBLOCK_PG_BINDIR)"
  [ "$is_root" = 0 ] || getent passwd postgres >/dev/null ||
    die "postgresql: no 'postgres' OS user to run the server as (install the postgresql package)"
  [[ "$pg_port" =~ ^[0-9]+$ ]] || die "postgresql: DBLOCK_PG_PORT=$pg_port is not a port number"
  [[ "$pg_dir" != *"'"* ]] || die "postgresql: the state dir may not contain a quote: $pg_dir"
  # A unix socket path holds at most 107 bytes.
  [ $(( ${#pg_sock} + 11 + ${#pg_port} )) -le 107 ] ||
    die "postgresql: socket path under $pg_sock is too long; set a shorter DBLOCK_SERVICES_DIR"

  pid=$(pg_pid)
  if [ -n "$pid" ]; then
    "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -t 5 ||
      pg_fail "already running (pid $pid) but not answering on 127.0.0.1:$pg_port"
    note "$pg_name: already running (pid $pid) at $pg_url"
    return 0
  fi

  mkdir -p "$state"
  [ "$is_root" = 0 ] || chmod go+x "$state"  # the postgres user must reach its directory
  mkdir -p "$pg_dir"
  chmod 755 "$pg_dir"
  if [ "$is_root" = 1 ]; then
    chown -R postgres: "$pg_dir"  # also takes over a data dir an ordinary user made
    runuser -u postgres -- test -w "$pg_dir" -a -x "$pg_dir" ||
      die "postgresql: the postgres user cannot write $pg_dir; set DBLOCK_SERVICES_DIR (e.g. under /tmp)"
  fi
  # Stale if present (no live postgres has their pid; a zombie would still block a start).
  rm -f "$pg_data/postmaster.pid" "$pg_sock"/.s.PGSQL.*

  if [ -d "$pg_data" ] && ! pg_data_valid; then
    note "$pg_name: recreating unusable data dir $pg_data"
    rm -rf "$pg_data"
  fi
  if [ ! -d "$pg_data" ]; then
    out=$(as_pg "$pg_bin/initdb" -D "$pg_data" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 --encoding=UTF8 --no-locale --no-sync --no-instructions 2>&1) || {
      note "$pg_name: initdb failed in $pg_data"; printf '%s\n' "$out" | tail -n 25 >&2; exit 1; }
    echo "include_if_exists = 'dblock.conf'" | as_pg tee -a "$pg_data/postgresql.conf" >/dev/null
    as_pg touch "$pg_data/dblock-initdb.ok"
  fi
  as_pg mkdir -p -m 700 "$pg_sock"
  # Rewritten on every start so a changed port or state dir takes effect.
  as_pg tee "$pg_data/dblock.conf" >/dev/null <<EOF
# Written by scripts/services at every start; edits are lost.
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_sock'
max_connections = 400
fsync = $([ "${DBLOCK_SERVICES_FLUSH:-on}" = off ] && echo off || echo on)
password_encryption = 'scram-sha-256'
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
$pg_conf
EOF
  [ -z "$pg_hba" ] || printf '%s\n' "$pg_hba" | as_pg tee "$pg_data/pg_hba.conf" >/dev/null

  off=$(file_size "$pg_log")
  if ! out=$(as_pg "$pg_bin/pg_ctl" -D "$pg_data" -l "$pg_log" -w -t 60 start 2>&1); then
    why=$(tail -c +"$((off + 1))" "$pg_log" 2>/dev/null | grep -E 'FATAL|PANIC' | tail -n 1 |
          sed -E 's/.*(FATAL|PANIC): +//') || true
    [ -n "$why" ] || why=$(printf '%s\n' "$out" | grep -m 1 '^pg_ctl:' || true)
    pg_fail "did not start on 127.0.0.1:$pg_port: ${why:-see the log}" "$off"
  fi
  local i
  for (( i = 0; i < 100; i++ )); do
    "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -t 1 && break
    sleep 0.1
  done
  [ "$i" -lt 100 ] || pg_fail "started but 127.0.0.1:$pg_port does not answer" "$off"

  # The role and database, idempotently (also repairs a half-made earlier run).
  out=$("$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$pg_sock" -p "$pg_port" -U postgres -d postgres \
          2>&1 <<'EOF'
SET client_min_messages = warning;
SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dblock') AS need_role \gset
\if :need_role
CREATE ROLE dblock;
\endif
ALTER ROLE dblock WITH LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD 'dblock';
GRANT pg_signal_backend TO dblock;
SELECT 'CREATE DATABASE dblock OWNER dblock'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'dblock') \gexec
EOF
  ) || pg_fail "could not create the dblock role and database: $out" "$off"
  note "$pg_name: ready in $(since "$t0") (pid $(pg_pid)) at $pg_url"
}

stop_postgresql() {
  local pid off out
  pid=$(pg_pid)
  if [ -z "$pid" ]; then
    rm -f "$pg_data/postmaster.pid"
    note "$pg_name: not running"
    return 0
  fi
  off=$(file_size "$pg_log")
  if ! out=$(as_pg "$pg_bin/pg_ctl" -D "$pg_data" -m fast -w -t 60 stop 2>&1); then
    note "$pg_name: fast stop failed ($(printf '%s' "$out" | tail -n 1)); trying immediate"
    as_pg "$pg_bin/pg_ctl" -D "$pg_data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
      pg_fail "could not stop pid $pid" "$off"
  fi
  note "$pg_name: stopped"
}

crash_postgresql() {  # immediate stop: no checkpoint, WAL not yet flushed is lost, as in a crash
  [ -n "$(pg_pid)" ] || die "postgresql: not running: nothing to crash"
  as_pg "$pg_bin/pg_ctl" -D "$pg_data" -m immediate -w -t 30 stop >/dev/null 2>&1 || pg_fail "immediate stop failed"
  note "$pg_name: crashed (immediate stop)"
  start_postgresql
}
