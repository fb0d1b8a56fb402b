#!/usr/bin/env bash
# The large torture run of docs/RELIABILITY.md: every backend x strategy until GRANTS grants,
# with SIGKILLs, SIGSTOPs and (where the server can be restarted) server restarts. Backends
# run side by side, a backend's strategies one after another (the restarts would hit the
# neighbours). Prints one JSON line per run to RESULTS and a Markdown table at the end.
#
#   tests/torture/large_run.sh BUILD_DIR [GRANTS] [BACKEND...]
#   e.g. tests/torture/large_run.sh build 100000 sqlite postgresql
#
# It starts its own servers in $DBLOCK_SERVICES_DIR (default /tmp/dblock-torture-services, on
# ports of their own) and stops them at the end, so it does not touch the test servers.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: $0 BUILD_DIR [GRANTS] [BACKEND...]}
grants=${2:-100000}
shift $(( $# > 1 ? 2 : 1 ))
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(sqlite postgresql mysql redis redlock zookeeper etcd)
torture="$build/tests/dblock_torture"
[ -x "$torture" ] || { echo "no $torture: build the tests first" >&2; exit 64; }

export DBLOCK_SERVICES_DIR=${DBLOCK_SERVICES_DIR:-/tmp/dblock-torture-services}
export DBLOCK_PG_PORT=${DBLOCK_PG_PORT:-55401} DBLOCK_MYSQL_PORT=${DBLOCK_MYSQL_PORT:-34401}
export DBLOCK_REDIS_PORT=${DBLOCK_REDIS_PORT:-64401} DBLOCK_REDLOCK_PORT=${DBLOCK_REDLOCK_PORT:-64411}
export DBLOCK_ZK_PORT=${DBLOCK_ZK_PORT:-22401} DBLOCK_ETCD_PORT=${DBLOCK_ETCD_PORT:-24401}
out=${RESULTS:-torture-large-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
servers=()
for b in "${backends[@]}"; do [ "$b" = sqlite ] || servers+=("$b"); done
if [ ${#servers[@]} -gt 0 ]; then
  trap 'scripts/services stop "${servers[@]}" || true' EXIT
  scripts/services start "${servers[@]}"
  eval "$(scripts/services env "${servers[@]}")"
fi

# A run stops at GRANTS, or at this cap: with every backend side by side on 2 cores and this
# much chaos, the slowest pairs grant ~50 per second (SECONDS_CAP overrides it).
seconds=${SECONDS_CAP:-$((grants / 40 + 60))}
# Chaos for a long run: a kill every 5 s, a pause every 7 s, a restart every 30 s.
chaos=(--ttl 1000ms --kill-every 5000ms --stop-every 7000ms)
one() {  # one BACKEND STRATEGY URL [RESTART_CMD]
  local backend=$1 strategy=$2 url=$3 restart=${4:-} extra=()
  [ -z "$restart" ] || extra=(--restart-every 30000ms --restart-cmd "$restart")
  echo "torture: $backend $strategy: started $(date +%T)" >&2
  "$torture" --url "$url" --strategy "$strategy" --grants "$grants" --seconds "$seconds" \
    "${chaos[@]}" "${extra[@]}" >"$out/$backend-$strategy.json" 2>"$out/$backend-$strategy.err"
  echo "torture: $backend $strategy: exit $? $(date +%T)" >&2
}
run_backend() {
  case $1 in
    sqlite)
      for s in insert optimistic; do one sqlite $s "sqlite:$out/torture-$s.db" || true; done ;;
    postgresql)
      for s in insert optimistic for-update advisory; do
        one postgresql $s "$DBLOCK_TEST_PG_URL" "$DBLOCK_TEST_PG_RESTART" || true
      done ;;
    mysql)
      for s in insert optimistic for-update advisory; do
        one mysql $s "$DBLOCK_TEST_MYSQL_URL" "$DBLOCK_TEST_MYSQL_RESTART" || true
      done ;;
    redis) one redis redis "$DBLOCK_TEST_REDIS_URL" "$DBLOCK_TEST_REDIS_RESTART" || true ;;
    redlock) one redlock redlock "$DBLOCK_TEST_REDLOCK_URL" || true ;;  # five nodes: no one restart
    zookeeper) one zookeeper zookeeper "$DBLOCK_TEST_ZK_URL/torture" "$DBLOCK_TEST_ZK_RESTART" || true ;;
    etcd) one etcd etcd "$DBLOCK_TEST_ETCD_URL" "$DBLOCK_TEST_ETCD_RESTART" || true ;;
    *) echo "unknown backend $1" >&2; return 64 ;;
  esac
}
pids=()
for b in "${backends[@]}"; do run_backend "$b" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || true; done

/usr/bin/python3 - "$out" <<'EOF'
import json, pathlib, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    text = f.read_text().strip()
    if not text:
        rows.append(f"| {f.stem} | (no result: see {f.with_suffix('.err').name}) ||||||||||")
        continue
    r = json.loads(text.splitlines()[-1])
    med = r["recovery_median_ms"]
    def cell(n, kind):  # how many faults, and the median recovery when one was measured
        if n == 0: return "—"
        return f"{n} × {med[kind]:.0f}" if r["recovery_ms"][kind] else f"{n} × —"
    rows.append(
        f"| {f.stem.split('-', 1)[0]} | {r['strategy']} | {r['grants']} | {r['seconds']:.0f} | {r['grants_per_second']:.0f} "
        f"| {r['violations']} | {r['lost_increments']} | {r['stale_rejected']} | {r.get('late_loss_reports', 0)} "
        f"| {r['hung_workers']} "
        f"| {cell(r['kills'], 'kill')} | {cell(r['stops'], 'stop_takeover')} | {cell(r['restarts'], 'restart')} |")
print("| backend | strategy | grants | s | grants/s | violations | lost increments | stale writes rejected "
      "| late loss reports | hung workers | kills × median recovery ms | SIGSTOPs × median takeover ms | restarts × median recovery ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
print("\n".join(rows))
EOF
