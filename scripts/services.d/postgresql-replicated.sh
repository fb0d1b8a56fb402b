# shellcheck shell=bash
# postgresql-replicated: a PostgreSQL 15 primary and a synchronous streaming standby, nodes 1
# and 2 on ${DBLOCK_PG_REPLICATED_PORT:-54331} and the next port, for the failover tests. Not
# started by default. The URL names both with target_session_attrs=read-write, so clients
# reach whichever is primary. synchronous_standby_names = '*' on both: a commit returns once
# the standby has flushed it, so whatever a client was told committed is on the new primary
# after a failover (and commits wait while no standby is connected). `crash` is one failover:
# the primary is killed (immediate stop), the standby promoted, and the old primary rebuilt
# from the new one (pg_basebackup) as its standby, which lets commits go on.
# The URL: postgresql://dblock:dblock@127.0.0.1:54331,127.0.0.1:54332/dblock?target_session_attrs=read-write.
# env: DBLOCK_TEST_PG_REPLICATED_URL, and DBLOCK_TEST_PG_REPLICATED_FAILOVER, the `crash` command.
# The pgr_* functions here serve postgresql-async.sh too (pgr_use picks the topology); they use
# postgresql.sh's pg_bin.

pgr_use() {  # pgr_use NAME PORT_VARIABLE DEFAULT_PORT VAR SYNC_NAMES SYNC_STATE: the globals of
  # that topology for the functions below (VAR names its DBLOCK_TEST_VAR_* variables)
  pgr_name=$1
  pgr_dir="$state/$1"
  pgr_port_var=$2 pgr_base=${!2:-$3} pgr_var=$4
  pgr_sync_names=$5 pgr_sync_state=$6
  pgr_url="postgresql://dblock:dblock@127.0.0.1:$pgr_base,127.0.0.1:$((pgr_base + 1))/dblock?target_session_attrs=read-write"
}
pgr_port() { echo $((pgr_base + $1 - 1)); }
as_pgr() {  # as_pg for these clusters
  if [ "$is_root" = 1 ]; then
    (cd "$pgr_dir" && runuser -u postgres -- "$@") 9>&-
  else
    (cd "$pgr_dir" && "$@") 9>&-
  fi
}
pgr_pid() {  # pgr_pid NODE: its postmaster's pid if alive
  local pid stat
  pid=$(head -n 1 "$pgr_dir/node$1/data/postmaster.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  [[ "$stat" == *"(postgres) "[!Z]* ]] && echo "$pid"
  return 0
}
pgr_psql() {  # pgr_psql NODE ARGS...: psql as the superuser over the node's socket
  local n=$1; shift
  as_pgr "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$pgr_dir/node$n/run" -p "$(pgr_port "$n")" -U postgres \
    -d postgres "$@"
}
pgr_primary() {  # the node that runs and is not in recovery, if any
  local i
  for i in 1 2; do
    [ -n "$(pgr_pid "$i")" ] && [ "$(pgr_psql "$i" -At -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] &&
      { echo "$i"; return 0; }
  done
  return 0
}
pgr_fail() {  # pgr_fail MESSAGE: with each node's last log lines
  note "$pgr_name: $1"
  log_tail "$pgr_dir/node1/server.log"
  log_tail "$pgr_dir/node2/server.log"
  exit 1
}
pgr_launch() {  # pgr_launch NODE: start its server on its data dir, settings rewritten
  local d="$pgr_dir/node$1" i
  as_pgr mkdir -p -m 700 "$d/run"
  rm -f "$d/data/postmaster.pid"
  as_pgr tee "$d/data/dblock.conf" >/dev/null <<EOF
# Written by scripts/services at every start; edits are lost.
listen_addresses = '127.0.0.1'
port = $(pgr_port "$1")
unix_socket_directories = '$d/run'
max_connections = 200
fsync = on
synchronous_standby_names = '$pgr_sync_names'
wal_keep_size = '64MB'
wal_receiver_status_interval = '1s'
password_encryption = 'scram-sha-256'
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  as_pgr "$pg_bin/pg_ctl" -D "$d/data" -l "$d/server.log" -w -t 60 start >/dev/null 2>&1 ||
    pgr_fail "node $1 did not start on 127.0.0.1:$(pgr_port "$1")"
  for (( i = 0; i < 100; i++ )); do
    "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$(pgr_port "$1")" -t 1 && return 0
    sleep 0.1
  done
  pgr_fail "node $1 started but does not answer"
}
pgr_standby_of() {  # pgr_standby_of NODE PRIMARY: NODE's data made anew from PRIMARY's, then started
  local d="$pgr_dir/node$1"
  rm -rf "$d/data"
  as_pgr "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$(pgr_port "$2")" -U postgres -w -D "$d/data" -R -X stream \
    --checkpoint=fast --no-sync >/dev/null 2>&1 || pgr_fail "pg_basebackup of node $2 into node $1 failed"
  pgr_launch "$1"
}
pgr_synced() {  # pgr_synced PRIMARY: its standby streams, synchronously or not as set (within 60 s)
  local i
  for (( i = 0; i < 600; i++ )); do
    [ "$(pgr_psql "$1" -At -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'
                                AND sync_state = '$pgr_sync_state'" 2>/dev/null)" = 1 ] &&
      return 0
    sleep 0.1
  done
  return 1
}
pgr_running() { [ -n "$(pgr_pid 1)" ] && [ -n "$(pgr_pid 2)" ]; }
pgr_again() {  # the start of a command (for sh) that runs scripts/services on this very topology
  echo "DBLOCK_SERVICES_DIR=$(printf %q "$state") $pgr_port_var=$pgr_base $(printf %q "$self")"
}
pgr_env() {
  printf 'export DBLOCK_TEST_%s_URL=%q\n' "$pgr_var" "$pgr_url"
  printf 'export DBLOCK_TEST_%s_FAILOVER=%q\n' "$pgr_var" "$(pgr_again) crash $pgr_name"
}
pgr_start() {
  local t0 out primary standby
  t0=$(now)
  [ -x "$pg_bin/postgres" ] || die "$pgr_name: no server in $pg_bin (scripts/deps test)"
  [[ "$pgr_base" =~ ^[0-9]+$ ]] || die "$pgr_name: $pgr_port_var=$pgr_base is not a port number"
  mkdir -p "$pgr_dir/node1" "$pgr_dir/node2"
  if [ "$is_root" = 1 ]; then
    chmod go+x "$state"
    chown -R postgres: "$pgr_dir"
  fi
  if [ ! -f "$pgr_dir/node1/data/dblock-initdb.ok" ] && [ ! -f "$pgr_dir/node2/data/dblock-initdb.ok" ]; then
    rm -rf "$pgr_dir/node1/data" "$pgr_dir/node2/data"
    out=$(as_pgr "$pg_bin/initdb" -D "$pgr_dir/node1/data" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 --encoding=UTF8 --no-locale --no-sync --no-instructions 2>&1) || {
      note "$pgr_name: initdb failed"; printf '%s\n' "$out" | tail -n 25 >&2; exit 1; }
    echo "include_if_exists = 'dblock.conf'" | as_pgr tee -a "$pgr_dir/node1/data/postgresql.conf" >/dev/null
    # The standby's base backup and stream come over TCP as the superuser (a test server only),
    # by a line before initdb's, which would ask for a password.
    as_pgr sed -i '1i host replication postgres 127.0.0.1/32 trust' "$pgr_dir/node1/data/pg_hba.conf"
    as_pgr touch "$pgr_dir/node1/data/dblock-initdb.ok"
  fi
  # Whichever node was primary last (a failover may have swapped them) starts first.
  primary=1
  { [ -f "$pgr_dir/node1/data/standby.signal" ] || [ ! -d "$pgr_dir/node1/data" ]; } && primary=2
  standby=$((3 - primary))
  [ -n "$(pgr_pid "$primary")" ] || pgr_launch "$primary"
  [ "$(pgr_primary)" = "$primary" ] || pgr_fail "node $primary is not a primary"
  # The role and database, committed locally: the standby is made after them.
  out=$(pgr_psql "$primary" 2>&1 <<'EOF'
SET client_min_messages = warning;
SET synchronous_commit = local;
SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dblock') AS need_role \gset
\if :need_role
CREATE ROLE dblock;
\endif
ALTER ROLE dblock WITH LOGIN NOSUPERUSER CREATEDB PASSWORD 'dblock';
GRANT pg_signal_backend TO dblock;
SELECT 'CREATE DATABASE dblock OWNER dblock'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'dblock') \gexec
EOF
  ) || pgr_fail "could not create the dblock role and database: $out"
  if [ -z "$(pgr_pid "$standby")" ]; then
    if [ -f "$pgr_dir/node$standby/data/standby.signal" ]; then pgr_launch "$standby"
    else pgr_standby_of "$standby" "$primary"; fi
  fi
  pgr_synced "$primary" || pgr_fail "node $standby does not stream synchronously from node $primary"
  note "$pgr_name: ready in $(since "$t0") (primary: node $primary) at $pgr_url"
}
pgr_stop() {
  local i
  for i in 2 1; do
    [ -n "$(pgr_pid "$i")" ] || continue
    as_pgr "$pg_bin/pg_ctl" -D "$pgr_dir/node$i/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_pgr "$pg_bin/pg_ctl" -D "$pgr_dir/node$i/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  done
  note "$pgr_name: stopped"
}
pgr_crash() {
  local t0 primary standby
  t0=$(now)
  pgr_running || die "$pgr_name: not running (start it first)"
  primary=$(pgr_primary)
  [ -n "$primary" ] || pgr_fail "no primary to kill"
  standby=$((3 - primary))
  as_pgr "$pg_bin/pg_ctl" -D "$pgr_dir/node$primary/data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
    pgr_fail "immediate stop of node $primary failed"
  as_pgr "$pg_bin/pg_ctl" -D "$pgr_dir/node$standby/data" -w -t 60 promote >/dev/null 2>&1 ||
    pgr_fail "node $standby was not promoted"
  note "$pgr_name: killed primary node $primary; node $standby promoted after $(since "$t0")"
  # What `detach` set would pass to the rebuilt standby with the base backup.
  pgr_psql "$standby" -c 'ALTER SYSTEM RESET primary_conninfo' >/dev/null || pgr_fail "node $standby: ALTER SYSTEM failed"
  pgr_standby_of "$primary" "$standby"
  pgr_synced "$standby" || pgr_fail "node $primary does not stream synchronously from node $standby"
  note "$pgr_name: node $primary streams from node $standby after $(since "$t0")"
}
pgr_ports() { echo "$pgr_base $((pgr_base + 1))"; }

pgr_replicated() { pgr_use postgresql-replicated DBLOCK_PG_REPLICATED_PORT 54331 PG_REPLICATED '*' sync; }
running_postgresql-replicated() { pgr_replicated; pgr_running; }
env_postgresql-replicated() { pgr_replicated; pgr_env; }
start_postgresql-replicated() { pgr_replicated; pgr_start; }
stop_postgresql-replicated() { pgr_replicated; pgr_stop; }
crash_postgresql-replicated() { pgr_replicated; pgr_crash; }
ports_postgresql-replicated() { pgr_replicated; pgr_ports; }
