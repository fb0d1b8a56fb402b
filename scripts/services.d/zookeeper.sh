# shellcheck shell=bash
# zookeeper: ZooKeeper 3.8 standalone on ${DBLOCK_ZK_PORT:-21819}: zookeeper://127.0.0.1:21819/dblock,
#   and DBLOCK_TEST_ZK_RESTART, a command that restarts this very server (DBLOCK_ZK_JAVA picks
#   another java).
# A standalone server (Debian's libzookeeper-java) in its own JVM.
# tickTime 250 ms, session timeouts allowed from 500 ms to 60 s, so that short test TTLs map to
# real session timeouts. Data (and sessions) survive a restart. zookeeper-ensemble.sh uses
# zk_alive, zk_mode and zk_launch from here.

zk_port=${DBLOCK_ZK_PORT:-21819}
zk_java=${DBLOCK_ZK_JAVA:-java}
zk_dir="$state/zookeeper"
zk_url="zookeeper://127.0.0.1:$zk_port/dblock"
ports_zookeeper() { echo "$zk_port"; }
zk_classpath() {  # the server jar and what it loads (Debian's packaging spreads it over jars)
  local cp="" j
  for j in /usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar \
           /usr/share/java/slf4j-api.jar /usr/share/java/slf4j-nop.jar /usr/share/java/log4j-1.2.jar \
           /usr/share/java/netty-*.jar /usr/share/java/commons-cli.jar /usr/share/java/commons-io.jar \
           /usr/share/java/jline.jar /usr/share/java/metrics-core.jar /usr/share/java/snappy-java.jar; do
    [ -e "$j" ] && cp+="$j:"
  done
  echo "${cp%:}"
}
zk_alive() {  # zk_alive PID [CONFIG]: a live (not zombie) java running that config (ours)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "$stat" == *"(java) "[!Z]* ]] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "${2:-$zk_dir/zoo.cfg}"
}
zk_mode() {  # zk_mode PORT: what the four-letter word srvr says the server is (standalone,
  # leader, follower), or nothing while it does not serve
  local reply
  reply=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && cat <&3' _ "$1" \
          2>/dev/null 9>&-) || return 0
  sed -n 's/^Mode: //p' <<<"$reply"
}
zk_pid() {
  local pid
  pid=$(head -n 1 "$zk_dir/zk.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] && zk_alive "$pid" && echo "$pid"
  return 0
}
zk_ready() { [ "$(zk_mode "$zk_port")" = standalone ]; }
zk_launch() {  # zk_launch DIR: starts the server of DIR/zoo.cfg in the background; prints its pid
  (cd "$1" && exec setsid "$zk_java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
      -cp "$(zk_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$1/zoo.cfg" \
      </dev/null >>"$1/server.log" 2>&1 9>&-) &
  echo "$!" >"$1/zk.pid"
  echo "$!"
}
running_zookeeper() { [ -n "$(zk_pid)" ]; }
env_zookeeper() {
  printf 'export DBLOCK_TEST_ZK_URL=%q\n' "$zk_url"
  printf 'export DBLOCK_TEST_ZK_RESTART=%q\n' \
    "DBLOCK_SERVICES_DIR=$(printf %q "$state") DBLOCK_ZK_PORT=$zk_port $(printf %q "$self") restart zookeeper"
}
start_zookeeper() {
  local t0 pid i off
  t0=$(now)
  [ -r /usr/share/java/zookeeper.jar ] ||
    die "zookeeper: no /usr/share/java/zookeeper.jar (install libzookeeper-java with scripts/deps test)"
  command -v "$zk_java" >/dev/null || die "zookeeper: no java (install default-jre-headless with scripts/deps test)"
  [[ "$zk_port" =~ ^[0-9]+$ ]] || die "zookeeper: DBLOCK_ZK_PORT=$zk_port is not a port number"
  pid=$(zk_pid)
  if [ -n "$pid" ]; then
    zk_ready || die "zookeeper: already running (pid $pid) but not answering on 127.0.0.1:$zk_port"
    note "zookeeper: already running (pid $pid) at $zk_url"
    return 0
  fi
  mkdir -p "$zk_dir/data"
  rm -f "$zk_dir/zk.pid"
  printf '%s\n' "# Written by scripts/services at every start; edits are lost." \
    "tickTime=250" "minSessionTimeout=500" "maxSessionTimeout=60000" \
    "dataDir=$zk_dir/data" "clientPort=$zk_port" "clientPortAddress=127.0.0.1" "maxClientCnxns=0" \
    "admin.enableServer=false" "4lw.commands.whitelist=srvr,ruok,cons,stat" >"$zk_dir/zoo.cfg"
  off=$(file_size "$zk_dir/server.log")
  pid=$(zk_launch "$zk_dir")
  for (( i = 0; i < 600; i++ )); do
    if ! zk_alive "$pid" && [ "$i" -gt 5 ]; then
      note "zookeeper: exited while starting"; log_tail "$zk_dir/server.log" "$off"; exit 1
    fi
    zk_ready && break
    sleep 0.1
  done
  if [ "$i" -ge 600 ]; then
    note "zookeeper: did not answer on 127.0.0.1:$zk_port"; log_tail "$zk_dir/server.log" "$off"; exit 1
  fi
  note "zookeeper: ready in $(since "$t0") (pid $pid) at $zk_url"
}
stop_zookeeper() {
  local pid i
  pid=$(zk_pid)
  if [ -z "$pid" ]; then
    rm -f "$zk_dir/zk.pid"
    note "zookeeper: not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < 200; i++ )); do
    zk_alive "$pid" || break
    sleep 0.05
  done
  if zk_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$zk_dir/zk.pid"
  note "zookeeper: stopped"
}
