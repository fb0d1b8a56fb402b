# shellcheck shell=bash
# What every service file of scripts/services uses: the state dir, whether we run as root, and
# the messages. Sourced first by scripts/services, which sets `self` (its own path, for the
# restart and failover commands that `env` prints) before it.
# Start daemons with `9>&-`: fd 9 holds the service's lock (scripts/services' `locked`), and a
# server that inherits it blocks every later start/stop of that service.

state=${DBLOCK_SERVICES_DIR:-/tmp/dblock-services}
case "$state" in /*) ;; *) state="$PWD/$state" ;; esac
is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1
# Settings in the caller's environment must not redirect the commands of the service files
# (libpq's PG*, the MariaDB clients' MYSQL_PWD, MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_UNIX_PORT, ...).
for v in $(compgen -e | grep -E '^(PG|MYSQL|MARIADB)' || true); do unset "$v"; done

note() { echo "scripts/services: $*" >&2; }
die() { note "$*"; exit 1; }
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
log_tail() {  # log_tail FILE [BYTE_OFFSET]: the last lines written since the offset, indented
  [ -r "$1" ] || return 0
  echo "--- last lines of $1:" >&2
  tail -c +"$(( ${2:-0} + 1 ))" "$1" | tail -n 25 | sed 's/^/    /' >&2
}
file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }
