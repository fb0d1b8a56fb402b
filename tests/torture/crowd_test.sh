#!/usr/bin/env bash
# The crowd: many Client processes holding many leases in the user's database while many
# threads queue on one name, as a large deployment would. HOLDERS processes hold LEASES
# leases in all (each on names of its own, renewed every TTL/3, batched per Client), and
# WAITERS processes of THREADS threads in all take turns on one name, each grant a racy
# read-modify-write of a counter that only the lock protects. Passes when every process ends
# 0 (no connection error, no lease lost), the counter reads the grants made (exclusion), the
# fences logged rise, and the account's peak of server connections stays within the bound.
# Every process's Client has pool_size = 1, so that a holder's acquires and its renewals
# take turns on one connection (the default, 8, lets them run side by side on two):
#   mysql      directly, an account allowed 300 connections: at most one per process
#   pgbouncer  through PgBouncer in transaction mode (20 server connections), waiters woken by
#              a LISTEN connection each to the server itself (the URL's listen_port): at most
#              20 + WAITERS server connections for the account (4 more allowed, see below)
#   crowd_test.sh DBLOCK DBLOCK_HAMMER mysql|pgbouncer [HOLDERS LEASES WAITERS THREADS]
# The full run (docs/RELIABILITY.md, "The crowd") is 200 10000 56 504: 256 processes, 10,000
# leases, 504 waiting threads. CI runs the defaults, half of that.
# Server URLs come from scripts/services env (DBLOCK_TEST_MYSQL_URL; DBLOCK_TEST_PG_URL and
# DBLOCK_TEST_PGBOUNCER_URL).
set -euo pipefail
dblock=$1 hammer=$2 backend=$3
holders=${4:-100} leases=${5:-5000} waiters=${6:-28} threads=${7:-252}
ttl_ms=15000
export DBLOCK_HAMMER_POOL_SIZE=1
case $backend in
  mysql) admin_url=${DBLOCK_TEST_MYSQL_URL:?run through scripts/test, or set DBLOCK_TEST_MYSQL_URL} ;;
  pgbouncer)
    admin_url=${DBLOCK_TEST_PG_URL:?run through scripts/test, or set DBLOCK_TEST_PG_URL}
    crowd_url=${DBLOCK_TEST_PGBOUNCER_URL:?run through scripts/test, or set DBLOCK_TEST_PGBOUNCER_URL}
    # 128 processes open their SCRAM sessions to one single-threaded PgBouncer at once: on a
    # CI machine whose tasks waited for a CPU 99% of the time, one holder's connect outlasted
    # the 5 s default and it ended 70. How fast a crowd connects is not what this tests.
    crowd_url="$crowd_url&connect_timeout=30" ;;
  *) echo "usage: crowd_test.sh DBLOCK DBLOCK_HAMMER mysql|pgbouncer [HOLDERS LEASES WAITERS THREADS]" >&2; exit 64 ;;
esac
[ $((leases % holders)) -eq 0 ] || { echo "crowd_test.sh: LEASES must be a multiple of HOLDERS" >&2; exit 64; }
[ $((threads % waiters)) -eq 0 ] || { echo "crowd_test.sh: THREADS must be a multiple of WAITERS" >&2; exit 64; }
work=$(mktemp -d)
. "$(dirname "$0")/../support/server_admin.sh"
account=
cleanup() {
  local run
  for run in "$work"/*/; do touch "$run/stop" "$run/done"; done  # the holders and samplers end
  sleep 0.5
  [ -z "$account" ] || drop_account "$account"
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$backend" = mysql ]; then
  server_admin mysql "$admin_url"
  account=crowd_$RANDOM$RANDOM
  limited_account "$account" 300
  crowd_url=$account_url watched=$account
  bound=$((holders + waiters))
else
  # The server's sessions of the test URL's account: PgBouncer's and the LISTEN ones.
  server_admin postgresql "$admin_url"
  watched=$user
  bound=$((20 + waiters))
  # Twice in loaded runs (a CI run, and beside two busy loops here) the peak was 1-2 over the
  # bound, and 48 of 48 in every run alone; the sessions at the peak are printed to tell what
  # they were. A waiter's connection more per process would be 28 over: the check allows 4.
  over=4
fi
# crowd_once DIR: one crowd on a table of its own, its files in DIR; returns 1 on a failure.
# DIR/slowest: the slowest one-row commit the server made meanwhile (sample_commit), in ms.
# (Called as `crowd_once || ...`, where set -e does not apply: each step says how it fails.)
crowd_once() {
  local work=$1 table=crowd_$RANDOM$RANDOM
  mkdir "$work"
  DBLOCK_URL=$admin_url "$dblock" migrate --table "$table" >/dev/null || return 1
  echo 0 >"$work/counter"
  : >"$work/fences"

  sample_peak "$watched" "$work/peak" "$work/done"
  sample_commit "${table}_probe" "$work/slowest" "$work/done" || { echo "FAIL: no probe table" >&2; return 1; }
  start=$(date +%s)
  per_holder=$((leases / holders))
  for i in $(seq "$holders"); do
    ( set +e
      "$hammer" crowd "$crowd_url" "$table" insert "held-$i" "$per_holder" "$ttl_ms" "$work/$i.ready" "$work/stop" \
        >"$work/h$i.out" 2>&1
      echo $? >"$work/h$i.rc" ) &
  done
  until [ "$(ls "$work"/*.ready 2>/dev/null | wc -l)" -ge "$holders" ] ||
    [ "$(ls "$work"/h*.rc 2>/dev/null | wc -l)" -gt 0 ]; do sleep 0.2; done
  held_at=$(date +%s)
  per_waiter=$((threads / waiters))
  for i in $(seq "$waiters"); do
    ( set +e
      "$hammer" count "$crowd_url" "$table" insert queue 1 "$per_waiter" "$work/counter" "$work/fences" \
        >"$work/w$i.out" 2>&1
      echo $? >"$work/w$i.rc" ) &
  done
  while [ "$(ls "$work"/w*.rc 2>/dev/null | wc -l)" -lt "$waiters" ]; do sleep 0.2; done
  queued_for=$(($(date +%s) - held_at))
  touch "$work/stop"  # the holders release and end
  while [ "$(ls "$work"/h*.rc 2>/dev/null | wc -l)" -lt "$holders" ]; do sleep 0.2; done
  touch "$work/done"
  wait
  peak=$(cat "$work/peak")
  ends=$(cat "$work"/*.rc | sort | uniq -c | tr -s ' \n' ' ')
  echo "crowd: $backend: $holders processes held $leases leases while $waiters processes took $threads turns" \
    "on one name in $queued_for s ($(($(date +%s) - start)) s in all); peak $peak server connections" \
    "(bound $bound); the slowest one-row commit $(cat "$work/slowest") ms; exit codes (count code):$ends"
  failed=0
  if [ "$(grep -lvx 0 "$work"/*.rc | wc -l)" -ne 0 ]; then
    # Each kind of message once (figures blanked), then the failed processes' own words.
    echo "FAIL: not every process ended 0; what they said, by kind:" >&2
    cat "$work"/*.out | sed -E 's/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -n 10 >&2
    for rc in $(grep -lvx 0 "$work"/*.rc | head -n 8); do
      echo "  ${rc##*/} $(cat "$rc"): $(head -c 400 "${rc%.rc}.out" | tr '\n' ' ')" >&2
    done
    failed=1
  fi
  [ "$(cat "$work/counter")" -eq "$threads" ] ||
    { echo "FAIL: the counter reads $(cat "$work/counter"), not $threads: two holders at once" >&2; failed=1; }
  sort -n -c "$work/fences" 2>/dev/null && [ "$(sort -u "$work/fences" | wc -l)" -eq "$threads" ] ||
    { echo "FAIL: the fences logged do not rise one grant after another" >&2; failed=1; }
  if [ "$peak" -gt "$bound" ]; then
    if [ "$peak" -gt $((bound + ${over:-0})) ]; then
      echo "FAIL: $peak server connections at once, more than $bound; at the peak:" >&2
      failed=1
    else
      echo "crowd: $peak server connections at once, $((peak - bound)) over $bound (${over:-0} allowed); at the peak:" >&2
    fi
    sed 's/^/  /' "$work/peak.sessions" >&2
  fi
  return "$failed"
}

# A lease is lost when its renewal is not answered within the TTL: when the server itself could
# not commit a one-row UPDATE for seconds (a stalled disk: 60 of 100 processes losing leases
# and a queue phase 5x as long, twice in CI), the crowd runs once more, on a fresh table, and
# that run decides. A loss of ours shows again there; a server convoy of our statements shows
# in renewals, not in the probe's table.
failed=0
crowd_once "$work/1" || failed=1
slowest=$(cat "$work/1/slowest" 2>/dev/null || echo 0)
if [ "$failed" = 1 ] && [ "$slowest" -ge 1000 ]; then
  echo "crowd: the server took $slowest ms to commit a one-row UPDATE meanwhile: once more" >&2
  failed=0
  crowd_once "$work/2" || failed=1
fi
exit "$failed"
