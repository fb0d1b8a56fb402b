# shellcheck shell=bash
# redlock: five independent Redis nodes on ${DBLOCK_REDLOCK_PORT:-63801} and the next four ports,
#   each like the redis service (redis.sh's rd_start and rd_stop):
#   redlock://127.0.0.1:63801,...,127.0.0.1:63805, and DBLOCK_TEST_REDLOCK_START, which starts
#   any node that is down: a test stops one with SHUTDOWN and brings it back.

rl_port=${DBLOCK_REDLOCK_PORT:-63801}
rl_nodes=5
ports_redlock() {
  local n ports=()
  for (( n = 0; n < rl_nodes; n++ )); do ports+=("$((rl_port + n))"); done
  echo "${ports[*]}"
}

running_redlock() {  # every node up
  local n
  for (( n = 0; n < rl_nodes; n++ )); do [ -n "$(rd_pid "$state/redlock/$n")" ] || return 1; done
}
env_redlock() {
  local n url="redlock://"
  for (( n = 0; n < rl_nodes; n++ )); do url+="127.0.0.1:$((rl_port + n)),"; done
  printf 'export DBLOCK_TEST_REDLOCK_URL=%q\n' "${url%,}"
  printf 'export DBLOCK_TEST_REDLOCK_START=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_REDLOCK_PORT=$rl_port $(printf %q "$self") start redlock"
}
start_redlock() {
  local n
  for (( n = 0; n < rl_nodes; n++ )); do rd_start "redlock node $n" "$state/redlock/$n" "$((rl_port + n))"; done
}
stop_redlock() {
  local n
  for (( n = 0; n < rl_nodes; n++ )); do rd_stop "redlock node $n" "$state/redlock/$n" "$((rl_port + n))"; done
}
