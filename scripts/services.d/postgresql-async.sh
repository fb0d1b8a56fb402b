# shellcheck shell=bash
# postgresql-async: the same as postgresql-replicated with an asynchronous standby
# (synchronous_standby_names empty), on ${DBLOCK_PG_ASYNC_PORT:-54333} and the next port: a
# commit does not wait for the standby, so a failover can lose the last grants.
# `detach postgresql-async` stops the standby's WAL receiver (primary_conninfo emptied) until
# the next `crash`, so that what commits meanwhile is lost by it for certain: the tests show
# what a lagging standby does to locks and fences.
# env: DBLOCK_TEST_PG_ASYNC_URL, and DBLOCK_TEST_PG_ASYNC_FAILOVER and _DETACH, the `crash` and
# `detach` commands. Runs on postgresql-replicated.sh's pgr_* functions.

pgr_detach() {
  local primary standby i
  pgr_running || die "$pgr_name: not running (start it first)"
  primary=$(pgr_primary)
  [ -n "$primary" ] || pgr_fail "no primary"
  standby=$((3 - primary))
  pgr_psql "$standby" -c "ALTER SYSTEM SET primary_conninfo = ''" -c 'SELECT pg_reload_conf()' >/dev/null ||
    pgr_fail "could not empty node $standby's primary_conninfo"
  for (( i = 0; i < 300; i++ )); do
    [ "$(pgr_psql "$primary" -At -c 'SELECT count(*) FROM pg_stat_replication' 2>/dev/null)" = 0 ] &&
      { note "$pgr_name: node $standby no longer receives WAL from node $primary"; return 0; }
    sleep 0.1
  done
  pgr_fail "node $standby still streams from node $primary"
}

pgr_async() { pgr_use postgresql-async DBLOCK_PG_ASYNC_PORT 54333 PG_ASYNC '' async; }
running_postgresql-async() { pgr_async; pgr_running; }
env_postgresql-async() {
  pgr_async
  pgr_env
  printf 'export DBLOCK_TEST_%s_DETACH=%q\n' "$pgr_var" "$(pgr_again) detach $pgr_name"
}
start_postgresql-async() { pgr_async; pgr_start; }
stop_postgresql-async() { pgr_async; pgr_stop; }
crash_postgresql-async() { pgr_async; pgr_crash; }
detach_postgresql-async() { pgr_async; pgr_detach; }
ports_postgresql-async() { pgr_async; pgr_ports; }
