#!/usr/bin/env bash
# The deployment files in contrib/ (installed to share/dblock/): the systemd units pass
# `systemd-analyze verify` without a warning, the Kubernetes CronJob parses as one, and the
# command each runs sweeps a real lock table (SQLite) with the URL given the way the file
# gives it (an environment file; a Secret as an environment variable).
#   contrib_test.sh DBLOCK_BINARY SOURCE_DIR CONFIGURED_SERVICE
set -euo pipefail
dblock=$1 src=$2 service=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "contrib_test: $*" >&2; exit 1; }

# A scratch table with one expired lease in it, for the commands to sweep.
url="sqlite:$work/locks.db"
"$dblock" migrate --url "$url" >/dev/null
sqlite3 "$work/locks.db" "INSERT INTO dblock_locks (name, owner, fence, holds, acquired_at, valid_until, version)
                          VALUES ('gone', 'x', 1, 1, 0, 1, 1)"
expired() { sqlite3 "$work/locks.db" "SELECT COUNT(*) FROM dblock_locks"; }

# systemd: the installed service (ExecStart at the install prefix), with the binary under
# test and a scratch environment file in place of /etc/dblock/sweep.env.
echo "DBLOCK_URL=$url" > "$work/sweep.env"
sed -e "s|^ExecStart=[^ ]*/dblock |ExecStart=$dblock |" -e "s|^EnvironmentFile=.*|EnvironmentFile=$work/sweep.env|" \
  "$service" > "$work/dblock-sweep.service"
grep -q "^ExecStart=$dblock sweep\$" "$work/dblock-sweep.service" || fail "the service's ExecStart is not '<bindir>/dblock sweep'"
cp "$src/contrib/systemd/dblock-sweep.timer" "$work/"
out=$(cd "$work" && systemd-analyze verify ./dblock-sweep.service ./dblock-sweep.timer 2>&1) ||
  fail "systemd-analyze verify failed: $out"
[ -z "$out" ] || fail "systemd-analyze verify warned: $out"
# What systemd would run: ExecStart with the environment file's variables.
exec_start=$(sed -n 's/^ExecStart=//p' "$work/dblock-sweep.service")
(set -a; . "$work/sweep.env"; set +a; $exec_start) >/dev/null || fail "the service's command failed: $exec_start"
[ "$(expired)" = 0 ] || fail "the service's command left the expired lease"

# Kubernetes: a batch/v1 CronJob whose container runs `dblock sweep` with DBLOCK_URL from a Secret.
command=$(/usr/bin/python3 - "$src/contrib/kubernetes/sweep-cronjob.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
assert doc["apiVersion"] == "batch/v1" and doc["kind"] == "CronJob", "not a batch/v1 CronJob"
c = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e for e in c["env"]}
assert "secretKeyRef" in env["DBLOCK_URL"]["valueFrom"], "DBLOCK_URL not from a Secret"
print(" ".join(c["command"]))
PY
) || fail "the CronJob is not what it should be"
[ "$command" = "dblock sweep" ] || fail "the CronJob runs '$command', not 'dblock sweep'"
sqlite3 "$work/locks.db" "INSERT INTO dblock_locks (name, owner, fence, holds, acquired_at, valid_until, version)
                          VALUES ('gone', 'x', 2, 1, 0, 1, 1)"
DBLOCK_URL=$url "$dblock" sweep >/dev/null || fail "the CronJob's command failed"
[ "$(expired)" = 0 ] || fail "the CronJob's command left the expired lease"
echo "contrib_test: systemd units verified, CronJob checked, both commands swept the table"
