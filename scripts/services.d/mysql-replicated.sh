# shellcheck shell=bash
# mysql-replicated: two MariaDB 10.11 servers, a primary and a semi-synchronous replica (GTID,
# row-based binlog, AFTER_SYNC: a commit returns once the replica has its events), nodes 1 and 2
# on ${DBLOCK_MYSQL_REPLICATED_PORT:-33081} and the next port, for the failover tests. Not
# started by default. The URL names both, and dblock connects to the one with read_only off.
# `crash` is one failover: SIGKILL of the primary, the replica made primary once it has applied
# everything it received (replication reset, read_only off), and the killed node restarted as
# its replica (--init-rpl-role=SLAVE: it first drops what its replica never acknowledged).
# Commits wait while no replica acknowledges (rpl_semi_sync_master_timeout 10 min), as on
# postgresql-replicated. Replicas skip dblock's MEMORY fence caches (<table>_fence_cache), as
# docs/backends/mysql.md asks of MySQL 8 servers (MariaDB's fences come from a sequence, and
# no cache is made there): a restart empties a MEMORY table, and the next replicated row change
# of it then stops replication (error 1032).
# env: DBLOCK_TEST_MYSQL_REPLICATED_URL, and DBLOCK_TEST_MYSQL_REPLICATED_FAILOVER, the `crash`
# command. Uses mysql.sh's my_server, my_admin, my_setup_sql and my_launched_alive.

myr_base=${DBLOCK_MYSQL_REPLICATED_PORT:-33081}
myr_dir="$state/mysql-replicated"
myr_url="mysql://dblock:dblock@127.0.0.1:$myr_base,127.0.0.1:$((myr_base + 1))/dblock"
myr_port() { echo $((myr_base + $1 - 1)); }
ports_mysql-replicated() { echo "$myr_base $((myr_base + 1))"; }
# A statement that hangs (a replication thread that does not stop) fails after myr_timeout s
# instead of holding the caller, a torture run, up to CI's limit. The loops that poll a node
# also stop at a deadline on the clock (SECONDS), not after a count of calls: a node that
# hangs would make each call take myr_timeout.
myr_timeout=60
myr_sql() {  # myr_sql NODE SQL: as the admin account over the node's socket
  timeout "$myr_timeout" mariadb --no-defaults --protocol=socket --socket="$myr_dir/node$1/run/mysqld.sock" -u "$my_admin" \
    --connect-timeout=5 --batch --skip-column-names -e "$2" 9>&-
}
myr_slave() {  # myr_slave NODE FIELD: a field of the node's SHOW SLAVE STATUS (named: not --batch)
  timeout "$myr_timeout" mariadb --no-defaults --protocol=socket --socket="$myr_dir/node$1/run/mysqld.sock" -u "$my_admin" \
    --connect-timeout=5 -e 'SHOW SLAVE STATUS\G' 9>&- | sed -n "s/^ *$2: //p"
}
myr_pid() {  # myr_pid NODE: its live mariadbd's pid
  local pid stat
  pid=$(head -n 1 "$myr_dir/node$1/run/mysqld.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  [[ "$stat" == *"(mariadbd) "[!Z]* ]] && echo "$pid"
  return 0
}
myr_primary() { cat "$myr_dir/primary" 2>/dev/null || echo 1; }  # which node was made primary last
myr_fail() {  # myr_fail MESSAGE: with each node's replication state and last log lines
  local n field myr_timeout=10  # a node that hangs is worth a line, not a minute
  note "mysql-replicated: $1"
  for n in 1 2; do
    echo "--- node $n: $(myr_sql "$n" "SELECT CONCAT('read_only ', @@read_only, ', gtid_current_pos ',
      @@gtid_current_pos, ', semi-sync ', GROUP_CONCAT(VARIABLE_NAME, '=', VARIABLE_VALUE))
      FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_CLIENTS',
      'RPL_SEMI_SYNC_MASTER_STATUS')" 2>&1 | head -n 3)" >&2
    for field in Slave_IO_State Slave_IO_Running Slave_SQL_Running Last_IO_Error Last_SQL_Error Gtid_IO_Pos; do
      echo "    $field: $(myr_slave "$n" "$field" 2>/dev/null)" >&2
    done
  done
  log_tail "$myr_dir/node1/server.log"
  log_tail "$myr_dir/node2/server.log"
  exit 1
}
myr_launch() {  # myr_launch NODE primary|replica [try]: installs its data dir if need be, starts it,
  # waits; with `try`, a server that exits while starting is answered 1 instead of failing
  local n=$1 d="$myr_dir/node$1" pid i user_opt=() out role=(--read-only=OFF)
  # A replica starts read-only, and as a replica: a killed primary restarted so first drops the
  # transactions its replica never acknowledged (they are in its binlog, not the replica's).
  [ "$2" = primary ] || role=(--read-only=ON --init-rpl-role=SLAVE)
  [ "$is_root" = 0 ] || user_opt=(--user=mysql)
  mkdir -p "$d/run" "$d/tmp"
  touch "$d/server.log"
  [ "$is_root" = 0 ] || chown -R mysql: "$d"
  if [ ! -f "$d/data/dblock-install.ok" ]; then
    rm -rf "$d/data"
    out=$(cd "$d" && timeout 120 mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$d/data" \
            --auth-root-authentication-method=socket --auth-root-socket-user="$my_admin" \
            --skip-test-db --skip-name-resolve --tmpdir="$d/tmp" --innodb-buffer-pool-size=32M \
            --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --performance-schema=OFF --skip-log-bin \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_bin 2>&1 9>&-) || {
      note "mysql-replicated: mariadb-install-db failed for node $n"; printf '%s\n' "$out" | tail -n 25 >&2; exit 1; }
    touch "$d/data/dblock-install.ok"
    [ "$is_root" = 0 ] || chown mysql: "$d/data/dblock-install.ok"
  fi
  rm -f "$d/run/mysqld.pid" "$d/run/mysqld.sock" "$d/run/mysqld.sock.lock"
  (cd "$d" && exec setsid "$my_server" --no-defaults "${user_opt[@]}" --datadir="$d/data" \
     --socket="$d/run/mysqld.sock" --pid-file="$d/run/mysqld.pid" --log-error="$d/server.log" --tmpdir="$d/tmp" \
     --bind-address=127.0.0.1 --port="$(myr_port "$n")" --skip-name-resolve --max-connections=300 \
     --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=1 --performance-schema=OFF \
     --server-id="$n" --log-bin=mariadb-bin --log-slave-updates --binlog-format=ROW --sync-binlog=1 \
     --gtid-strict-mode=ON --rpl-semi-sync-slave-enabled=ON --rpl-semi-sync-master-wait-point=AFTER_SYNC \
     --replicate-wild-ignore-table=%.%\\_fence\\_cache \
     --rpl-semi-sync-master-timeout=600000 "${role[@]}" \
     --character-set-server=utf8mb4 --collation-server=utf8mb4_bin --default-time-zone=+00:00 \
     </dev/null >>"$d/server.log" 2>&1 9>&-) &
  pid=$!
  local deadline=$((SECONDS + 60))
  while (( SECONDS < deadline )); do
    if ! my_launched_alive "$pid"; then
      [ "${3:-}" = try ] && return 1
      myr_fail "node $n did not start on 127.0.0.1:$(myr_port "$n")"
    fi
    myr_sql "$n" 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  myr_fail "node $n started but does not answer"
}
myr_follow() {  # myr_follow NODE PRIMARY: NODE replicates PRIMARY (semi-synchronously), from
  # what it has itself (current_pos: a former primary's own transactions count)
  myr_sql "$1" "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $(myr_port "$2"),
                MASTER_USER = 'repl', MASTER_PASSWORD = 'repl', MASTER_USE_GTID = current_pos,
                MASTER_CONNECT_RETRY = 1; START SLAVE" ||
    myr_fail "node $1 could not replicate node $2"
}
myr_rebuild() {  # myr_rebuild NODE FROM: NODE's data made anew from a dump of FROM, then it replicates
  # FROM. For a killed primary that cannot rejoin as it is: MariaDB truncates what its replica
  # never acknowledged only up to the first non-transactional event (the MEMORY fence cache's
  # writes are), and refuses to start otherwise. The dump is loaded unlogged, so the node's own
  # binlog starts empty and it follows FROM from the dump's GTID position.
  # The fence caches' rows are left out (their tables are dumped): replicas skip them anyway,
  # and reading one waits for its table lock, which a fence draw on FROM holds while its
  # commit waits for a replica's acknowledgement: the one this node gives once rebuilt.
  # FROM's commits do not wait for acknowledgements while the dump is taken: the commits that
  # wait for the one this node will give hold locks a dump can queue behind (once in CI, a dump
  # sat a whole minute). No commit is lost by it: the dump's snapshot and what replication
  # streams after it cover them all, and FROM is not crashed again before this node has caught up
  # (callers wait for myr_synced).
  local d="$myr_dir/node$1" out caches=() t
  rm -rf "$d/data"
  myr_launch "$1" replica
  myr_sql "$2" "SET GLOBAL rpl_semi_sync_master_enabled = OFF" || myr_fail "could not pause node $2's semi-sync waits"
  out=$(myr_sql "$2" "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES
                      WHERE ENGINE = 'MEMORY' AND TABLE_NAME LIKE '%\\_fence\\_cache'" 2>&1) ||
    myr_fail "could not list node $2's fence caches: $out"
  for t in $out; do caches+=(--ignore-table-data="$t"); done
  out=$(timeout "$myr_timeout" mariadb-dump --no-defaults --protocol=socket --socket="$myr_dir/node$2/run/mysqld.sock" \
          -u "$my_admin" --all-databases --ignore-table=mysql.gtid_slave_pos "${caches[@]}" --single-transaction --gtid \
          --master-data=1 --routines --triggers 9>&- |
        timeout "$myr_timeout" mariadb --no-defaults --protocol=socket --socket="$d/run/mysqld.sock" -u "$my_admin" \
          --init-command='SET SESSION sql_log_bin = 0' 2>&1 9>&-) ||
    myr_fail "could not load node $2's dump into node $1: ${out:-timed out after ${myr_timeout}s}; node $2 was running:
$(myr_timeout=10 myr_sql "$2" "SELECT ID, USER, COMMAND, TIME, STATE, LEFT(INFO, 100) FROM information_schema.PROCESSLIST" 2>&1)"
  myr_sql "$2" "SET GLOBAL rpl_semi_sync_master_enabled = ON" || myr_fail "could not resume node $2's semi-sync waits"
  # FLUSH is binlogged unless told not to: a GTID of its own there would collide with the
  # primary's next one (gtid_strict_mode stops replication on it).
  myr_sql "$1" "FLUSH NO_WRITE_TO_BINLOG PRIVILEGES; CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $(myr_port "$2"),
                MASTER_USER = 'repl', MASTER_PASSWORD = 'repl', MASTER_USE_GTID = slave_pos,
                MASTER_CONNECT_RETRY = 1; START SLAVE" || myr_fail "node $1 could not replicate node $2"
}
myr_stop() {  # myr_stop NODE: SIGTERM, and SIGKILL if it has not exited within a minute
  local pid j
  pid=$(myr_pid "$1")
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for (( j = 0; j < 600; j++ )); do
    [ -n "$(myr_pid "$1")" ] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
myr_rejoined() {  # myr_rejoined PRIMARY NODE: NODE, a killed primary restarted as PRIMARY's
  # replica, follows it; or, if PRIMARY refuses it (error 1236: NODE's binlog has a transaction
  # PRIMARY never had: a write to the MEMORY fence cache alone, which is not transactional, so
  # neither semi-sync nor the restart's truncation held it back), NODE is rebuilt from a dump of
  # PRIMARY. Only that error rebuilds: a replica that is merely slow is left to myr_synced.
  # Following = streaming without an error, seen three times in a row (the refusal comes just
  # after the connection, which already counts as a semi-sync client).
  local seen=0 deadline=$((SECONDS + 15))
  while (( SECONDS < deadline )); do
    if [ "$(myr_slave "$2" Last_IO_Errno 2>/dev/null)" = 1236 ]; then
      note "mysql-replicated: node $2 has a transaction node $1 never had: rebuilt from node $1"
      myr_stop "$2"
      myr_rebuild "$2" "$1"
      return 0
    fi
    if [ "$(myr_slave "$2" Slave_IO_State 2>/dev/null)" = "Waiting for master to send event" ]; then
      (( ++seen >= 3 )) && return 0
    else
      seen=0
    fi
    sleep 0.2
  done
}
myr_applied() {  # myr_applied NODE POS: NODE has applied the GTID position POS (within 120 s).
  # One GTID domain (0), so sequence numbers compare; gtid_current_pos, because a former
  # primary's own transactions are in its binlog, not in what it applied as a replica.
  local cur deadline=$((SECONDS + 120))
  [ -n "$2" ] || return 0
  while (( SECONDS < deadline )); do
    cur=$(myr_sql "$1" "SELECT @@GLOBAL.gtid_current_pos" 2>/dev/null) || cur=""
    [ -n "$cur" ] && [ "${cur##*-}" -ge "${2##*-}" ] && return 0
    sleep 0.1
  done
  return 1
}
myr_synced() {  # myr_synced PRIMARY REPLICA [SECONDS]: the replica acknowledges the primary's commits and
  # has applied what the primary had then: acknowledgements cover new commits only, not the
  # history a new replica is still fetching.
  # The status turns ON once the replica has caught up; while it is OFF, commits do not wait.
  local deadline=$((SECONDS + ${3:-120})) on=0
  while (( SECONDS < deadline )); do
    [ "$(myr_sql "$1" "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME) FROM information_schema.GLOBAL_STATUS
                       WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_CLIENTS', 'RPL_SEMI_SYNC_MASTER_STATUS')" \
          2>/dev/null)" = "1,ON" ] && { on=1; break; }
    sleep 0.1
  done
  (( on )) && myr_applied "$2" "$(myr_sql "$1" "SELECT @@GLOBAL.gtid_binlog_pos")"
}
running_mysql-replicated() { [ -n "$(myr_pid 1)" ] && [ -n "$(myr_pid 2)" ]; }
env_mysql-replicated() {
  printf 'export DBLOCK_TEST_MYSQL_REPLICATED_URL=%q\n' "$myr_url"
  printf 'export DBLOCK_TEST_MYSQL_REPLICATED_FAILOVER=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_MYSQL_REPLICATED_PORT=$myr_base $(printf %q "$self") crash mysql-replicated"
}
start_mysql-replicated() {
  local t0 primary replica fresh=0 out
  t0=$(now)
  [ -x "$my_server" ] || die "mysql-replicated: no server at $my_server (scripts/deps test)"
  [[ "$myr_base" =~ ^[0-9]+$ ]] || die "mysql-replicated: DBLOCK_MYSQL_REPLICATED_PORT=$myr_base is not a port number"
  mkdir -p "$myr_dir"
  [ "$is_root" = 0 ] || chmod go+x "$state"
  chmod 755 "$myr_dir"
  primary=$(myr_primary)
  replica=$((3 - primary))
  [ -f "$myr_dir/node$primary/data/dblock-install.ok" ] || fresh=1
  [ -n "$(myr_pid "$primary")" ] || myr_launch "$primary" primary
  if [ "$fresh" = 1 ]; then
    # The accounts, before semi-synchronous waits are on (no replica yet): binlogged, so the
    # replica made next replays them.
    out=$(myr_sql "$primary" "$my_setup_sql
      CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
      GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';" 2>&1) ||
      myr_fail "could not create the accounts and database: $out"
    echo "$primary" >"$myr_dir/primary"
  fi
  myr_sql "$primary" "SET GLOBAL rpl_semi_sync_master_enabled = ON" || myr_fail "semi-sync on node $primary"
  if [ -z "$(myr_pid "$replica")" ]; then
    if [ -f "$myr_dir/node$replica/data/dblock-install.ok" ]; then  # it resumes, or is made anew
      if myr_launch "$replica" replica try; then myr_rejoined "$primary" "$replica"
      else myr_rebuild "$replica" "$primary"; fi
    else
      myr_launch "$replica" replica
      myr_follow "$replica" "$primary"
    fi
  fi
  myr_synced "$primary" "$replica" || myr_fail "node $replica does not acknowledge node $primary's commits"
  note "mysql-replicated: ready in $(since "$t0") (primary: node $primary) at $myr_url"
}
stop_mysql-replicated() {
  myr_stop 1
  myr_stop 2
  note "mysql-replicated: stopped"
}
crash_mysql-replicated() {
  local t0 primary replica pid io i
  t0=$(now)
  running_mysql-replicated || die "mysql-replicated: not running (start it first)"
  primary=$(myr_primary)
  replica=$((3 - primary))
  pid=$(myr_pid "$primary")
  kill -KILL "$pid" 2>/dev/null || true
  for (( i = 0; i < 100; i++ )); do
    [ -n "$(myr_pid "$primary")" ] || break
    sleep 0.1
  done
  # Everything the replica received (every commit a client saw acknowledged) applied, then it
  # leads.
  myr_sql "$replica" "STOP SLAVE IO_THREAD" || myr_fail "could not stop node $replica's replication"
  io=$(myr_slave "$replica" Gtid_IO_Pos)
  myr_applied "$replica" "$io" || myr_fail "node $replica did not apply what it received ($io)"
  myr_sql "$replica" "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF;
                      SET GLOBAL rpl_semi_sync_master_enabled = ON" || myr_fail "node $replica was not promoted"
  echo "$replica" >"$myr_dir/primary"
  note "mysql-replicated: killed primary node $primary; node $replica promoted after $(since "$t0")"
  if myr_launch "$primary" replica try; then
    myr_follow "$primary" "$replica"
    myr_rejoined "$replica" "$primary"
  else
    note "mysql-replicated: node $primary cannot rejoin as it is: rebuilt from node $replica"
    myr_rebuild "$primary" "$replica"
  fi
  # A rejoin can also stall without an error: once (a local CI run), the new primary ended the
  # old one's binlog dump at once after the old one truncated a prepared transaction, and the
  # old one's I/O thread sat "connected" until slave_net_timeout. Then it is rebuilt too.
  if ! myr_synced "$replica" "$primary" 30; then
    note "mysql-replicated: node $primary does not acknowledge node $replica's commits: rebuilt from node $replica"
    myr_stop "$primary"
    myr_rebuild "$primary" "$replica"
    myr_synced "$replica" "$primary" || myr_fail "node $primary does not acknowledge node $replica's commits"
  fi
  note "mysql-replicated: node $primary replicates node $replica after $(since "$t0")"
}
