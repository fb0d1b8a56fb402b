#!/usr/bin/env bash
# The Jepsen-style run of docs/RELIABILITY.md ("Failover"): the torture run's contending
# workers on a fenced resource (dblock_torture: SIGKILLs and SIGSTOPs of holders) against each
# replicated topology, while a nemesis takes turns, every few seconds, between a failover
# (scripts/services crash: the primary or leader killed, another promoted, the killed one
# rejoined) and a partition (every packet to and from one node's client port dropped with
# nftables for a while, then let through again: clients cut off from that node; on
# PostgreSQL, MariaDB and Redis its replicas and Sentinels reach it by that port too, so
# partitioning the primary isolates it). Prints one JSON line per run to RESULTS and a
# Markdown table at the end: grants, exclusion violations, fence regressions, lost
# increments, hung workers, and per failover and per partition the time from the fault's
# start to the first grant after it (an upper bound on how long nobody could be granted).
#
#   tests/torture/failover.sh BUILD_DIR [SECONDS] [TOPOLOGY...]
#   e.g. tests/torture/failover.sh build 130 postgresql-async zookeeper-ensemble
#
# Topologies: zookeeper-ensemble, postgresql-replicated, postgresql-async, mysql-replicated,
# redis-sentinel (whose asynchronous replication can lose a grant: its violations are counted,
# not failed, and it runs once without WAIT and once with replicas=1).
# Runs one after another (each fault hits the whole machine). It starts the topologies in
# $DBLOCK_SERVICES_DIR (default /tmp/dblock-failover-services, on ports of their own) and stops
# them at the end. Partitions need root and nft (Debian's nftables, which scripts/deps test
# installs); without them it says so and runs failovers only.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The nemesis, as the torture run's restart command: `failover.sh --nemesis TOPOLOGY COUNTER`.
if [ "${1:-}" = --nemesis ]; then
  topology=$2 counter=$3
  n=$(( $(cat "$counter" 2>/dev/null || echo 0) + 1 ))
  echo "$n" >"$counter"
  exec >>"$counter.log" 2>&1  # the torture run discards what its restart command prints
  echo "== fault $n, $(date +%T.%N | cut -c1-12)"
  if (( n % 2 == 1 )) || [ "${DBLOCK_PARTITIONS:-1}" = 0 ]; then
    exec scripts/services crash "$topology"
  fi
  read -r -a ports <<<"$(scripts/services ports "$topology")"
  port=${ports[RANDOM % ${#ports[@]}]}
  table="dblock_nemesis_$$"
  # Input hook on every interface, loopback included; both directions of the node's port, so
  # neither side hears a reset: each waits for its own timeouts, as across a real partition.
  nft -f - <<EOF
table inet $table {
  chain input {
    type filter hook input priority -10;
    tcp dport $port drop
    tcp sport $port drop
  }
}
EOF
  trap 'nft delete table inet "$table"' EXIT
  echo "partition: port $port cut"
  sleep "${DBLOCK_PARTITION_SECONDS:-3}"
  exit 0
fi

build=${1:?usage: $0 BUILD_DIR [SECONDS] [TOPOLOGY...]}
seconds=${2:-130}
shift $(( $# > 1 ? 2 : 1 ))
topologies=("$@")
[ ${#topologies[@]} -gt 0 ] ||
  topologies=(zookeeper-ensemble postgresql-replicated postgresql-async mysql-replicated redis-sentinel)
torture="$build/tests/dblock_torture"
[ -x "$torture" ] || { echo "no $torture: build the tests first" >&2; exit 64; }

export DBLOCK_SERVICES_DIR=${DBLOCK_SERVICES_DIR:-/tmp/dblock-failover-services}
export DBLOCK_ZK_ENSEMBLE_PORT=${DBLOCK_ZK_ENSEMBLE_PORT:-22421}
export DBLOCK_PG_REPLICATED_PORT=${DBLOCK_PG_REPLICATED_PORT:-55431}
export DBLOCK_PG_ASYNC_PORT=${DBLOCK_PG_ASYNC_PORT:-55433}
export DBLOCK_MYSQL_REPLICATED_PORT=${DBLOCK_MYSQL_REPLICATED_PORT:-34481}
export DBLOCK_REDIS_SENTINEL_PORT=${DBLOCK_REDIS_SENTINEL_PORT:-64821}
if [ "${DBLOCK_PARTITIONS:-1}" = 1 ] && { [ "$(id -u)" != 0 ] || ! command -v nft >/dev/null; }; then
  echo "failover.sh: partitions need root and nft (scripts/deps test installs nftables): failovers only" >&2
  export DBLOCK_PARTITIONS=0
fi
out=${RESULTS:-failover-run-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
trap 'scripts/services stop "${topologies[@]}" || true' EXIT
scripts/services start "${topologies[@]}"
eval "$(scripts/services env "${topologies[@]}")"

self="$PWD/tests/torture/failover.sh"
one() {  # one TOPOLOGY STRATEGY URL [LABEL [TORTURE ARGS...]]
  local topology=$1 strategy=$2 url=$3 label=${4:-$2} counter="$out/$1-${4:-$2}.faults"
  shift $(( $# > 3 ? 4 : 3 ))
  rm -f "$counter"
  echo "failover.sh: $topology $label: started $(date +%T)" >&2
  "$torture" --url "$url" --strategy "$strategy" --seconds "$seconds" --ttl 1000ms \
    --kill-every 1500ms --stop-every 2000ms --restart-every 3000ms \
    --restart-cmd "$(printf '%q --nemesis %q %q' "$self" "$topology" "$counter")" "$@" \
    >"$out/$topology-$label.json" 2>"$out/$topology-$label.err" || true
  echo "failover.sh: $topology $label: done $(date +%T)" >&2
}
for t in "${topologies[@]}"; do
  case $t in
    zookeeper-ensemble) one "$t" zookeeper "$DBLOCK_TEST_ZK_ENSEMBLE_URL/jepsen" ;;
    postgresql-replicated)
      one "$t" insert "$DBLOCK_TEST_PG_REPLICATED_URL"
      one "$t" advisory "$DBLOCK_TEST_PG_REPLICATED_URL" ;;
    postgresql-async) one "$t" insert "$DBLOCK_TEST_PG_ASYNC_URL" ;;
    mysql-replicated)
      one "$t" insert "$DBLOCK_TEST_MYSQL_REPLICATED_URL"
      one "$t" for-update "$DBLOCK_TEST_MYSQL_REPLICATED_URL" ;;
    redis-sentinel)
      one "$t" redis "$DBLOCK_TEST_REDIS_SENTINEL_URL" redis --allow-violations yes
      one "$t" redis "$DBLOCK_TEST_REDIS_SENTINEL_URL?replicas=1" redis-replicas1 --allow-violations yes ;;
    *) echo "failover.sh: unknown topology $t" >&2; exit 64 ;;
  esac
done

/usr/bin/python3 - "$out" "${DBLOCK_PARTITIONS:-1}" <<'EOF'
import json, pathlib, statistics, sys
partitions = sys.argv[2] == "1"
def cell(ms):  # how many faults, and the range and median of their recovery, in seconds
    if not ms: return "0"
    return f"{len(ms)}: {min(ms) / 1000:.1f}-{max(ms) / 1000:.1f}, median {statistics.median(ms) / 1000:.1f}"
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    text = f.read_text().strip()
    if not text:
        rows.append(f"| {f.stem} | (no result: see {f.with_suffix('.err').name}) |||||||||")
        continue
    r = json.loads(text.splitlines()[-1])
    faults = r["recovery_ms"]["restart"]  # the nemesis alternates: failovers first, then partitions
    failovers, cuts = (faults[0::2], faults[1::2]) if partitions else (faults, [])
    rows.append(
        f"| {f.stem} | {r['seconds']:.0f} | {r['grants']} | {r['violations']} | {r.get('fence_regressions', '?')} "
        f"| {r['lost_increments']} | {r['stale_rejected']} | {r['hung_workers']} | {cell(failovers)} | {cell(cuts)} |")
print("| topology-strategy | s | grants | violations | fence regressions | lost increments "
      "| stale writes rejected | hung workers | failovers: first grant after (s) | partitions: first grant after (s) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
print("\n".join(rows))
EOF
